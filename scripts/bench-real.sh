#!/usr/bin/env bash
# Benchmarks building real Apache Doris third-party packages with Doris's own
# scripts (../shared/corpus: the 2.1.7 build interface and upstream archives)
# for each target: a cold build (empty step cache) and a no-op rebuild.
# PACKAGES and TARGETS override what is built.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
corpus=${CORPUS:-../shared/corpus}
if [[ ! -f "${corpus}/doris-2.1.7/thirdparty/vars.sh" ]]; then
    echo "bench-real: no real Doris corpus at ${corpus} (set CORPUS=DIR)" >&2
    exit 2
fi
packages=${PACKAGES:-snappy,lz4,bzip,bitshuffle}
targets=${TARGETS:-kunpeng920 graviton3 generic-armv8 x86_64}
go build -o bin/dorisarm ./cmd/dorisarm
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
echo "Doris 2.1.7, packages ${packages}, $(nproc) cores"
printf '%-14s %-14s %10s %10s\n' target compiler cold no-op
for t in ${targets}; do
    args=(build --source "${corpus}/doris-2.1.7" --mirror "${corpus}/mirror" --packages "${packages}" --target "${t}"
        --out "${work}/out" --cache "${work}/cache-${t}" --jobs "$(nproc)")
    t0=$(date +%s.%N)
    bin/dorisarm "${args[@]}" >"${work}/${t}.cold" 2>&1 || { cat "${work}/${t}.cold"; exit 1; }
    t1=$(date +%s.%N)
    bin/dorisarm "${args[@]}" >"${work}/${t}.noop" 2>&1 || { cat "${work}/${t}.noop"; exit 1; }
    t2=$(date +%s.%N)
    grep -q 'up to date' "${work}/${t}.noop" || { echo "bench-real: the rebuild of ${t} was not a no-op" >&2; exit 1; }
    compiler=$(grep -o "${t}  [a-z-]* [0-9.]*" "${work}/${t}.cold" | awk '{print $2" "$3}' | head -1)
    printf '%-14s %-14s %9.1fs %9.2fs\n' "${t}" "${compiler}" "$(echo "${t1} - ${t0}" | bc -l)" "$(echo "${t2} - ${t1}" | bc -l)"
done
