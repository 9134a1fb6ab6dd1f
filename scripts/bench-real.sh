#!/usr/bin/env bash
# Benchmarks building real Apache Doris third-party packages with Doris's own
# scripts (../shared/corpus: the 2.1.7 build interface and upstream archives)
# for each target: a cold build (empty step cache) and a no-op rebuild.
# PACKAGES and TARGETS override what is built. Then it builds one
# target's packages one after another and at once (DAG_TARGET,
# DAG_PACKAGES; NO_DAG=1 skips it, DAG_ONLY=1 does only it) and three
# targets in one build (MULTI_TARGETS, MULTI_PACKAGES). HEAVY=1 builds the packages a
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
[[ -n "${DAG_ONLY:-}" ]] && targets=""
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

# Package builds at once (issue 34): one target's packages one after
# another, as Doris's own script builds them (--packages-at-once 1), and
# at once within the same --jobs budget, each from an empty cache.
[[ -n "${NO_DAG:-}" ]] && exit 0
dag_target=${DAG_TARGET:-kunpeng920}
dag_packages=${DAG_PACKAGES:-snappy,lz4,bzip,bitshuffle,base64,gflags,glog,leveldb}
declare -A wall
for mode in serial dag; do
    extra=()
    [[ "${mode}" == serial ]] && extra=(--packages-at-once 1)
    t0=$(date +%s.%N)
    bin/dorisarm build --source "${tree}" --mirror "${mirror}" --packages "${dag_packages}" --target "${dag_target}" \
        --out "${work}/out-${mode}" --cache "${work}/cache-${mode}" --jobs "$(nproc)" "${extra[@]}" >"${work}/${mode}.log" 2>&1 ||
        { cat "${work}/${mode}.log"; exit 1; }
    wall[${mode}]=$(echo "$(date +%s.%N) - ${t0}" | bc -l)
done
echo "${dag_target}, packages ${dag_packages}, --jobs $(nproc):"
printf '  one at a time %.1fs, at once %.1fs: at once / one at a time = %.2f\n' "${wall[serial]}" "${wall[dag]}" \
    "$(echo "${wall[dag]} / ${wall[serial]}" | bc -l)"

# Targets at once: one build of three targets runs every step whose key
# does not depend on the target (fetch, unpack, the packages' patches) in
# one of them; the records of the others show it restored.
multi=${MULTI_TARGETS:-kunpeng920,graviton3,generic-armv8}
bin/dorisarm build --source "${tree}" --mirror "${mirror}" --packages "${MULTI_PACKAGES:-snappy,lz4,bzip,bitshuffle}" --target "${multi}" \
    --out "${work}/out-multi" --cache "${work}/cache-multi" --jobs "$(nproc)" >"${work}/multi.log" 2>&1 || { cat "${work}/multi.log"; exit 1; }
python3 - "${work}/out-multi" "${multi}" <<'PY'
import glob, json, sys
out, targets = sys.argv[1], sys.argv[2].split(",")
ran = {}   # key -> targets whose record says its step ran
uses = {}  # key -> targets whose plan has it
for t in targets:
    (path,) = glob.glob(f"{out}/*/{t}/dorisarm-build.json")
    rec = json.load(open(path))
    misses = set(rec["cache"]["misses"])
    for s in rec["steps"]:
        uses.setdefault(s["key"], []).append(t)
        if s["id"] in misses:
            ran.setdefault(s["key"], []).append(t)
shared = [k for k, ts in uses.items() if len(ts) == len(targets)]
once = [k for k in shared if len(ran.get(k, [])) == 1]
twice = [k for k in shared if len(ran.get(k, [])) > 1]
# A step that ran in none was made by a target's first attempt, whose
# compiler the toolchain step then rejected (the target was planned again
# and its record is the second attempt's, which restored the step).
print(f"targets at once ({', '.join(targets)}): {len(shared)} steps with one key for all; "
      f"{len(once)} ran in exactly one target, {len(shared) - len(once) - len(twice)} in an attempt planned again, {len(twice)} in more than one")
sys.exit(0 if shared and not twice else 1)
PY
