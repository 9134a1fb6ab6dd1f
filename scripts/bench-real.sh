#!/usr/bin/env bash
# Benchmarks building real Apache Doris third-party packages with Doris's own
# scripts (../shared/corpus: the 2.1.7 build interface and upstream archives)
# for each target: a cold build (empty step cache) and a no-op rebuild.
# PACKAGES and TARGETS override what is built. HEAVY=1 builds the packages a
# BE links (OpenSSL, jemalloc, protobuf, brpc, CRoaring …) from the corpus
# mirror plus mirror-substitutes, in a copy of the tree whose MD5 lines name
# the substitutes (scripts/tree-for-mirror.sh). KEEP=DIR keeps the builds.
# With x86_64 among the targets, each ARM target's cold time is also given
# as a ratio to it (cross build / native build, same packages, same run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
corpus=${CORPUS:-../shared/corpus}
if [[ ! -f "${corpus}/doris-2.1.7/thirdparty/vars.sh" ]]; then
    echo "bench-real: no real Doris corpus at ${corpus} (set CORPUS=DIR)" >&2
    exit 2
fi
if [[ -n "${HEAVY:-}" ]]; then
    packages=${PACKAGES:-openssl,jemalloc_doris,gflags,glog,protobuf,leveldb,brpc,croaringbitmap}
    targets=${TARGETS:-kunpeng920 graviton3 x86_64}
else
    packages=${PACKAGES:-snappy,lz4,bzip,bitshuffle}
    targets=${TARGETS:-kunpeng920 graviton3 generic-armv8 x86_64}
fi
go build -o bin/dorisarm ./cmd/dorisarm
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
tree="${corpus}/doris-2.1.7"
mirror="${corpus}/mirror"
if [[ -n "${HEAVY:-}" ]]; then
    mirror="${work}/mirror"
    mkdir "${mirror}"
    for f in "${corpus}"/mirror/* "${corpus}"/mirror-substitutes/*; do
        ln -s "$(realpath "${f}")" "${mirror}/"
    done
    echo "substitute archives (their MD5 written into a copy of the tree):"
    bash scripts/tree-for-mirror.sh "${tree}" "${work}/tree" "${mirror}" | sed 's/^/  /'
    tree="${work}/tree"
fi
out=${KEEP:-${work}/out}
mkdir -p "${out}"
echo "Doris 2.1.7, packages ${packages}, $(nproc) cores"
printf '%-14s %-14s %10s %10s\n' target compiler cold no-op
declare -A cold
for t in ${targets}; do
    args=(build --source "${tree}" --mirror "${mirror}" --packages "${packages}" --target "${t}"
        --out "${out}" --cache "${work}/cache-${t}" --jobs "$(nproc)")
    t0=$(date +%s.%N)
    bin/dorisarm "${args[@]}" >"${work}/${t}.cold" 2>&1 || { cat "${work}/${t}.cold"; exit 1; }
    t1=$(date +%s.%N)
    bin/dorisarm "${args[@]}" >"${work}/${t}.noop" 2>&1 || { cat "${work}/${t}.noop"; exit 1; }
    t2=$(date +%s.%N)
    grep -q 'up to date' "${work}/${t}.noop" || { echo "bench-real: the rebuild of ${t} was not a no-op" >&2; exit 1; }
    compiler=$(grep -o "${t}  [a-z-]* [0-9.]*" "${work}/${t}.cold" | awk '{print $2" "$3}' | head -1)
    cold[${t}]=$(echo "${t1} - ${t0}" | bc -l)
    printf '%-14s %-14s %9.1fs %9.2fs\n' "${t}" "${compiler}" "${cold[${t}]}" "$(echo "${t2} - ${t1}" | bc -l)"
    [[ -z "${KEEP:-}" ]] || cp "${work}/${t}.cold" "${KEEP}/${t}.log"
done
if [[ -n "${cold[x86_64]:-}" ]]; then
    for t in ${targets}; do
        [[ "${t}" == x86_64 ]] && continue
        printf 'cross/native %-14s %.2f (cold %s / x86_64)\n' "${t}" "$(echo "${cold[${t}]} / ${cold[x86_64]}" | bc -l)" "${t}"
    done
fi
