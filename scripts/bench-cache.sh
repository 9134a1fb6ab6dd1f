#!/usr/bin/env bash
# The registry-backed step cache on the sample, per target:
#   cold   nothing cached: the target OS's sysroot is made and every step
#          runs; every step result is offered to a docker-registry on
#          loopback (--cache-to);
#   warm   an empty step cache (--cache) on a machine that has the sysroot
#          (--sysroot-cache), restoring every step from the registry
#          (--cache-from): what a second runner with a sysroot volume sees;
#   fresh  an empty step cache and an empty sysroot store: the sysroot is
#          made again, the steps come from the registry.
# Prints the three times, cold/warm, how many steps came from the registry,
# and whether a compiler ran in the warm build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go build -o bin/dorisarm ./cmd/dorisarm
. scripts/registry.sh
start_registry
work=$(mktemp -d)
trap 'kill ${REGISTRY_PID} 2>/dev/null; rm -rf "${REGISTRY_DIR}" "${work}"' EXIT
repo="${REGISTRY}/dorisarm/cache"
now() { date +%s.%N; }
timed() { # name args...: runs dorisarm build, prints its seconds
    local t0
    t0=$(now)
    bin/dorisarm build "${@:2}" >/dev/null 2>"${work}/err" || { cat "${work}/err" >&2; exit 1; }
    echo "$(now) - ${t0}" | bc -l
}
printf '%-14s %8s %8s %8s %8s %8s %10s\n' target cold_s warm_s fresh_s speedup pulled compilers
for t in ${TARGETS:-kunpeng920 graviton3 generic-armv8}; do
    cold=$(timed cold --target "${t}" --out "${work}/${t}/out-cold" --cache "${work}/${t}/cold" --sysroot-cache "${work}/${t}/sysroots" --cache-to "${repo}" --cache-trust-unsigned)
    warm=$(timed warm --target "${t}" --out "${work}/${t}/out-warm" --cache "${work}/${t}/warm" --sysroot-cache "${work}/${t}/sysroots" --cache-from "${repo}" --cache-trust-unsigned)
    fresh=$(timed fresh --target "${t}" --out "${work}/${t}/out-fresh" --cache "${work}/${t}/fresh" --sysroot-cache "${work}/${t}/sysroots-fresh" --cache-from "${repo}" --cache-trust-unsigned)
    pulled=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["cache"]; print("%d/%d" % (len(c.get("pulled") or []), len(c["hits"])+len(c["misses"])))' "${work}/${t}/out-warm/2.1.8/${t}/dorisarm-build.json")
    compilers=$(find "${work}/${t}/warm/work" -path "*/logs/compiler-*.log" | wc -l)
    printf '%-14s %8.1f %8.2f %8.1f %7.0fx %8s %10s\n' "${t}" "${cold}" "${warm}" "${fresh}" "$(echo "${cold}/${warm}" | bc -l)" "${pulled}" "${compilers}"
done
echo "cores: $(nproc)"
