#!/usr/bin/env python3
"""Times dorisarm scan against llvm-objdump-16 -d, for scripts/bench-scan.sh.

Every run is a whole process, started with vfork and exec (Python's
subprocess), so what is timed is the program: exec, its start-up, its work
and its exit. The shell's own fork is left out: bash copies its page tables
to fork, which on this project's VM cost several milliseconds a process.

usage: bench-scan.py DORISARM WORKDIR TARGET RUNS OBJDUMP_RUNS STARTUP_RUNS LIB...

With $BENCH_LINKED set to another copy of the same binary (bench-scan.sh:
the one the linker wrote), it also prints both copies' start-up.
"""
import json
import os
import random
import statistics
import subprocess
import sys
import time


def wall(cmd, cwd):
    """Wall seconds of one run of cmd, output discarded."""
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    dorisarm, work, target = sys.argv[1:4]
    runs, objdump_runs, startup_runs = map(int, sys.argv[4:7])
    libs = sys.argv[7:]
    print(f"\n{'library':<20} {'text_MB':>8} {'scan_s':>9} {'GB/s':>8} {'rss_MB':>8} {'objdump_s':>11} {'speedup':>9} {'pipe_s':>8} {'pipe_x':>7}")
    for lib in libs:
        if not os.path.isfile(lib):
            print(f"bench-scan: {lib} is missing", file=sys.stderr)
            continue
        lib = os.path.realpath(lib)
        out = subprocess.run([dorisarm, "scan", "-o", "json", lib], cwd=work, capture_output=True, text=True).stdout
        text = json.loads(out)["summary"]["text_bytes"]
        scan = [dorisarm, "scan", "--target", target, "-o", "json", lib]
        # The scans are spread between the objdump runs, so that both sides
        # are sampled over the same minutes (this VM's speed drifts with its
        # host).
        scans, ods = [], []
        for k in range(objdump_runs):
            for _ in range(k * runs // objdump_runs, (k + 1) * runs // objdump_runs):
                scans.append(wall(scan, work))
            ods.append(wall(["llvm-objdump-16", "-d", lib], work))
        s, o = statistics.median(scans), statistics.median(ods)
        rss = subprocess.run(["/usr/bin/time", "-f", "%M"] + scan, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr.split()[-1]
        pipe = wall(["bash", "-c", 'llvm-objdump-16 -d "$1" | wc -c', "_", lib], work)
        print(f"{os.path.basename(lib):<20} {text / 1e6:8.1f} {s:9.3f} {text / s / 1e9:8.2f} {int(rss) / 1024:8.1f} {o:11.2f} {o / s:8.0f}x {pipe:8.2f} {pipe / s:6.0f}x")
    version = statistics.median(wall([dorisarm, "version"], work) for _ in range(startup_runs))
    version_json = statistics.median(wall([dorisarm, "version", "-o", "json"], work) for _ in range(startup_runs))
    print(f"\ndorisarm version start-up: {version * 1000:.1f} ms (median of {startup_runs} runs; -o json: {version_json * 1000:.1f} ms)")
    linked = os.environ.get("BENCH_LINKED")
    if linked:
        # The same bytes, as the linker left them (see bench-scan.sh), and
        # the installed copy, in a random order each round (no side is
        # always the one that runs after the other).
        rng = random.Random(1)
        pairs = []
        for _ in range(startup_runs):
            first_linked = rng.random() < 0.5
            a = wall([linked if first_linked else dorisarm, "version"], work)
            b = wall([dorisarm if first_linked else linked, "version"], work)
            pairs.append((a, b) if first_linked else (b, a))
        print(f"  the same binary as the linker wrote it ({linked}): {statistics.median(p[0] for p in pairs) * 1000:.1f} ms, "
              f"installed copy {statistics.median(p[1] for p in pairs) * 1000:.1f} ms (random order each round, median of {startup_runs})")
    print(f"scan: median of {runs}, process start included, --target {target}, spread between the objdump runs; "
          f"objdump: median of {objdump_runs} to /dev/null; pipe: one run into wc -c; cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
