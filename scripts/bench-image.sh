#!/usr/bin/env bash
# Builds the sample for every target (cached under .cache/bench-image), then
# publishes the release to a real docker-registry on loopback three times:
# first publish, re-publish unchanged, and after one target changed
# (kunpeng920 rebuilt with gcc instead of clang). Prints seconds and bytes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=.cache/bench-image
mkdir -p "${work}"
go build -o bin/dorisarm ./cmd/dorisarm
bin/dorisarm build --target all --out "${work}/out" --cache "${work}/cache" >/dev/null 2>"${work}/build.err" || { cat "${work}/build.err"; exit 1; }
. scripts/registry.sh
start_registry
pub() { # label
    local t0 t1
    t0=$(date +%s.%N)
    bin/dorisarm publish --build "${work}/out" --repo "${REGISTRY}/doris" --epoch 1700000000 --base scratch -o json >"${work}/$1.json"
    t1=$(date +%s.%N)
    python3 - "$1" "$(echo "${t1} - ${t0}" | bc -l)" "${work}/$1.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[3]))
print(f"{sys.argv[1]:<24} {float(sys.argv[2]):6.2f}s  tags {len(r['tags']):2d}  uploaded {r['uploaded_blobs']:3d} blobs {r['uploaded_bytes']:>10d} bytes")
PY
}
pub first-publish
pub re-publish
bin/dorisarm build --target kunpeng920 --compiler gcc --out "${work}/out" --cache "${work}/cache" >/dev/null 2>>"${work}/build.err"
pub one-target-changed
# Put kunpeng920 back to its default compiler for the next run.
bin/dorisarm build --target kunpeng920 --out "${work}/out" --cache "${work}/cache" >/dev/null 2>>"${work}/build.err"
