#!/usr/bin/env bash
# Benchmarks dorisarm scan against llvm-objdump -d on real Debian arm64
# libraries: libLLVM-16 (~47 MB of .text), libz3 (~18 MB) and libcrypto.so.3
# (~2.4 MB). Downloads go to .cache/bench (outside git). Prints wall time,
# .text throughput, peak RSS and the speed-up over llvm-objdump.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cache=.cache/bench
mkdir -p "${cache}"
if [[ ! -f "${cache}/x/usr/lib/aarch64-linux-gnu/libLLVM-16.so.1" ]]; then
    (cd "${cache}" && apt-get download libllvm16:arm64 libz3-4:arm64 >/dev/null 2>&1 &&
        for d in *.deb; do dpkg-deb -x "${d}" x; done)
fi
go build -o bin/dorisarm ./cmd/dorisarm
libs=(
    "${cache}/x/usr/lib/aarch64-linux-gnu/libLLVM-16.so.1"
    "${cache}/x/usr/lib/aarch64-linux-gnu/libz3.so.4"
    /usr/lib/aarch64-linux-gnu/libcrypto.so.3
)
now() { date +%s.%N; }
printf '%-18s %10s %10s %10s %10s %12s %9s\n' library text_MB scan_s GB/s rss_MB objdump_s speedup
for lib in "${libs[@]}"; do
    [[ -f "${lib}" ]] || continue
    text=$(bin/dorisarm scan --format json "${lib}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["text_bytes"])')
    # Best of three for the scan; process start included.
    best=999
    for _ in 1 2 3; do
        t0=$(now)
        bin/dorisarm scan --format json "${lib}" >/dev/null
        t=$(echo "$(now) - ${t0}" | bc -l)
        best=$(echo "if (${t} < ${best}) ${t} else ${best}" | bc -l)
    done
    rss=$( { /usr/bin/time -f '%M' bin/dorisarm scan --format json "${lib}" >/dev/null; } 2>&1 | tail -1)
    t0=$(now)
    llvm-objdump-16 -d "${lib}" >/dev/null
    od=$(echo "$(now) - ${t0}" | bc -l)
    printf '%-18s %10.1f %10.3f %10.2f %10.1f %12.2f %8.0fx\n' "$(basename "${lib}")" "$(echo "${text}/1000000" | bc -l)" "${best}" \
        "$(echo "${text}/${best}/1000000000" | bc -l)" "$(echo "${rss}/1024" | bc -l)" "${od}" "$(echo "${od}/${best}" | bc -l)"
done
echo "cores: $(nproc); classifier alone: go test -bench Scan ./internal/isa"
