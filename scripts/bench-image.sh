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
reg=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' "${reg}/data" "${port}" >"${reg}/config.yml"
docker-registry serve "${reg}/config.yml" >/dev/null 2>&1 &
pid=$!
trap 'kill ${pid} 2>/dev/null; rm -rf "${reg}"' EXIT
for _ in $(seq 100); do curl -fs "http://127.0.0.1:${port}/v2/" >/dev/null && break; sleep 0.05; done
pub() { # label
    local t0 t1
    t0=$(date +%s.%N)
    bin/dorisarm publish --build "${work}/out" --repo "127.0.0.1:${port}/doris" --epoch 1700000000 --base scratch --format json >"${work}/$1.json"
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
