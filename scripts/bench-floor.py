#!/usr/bin/env python3
"""Times the floor programs of bench-floor.sh against dorisarm.

usage: bench-floor.py RUNS BINDIR DORISARM LIB

Each round runs every command once, in a random order, as a whole process
(vfork and exec, as bench-scan.py does); medians over RUNS rounds. Package
init is the sum of GODEBUG=inittrace=1's per-package times, one run each
round, median over the rounds.
"""
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time


def wall(cmd, cwd, env=None):
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def init_ms(cmd, cwd):
    env = dict(os.environ, GODEBUG="inittrace=1")
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # "init PKG @T ms, D ms clock, ..." : D is the package's init time.
    return sum(float(line.split()[4]) for line in p.stderr.splitlines() if line.startswith("init "))


def main():
    runs = int(sys.argv[1])
    bindir, dorisarm, lib = sys.argv[2:5]
    lib = os.path.realpath(lib)
    b = lambda n: os.path.join(bindir, n)
    short = os.path.basename(lib)
    cmds = [
        ("empty Go program", [b("empty")], True),
        ("dorisarm's dependencies alone", [b("deps")], True),
        (f"  + read {short}'s code", [b("read"), lib], False),
        ("dorisarm version", [dorisarm, "version"], True),
        (f"dorisarm scan {short}", [dorisarm, "scan", "--target", "kunpeng920", "-o", "json", lib], False),
    ]
    rng = random.Random(1)
    times = [[] for _ in cmds]
    inits = [[] for _ in cmds]
    with tempfile.TemporaryDirectory() as work:
        for _ in range(runs):
            order = list(range(len(cmds)))
            rng.shuffle(order)
            for i in order:
                times[i].append(wall(cmds[i][1], work))
                if cmds[i][2]:
                    inits[i].append(init_ms(cmds[i][1], work))
        od = statistics.median(wall(["llvm-objdump-16", "-d", lib], work) for _ in range(3))
    print(f"{'program':<40} {'wall_ms':>8} {'init_ms':>8}")
    for (name, _, _), t, i in zip(cmds, times, inits):
        init = f"{statistics.median(i):8.2f}" if i else f"{'':>8}"
        print(f"{name:<40} {statistics.median(t) * 1000:8.2f} {init}")
    print(f"llvm-objdump-16 -d {short}: {od:.2f} s (median of 3); 300x of it is {od / 300 * 1000:.1f} ms")
    print(f"wall: median of {runs} rounds, random order each round; init: sum over packages, median of {runs}")


if __name__ == "__main__":
    main()
