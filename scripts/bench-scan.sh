#!/usr/bin/env bash
# Benchmarks dorisarm against llvm-objdump-16 -d on real Debian 12 arm64
# libraries, in one run: librocksdb (~6 MB of .text), libLLVM-16 (~47 MB),
# libz3 (~18 MB) and libcrypto.so.3 (~2.4 MB) when installed. Downloads go to
# .cache/bench (outside git).
#
# Both sides are whole processes started by this script, so dorisarm's
# start-up is included: scan_s is the median of RUNS runs of
# `dorisarm scan --target kunpeng920 -o json LIB` (the target policy, from the
# built-in matrix, as a release manager runs it), objdump_s the median of
# OBJDUMP_RUNS runs of `llvm-objdump-16 -d LIB > /dev/null` (disassembly
# alone: the hardest baseline) and speedup their ratio; the scans are run
# between the objdump runs, so both are sampled over the same minutes.
# dorisarm is linked statically (CGO_ENABLED=0), as make build does. pipe_s is one run of
# `llvm-objdump-16 -d LIB | wc -c`, the shape of a check done by hand
# (objdump piped into grep), and pipe_x its ratio to scan_s. It also prints
# `dorisarm version` start-up: the median of STARTUP_RUNS runs.
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
dorisarm=$(pwd)/bin/dorisarm
# Run from an empty directory, as the binary alone would be.
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

# seconds CMD...: wall nanoseconds of one run, output discarded
# ($EPOCHREALTIME: no process of its own is timed).
seconds() {
    local t0 t1
    t0=${EPOCHREALTIME/./}
    "$@" >/dev/null 2>&1 || true
    t1=${EPOCHREALTIME/./}
    echo "$(( (t1 - t0) * 1000 ))"
}
# mid NS...: the median of nanosecond counts, in seconds.
mid() {
    printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf "%.4f\n", m / 1e9}'
}
# median N CMD...: median wall seconds of N runs.
median() {
    local n=$1; shift
    local i ns=()
    for ((i = 0; i < n; i++)); do ns+=("$(seconds "$@")"); done
    mid "${ns[@]}"
}

(cd "${work}" && "${dorisarm}" version) | head -2
libs=(
    "${libdir}/librocksdb.so.7.8"
    "${libdir}/libLLVM-16.so.1"
    "${libdir}/libz3.so.4"
    /usr/lib/aarch64-linux-gnu/libcrypto.so.3
)
printf '\n%-20s %8s %9s %8s %8s %11s %9s %8s %7s\n' library text_MB scan_s GB/s rss_MB objdump_s speedup pipe_s pipe_x
for lib in "${libs[@]}"; do
    [[ -f "${lib}" ]] || { echo "bench-scan: ${lib} is missing" >&2; continue; }
    lib=$(realpath "${lib}")
    text=$(cd "${work}" && "${dorisarm}" scan -o json "${lib}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["text_bytes"])')
    # The scans are spread between the objdump runs, so that both sides are
    # sampled over the same minutes (this VM's speed drifts with its host).
    scans=() ods=()
    for ((k = 0; k < OBJDUMP_RUNS; k++)); do
        for ((i = k * RUNS / OBJDUMP_RUNS; i < (k + 1) * RUNS / OBJDUMP_RUNS; i++)); do
            scans+=("$(cd "${work}" && seconds "${dorisarm}" scan --target "${TARGET}" -o json "${lib}")")
        done
        ods+=("$(seconds llvm-objdump-16 -d "${lib}")")
    done
    scan=$(mid "${scans[@]}")
    od=$(mid "${ods[@]}")
    rss=$( { cd "${work}" && /usr/bin/time -f '%M' "${dorisarm}" scan --target "${TARGET}" -o json "${lib}" >/dev/null || true; } 2>&1 | tail -1)
    pipe=$(median 1 bash -c 'llvm-objdump-16 -d "$1" | wc -c' _ "${lib}")
    awk -v n="$(basename "${lib}")" -v t="${text}" -v s="${scan}" -v r="${rss}" -v o="${od}" -v p="${pipe}" \
        'BEGIN { printf "%-20s %8.1f %9.3f %8.2f %8.1f %11.2f %8.0fx %8.2f %6.0fx\n", n, t/1e6, s, t/s/1e9, r/1024, o, o/s, p, p/s }'
done
startup=$(cd "${work}" && median "${STARTUP_RUNS}" "${dorisarm}" version)
startup_json=$(cd "${work}" && median "${STARTUP_RUNS}" "${dorisarm}" version -o json)
printf '\ndorisarm version start-up: %.1f ms (median of %d runs; -o json: %.1f ms)\n' \
    "$(awk -v s="${startup}" 'BEGIN { print s * 1000 }')" "${STARTUP_RUNS}" "$(awk -v s="${startup_json}" 'BEGIN { print s * 1000 }')"
echo "scan: median of ${RUNS}, process start included, --target ${TARGET}, spread between the objdump runs; objdump: median of ${OBJDUMP_RUNS} to /dev/null; pipe: one run into wc -c; cores: $(nproc)"
echo "classifier alone: go test -bench Scan ./internal/isa"
