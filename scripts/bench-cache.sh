#!/usr/bin/env bash
# The registry-backed step cache on the sample: a cold build of each target
# offering its steps to a docker-registry on loopback (--cache-to), then a
# build on a new, empty cache directory and output that restores from it
# (--cache-from). Prints both times, the speed-up and how many steps came
# from the registry.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go build -o bin/dorisarm ./cmd/dorisarm
. scripts/registry.sh
start_registry
work=$(mktemp -d)
trap 'kill ${REGISTRY_PID} 2>/dev/null; rm -rf "${REGISTRY_DIR}" "${work}"' EXIT
repo="${REGISTRY}/dorisarm/cache"
now() { date +%s.%N; }
printf '%-14s %8s %8s %8s %8s\n' target cold_s warm_s speedup pulled
for t in ${TARGETS:-kunpeng920 graviton3 generic-armv8}; do
    t0=$(now)
    bin/dorisarm build --target "${t}" --out "${work}/out-cold" --cache "${work}/cold" --sysroot-cache "${work}/sysroots" --cache-to "${repo}" >/dev/null 2>"${work}/err" || { cat "${work}/err"; exit 1; }
    cold=$(echo "$(now) - ${t0}" | bc -l)
    t0=$(now)
    bin/dorisarm build --target "${t}" --out "${work}/out-warm-${t}" --cache "${work}/warm-${t}" --sysroot-cache "${work}/sysroots" --cache-from "${repo}" >/dev/null 2>"${work}/err" || { cat "${work}/err"; exit 1; }
    warm=$(echo "$(now) - ${t0}" | bc -l)
    pulled=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["cache"]; print("%d/%d" % (len(c.get("pulled") or []), len(c["hits"])+len(c["misses"])))' "${work}/out-warm-${t}/2.1.8/${t}/dorisarm-build.json")
    compilers=$(find "${work}/warm-${t}/work" -path "*/logs/compiler-*.log" | wc -l)
    [[ ${compilers} == 0 ]] || echo "warning: a compiler ran in the warm build of ${t}"
    printf '%-14s %8.1f %8.2f %7.0fx %8s\n' "${t}" "${cold}" "${warm}" "$(echo "${cold}/${warm}" | bc -l)" "${pulled}"
done
echo "cores: $(nproc)"
