#!/usr/bin/env bash
# The main job on the bundled sample (examples/minidoris), start to end:
# build every target (cross compilers, patches, PGO+ThinLTO, smoke runs under
# qemu, the scan gate), rebuild (nothing to do), scan, publish the release to
# a staging repository of a docker-registry this script starts on loopback
# (and stops at the end), sign and attest it with a throw-away cosign key,
# verify it, promote it to a release repository, and write the release
# report (Markdown, HTML and, when Chromium is installed, a screenshot).
# Run by `make demo` after the dependencies are installed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=${DEMO_OUT:-out/demo}
cache=${DEMO_CACHE:-.cache/demo}
bin=bin/dorisarm
version=2.1.8
t0=$(date +%s.%N)

step() { printf '\n== %s\n' "$*"; }
elapsed() { printf '%.1f' "$(echo "$(date +%s.%N) - ${t0}" | bc)"; }

step "the matrix: every cell, its CPU, OS, compilers and -march"
${bin} matrix

step "plans (kunpeng920 shown; --target all plans every cell)"
${bin} plan --target kunpeng920
mkdir -p "${out}"
${bin} plan --target all --output json >"${out}/plans.json.tmp"
mv "${out}/plans.json.tmp" "${out}/plans.json"

step "build every target"
${bin} build --target all --out "${out}" --cache "${cache}"

step "build again: nothing to do"
${bin} build --target all --out "${out}" --cache "${cache}"

step "every target against its OS's glibc, checked with readelf -V (not dorisarm): no waiver"
python3 - "${out}/${version}" <<'PY'
import json, os, re, subprocess, sys
root, bad = sys.argv[1], 0
def ver(v): return tuple(int(x) for x in v.split("."))
for t in sorted(os.listdir(root)):
    rec = json.load(open(os.path.join(root, t, "dorisarm-build.json")))
    cell, need, files = rec["cell"], (0,), 0
    for d, _, fs in os.walk(os.path.join(root, t)):
        for f in fs:
            p = os.path.join(d, f)
            if os.path.islink(p) or open(p, "rb").read(4) != b"\x7fELF":
                continue
            files += 1
            out = subprocess.run(["readelf", "-V", p], capture_output=True, text=True).stdout
            for v in re.findall(r"GLIBC_(2\.[0-9]+)", out):
                need = max(need, ver(v))
    sr = cell.get("sysroot") or {}
    ok = need <= ver(cell["glibc_max"])
    bad += not ok
    print(f"  {t:14} {files:2} ELF  need GLIBC_{'.'.join(map(str, need)):5} {cell['os']:18} has {cell['glibc_max']:5} "
          f"{'ok' if ok else 'TOO NEW'}  sysroot {sr.get('name', 'none (waived: ' + cell.get('sysroot_waiver', '') + ')')} (glibc {sr.get('glibc', '-')})")
sys.exit(1 if bad else 0)
PY

step "scan the kunpeng920 build (Markdown report)"
${bin} scan --target kunpeng920 --allow recipes/minidoris-scan-allow.yaml -o markdown "${out}/${version}/kunpeng920" >"${out}/scan-kunpeng920.md"
echo "wrote ${out}/scan-kunpeng920.md"

step "the graviton3 build (SVE) scanned for kunpeng920 must fail"
rc=0
${bin} scan --target kunpeng920 --allow recipes/minidoris-scan-allow.yaml "${out}/${version}/graviton3" >"${out}/scan-graviton3-as-kunpeng920.txt" || rc=$?
grep -E '^(be/|  ERROR|[0-9]+ files)' "${out}/scan-graviton3-as-kunpeng920.txt" | sed -n 1,8p
if [[ ${rc} -ne 1 ]]; then echo "expected exit 1 (violations), got ${rc}" >&2; exit 1; fi
echo "exit 1, as it should"

step "images as an OCI layout"
${bin} image build --build "${out}" --out "oci:${out}/images" --base scratch
${bin} image inspect "oci:${out}/images:doris-be:${version}"

step "a docker-registry on loopback for staging and release"
. scripts/registry.sh
start_registry
staging="${REGISTRY}/staging"
release="${REGISTRY}/release"
echo "registry ${REGISTRY} (stopped when the demo ends)"

step "publish to ${staging}"
${bin} publish --build "${out}" --repo "${staging}" --base scratch

step "a throw-away cosign key; sign and attest every image"
rm -rf "${out}/keys"
export COSIGN_PASSWORD=demo-only
${bin} keygen --out "${out}/keys"
tags=(doris-be:${version} doris-fe:${version})
for t in $(${bin} matrix --output json | python3 -c 'import json,sys; print(" ".join(sorted({c["target"] for c in json.load(sys.stdin)})))'); do
    tags+=("doris-be:${version}-${t}")
done
refs=()
for t in "${tags[@]}"; do refs+=("${staging}/${t}"); done
${bin} sign --key "${out}/keys/cosign.key" --build "${out}" "${refs[@]}"

step "verify the staging release"
${bin} verify --key "${out}/keys/cosign.pub" "${staging}/doris-be:${version}"

step "promote staging -> release, by digest, every gate checked"
for t in "${tags[@]}"; do
    ${bin} promote --key "${out}/keys/cosign.pub" --sign-key "${out}/keys/cosign.key" --yes "${staging}/${t}" "${release}/${t}"
done

step "the release report"
${bin} report --release "${out}" --images "${release}" --key "${out}/keys/cosign.pub" \
    --markdown "${out}/report.md" --html "${out}/report.html"
${bin} report --release "${release}/doris-be:${version}" --recipe recipes/minidoris.yaml --key "${out}/keys/cosign.pub" --output json >"${out}/report-from-registry.json"
echo "wrote ${out}/report-from-registry.json (the same release, read from the registry's attestations alone)"
shot=""
if command -v chromium >/dev/null 2>&1; then
    shot="${out}/report.png"
    if bash scripts/screenshot.sh "${out}/report.html" "${shot}"; then
        echo "wrote ${shot}"
    else
        shot=""
    fi
fi
sed -n '1,/^## Images/p' "${out}/report.md" | sed '$d'

step "done in $(elapsed) s; where everything is"
cat <<EOF
  builds          ${out}/${version}/<target>/  (each with dorisarm-build.json)
  plans           ${out}/plans.json
  scan reports    ${out}/scan-kunpeng920.md, ${out}/scan-graviton3-as-kunpeng920.txt
  images          oci:${out}/images (OCI layout)
  signing key     ${out}/keys/cosign.key, cosign.pub (throw-away, password demo-only)
  release report  ${out}/report.md, ${out}/report.html${shot:+, ${shot}}
  from registry   ${out}/report-from-registry.json
  step cache      ${cache}
The registry (${REGISTRY}) is stopped now; publish to your own with
  ${bin} publish --build ${out} --repo REGISTRY/PATH
EOF
