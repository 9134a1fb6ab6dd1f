#!/usr/bin/env bash
# Benchmarks dorisarm build on the sample for every arm64 target: a cold
# build (empty cache), a no-op rebuild, and a rebuild after one patch changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go build -o bin/dorisarm ./cmd/dorisarm
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
targets=$(bin/dorisarm matrix -o json | python3 -c 'import json,sys; print(",".join(sorted({c["target"] for c in json.load(sys.stdin) if c["isa"]=="aarch64"})))')
run() { # label, extra args...
    local label=$1
    shift
    local t0 t1
    t0=$(date +%s.%N)
    bin/dorisarm build --target "${targets}" --out "${work}/out" --cache "${work}/cache" "$@" >"${work}/${label}.txt" 2>"${work}/${label}.err"
    t1=$(date +%s.%N)
    local hits misses current
    # "cache: H of N cacheable steps": N-H steps ran.
    hits=$( (grep -o 'cache: [0-9]* of [0-9]*' "${work}/${label}.txt" || true) | awk '{s+=$2} END {print s+0}')
    misses=$( (grep -o 'cache: [0-9]* of [0-9]*' "${work}/${label}.txt" || true) | awk '{s+=$4-$2} END {print s+0}')
    current=$(grep -c 'up to date' "${work}/${label}.txt" || true)
    printf '%-22s %8.1fs  steps from the cache %3d  steps run %3d  targets up to date %d\n' "${label}" "$(echo "${t1} - ${t0}" | bc -l)" "${hits}" "${misses}" "${current}"
    echo "${t1} - ${t0}" | bc -l >"${work}/${label}.time"
}
echo "targets: ${targets}"
run cold
run no-op
# Touch one patch (in a copy of the recipe's patch directory).
cp -a recipes "${work}/recipes"
cp -a examples/minidoris/patches "${work}/patches"
sed -i 's/^Last-Update: .*/Last-Update: 2026-12-31/' "${work}/patches/simdprobe/0001-sve-off.patch"
sed -i "s|^patches: .*|patches: ${work}/patches|" "${work}/recipes/minidoris.yaml"
run one-patch-changed --recipe "${work}/recipes/minidoris.yaml"
printf 'no-op rebuild is %.1f%% of the cold build\n' "$(echo "100 * $(cat "${work}/no-op.time") / $(cat "${work}/cold.time")" | bc -l)"
