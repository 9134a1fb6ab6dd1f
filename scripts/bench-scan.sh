#!/usr/bin/env bash
# Benchmarks dorisarm against llvm-objdump-16 -d on real Debian 12 arm64
# libraries, in one run: librocksdb (~6 MB of .text), libLLVM-16 (~47 MB),
# libz3 (~18 MB) and libcrypto.so.3 (~2.4 MB) when installed. Downloads go to
# .cache/bench (outside git).
#
# Both sides are whole processes, started by scripts/bench-scan.py with vfork
# and exec (the shell's own fork, costly on a VM, is left out), so dorisarm's
# start-up is included: scan_s is the median of RUNS runs of
# `dorisarm scan --target kunpeng920 -o json LIB` (the target policy, from the
# built-in matrix, as a release manager runs it), objdump_s the median of
# OBJDUMP_RUNS runs of `llvm-objdump-16 -d LIB > /dev/null` (disassembly
# alone: the hardest baseline) and speedup their ratio; the scans are run
# between the objdump runs, so both are sampled over the same minutes.
# dorisarm is linked statically (CGO_ENABLED=0), as make build does. pipe_s is one run of
# `llvm-objdump-16 -d LIB | wc -c`, the shape of a check done by hand
# (objdump piped into grep), and pipe_x its ratio to scan_s. It also prints
# `dorisarm version` start-up: the median of STARTUP_RUNS runs. Last, the
# floor under those numbers (scripts/bench-floor.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS=${RUNS:-21} # a scan takes milliseconds: enough runs that one slow start does not move the median
OBJDUMP_RUNS=${OBJDUMP_RUNS:-3}
STARTUP_RUNS=${STARTUP_RUNS:-21}
TARGET=${TARGET:-kunpeng920}
cache=.cache/bench
libdir="${cache}/x/usr/lib/aarch64-linux-gnu"
mkdir -p "${cache}"
for pkg in libllvm16:arm64 libz3-4:arm64 librocksdb7.8:arm64; do
    name=${pkg%%:*}
    if ! ls "${cache}/${name}"_*.deb >/dev/null 2>&1; then
        (cd "${cache}" && apt-get download "${pkg}" >/dev/null) ||
            { echo "bench-scan: apt-get download ${pkg} failed (needs arm64 in dpkg --print-foreign-architectures and apt-get update)" >&2; exit 2; }
        dpkg-deb -x "$(ls "${cache}/${name}"_*.deb | head -1)" "${cache}/x"
    fi
done
command -v llvm-objdump-16 >/dev/null || { echo "bench-scan: llvm-objdump-16 is not installed (make deps)" >&2; exit 2; }
CGO_ENABLED=0 go build -ldflags "-X main.version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)" -o bin/dorisarm ./cmd/dorisarm
# Run from an empty directory, as the binary alone would be.
work=$(mktemp -d)
bindir=$(mktemp -d)
trap 'rm -rf "${work}" "${bindir}"' EXIT
# What is timed is the binary as installed: a copy written with write(2),
# as tar, a package manager or install(1) leave it. A binary the linker has
# just written (through a mapping) is in the page cache in 4 KiB pages; one
# that go build copied from its cache, or any written copy, is in large
# folios (ext4, Linux 6.18, on this project's VM), which the kernel maps in
# fewer steps: the same bytes started 0.75-2.4 ms sooner in four runs of 61
# to 81 rounds on an idle machine, and no sooner in one after the objdump
# runs. bin/dorisarm's own start-up is printed too.
install -m 0755 bin/dorisarm "${bindir}/dorisarm"
dorisarm=${bindir}/dorisarm
export BENCH_LINKED=$(pwd)/bin/dorisarm

(cd "${work}" && "${dorisarm}" version) | head -2
libs=(
    "${libdir}/librocksdb.so.7.8"
    "${libdir}/libLLVM-16.so.1"
    "${libdir}/libz3.so.4"
    /usr/lib/aarch64-linux-gnu/libcrypto.so.3
)
python3 scripts/bench-scan.py "${dorisarm}" "${work}" "${TARGET}" "${RUNS}" "${OBJDUMP_RUNS}" "${STARTUP_RUNS}" "${libs[@]}"
echo "classifier alone: go test -bench Scan ./internal/isa"
# What the Go runtime and dorisarm's dependencies cost on this machine
# before any of dorisarm's own work, beside dorisarm (scripts/bench-floor.sh).
bash scripts/bench-floor.sh "${dorisarm}" "${libdir}/librocksdb.so.7.8"
