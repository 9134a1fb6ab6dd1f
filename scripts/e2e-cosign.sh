#!/usr/bin/env bash
# End to end with the real cosign CLI: build the sample for two targets,
# publish it to a docker-registry on loopback, sign it with dorisarm, and
# let `cosign verify --key` check every signature dorisarm made. The cosign
# CLI is built once into .cache/bin (a few minutes the first time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=.cache/e2e
mkdir -p "${work}" .cache/bin
if [[ ! -x .cache/bin/cosign ]]; then
    echo "building the cosign CLI v2.6.2 into .cache/bin ..."
    GOBIN="$(pwd)/.cache/bin" go install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.2
fi
go build -o bin/dorisarm ./cmd/dorisarm
bin/dorisarm build --target generic-armv8,x86_64 --out "${work}/out" --cache "${work}/cache" >/dev/null 2>"${work}/build.err" || { cat "${work}/build.err"; exit 1; }
. scripts/registry.sh
start_registry
repo="${REGISTRY}/doris"
bin/dorisarm publish --build "${work}/out" --repo "${repo}" --epoch 1700000000 --base scratch
export COSIGN_PASSWORD=e2e
rm -rf "${work}/keys"
bin/dorisarm keygen --out "${work}/keys"
bin/dorisarm sign --key "${work}/keys/cosign.key" --build "${work}/out" "${repo}/doris-be:2.1.8"
bin/dorisarm verify --key "${work}/keys/cosign.pub" "${repo}/doris-be:2.1.8"
fail=0
# The signature and the three attestations as cosign sees them, on the
# multi-arch tag (the index users pull), each per-target tag and each
# platform manifest of the index by digest.
verify_all() { # REF
    local ref=$1 type
    if .cache/bin/cosign verify --key "${work}/keys/cosign.pub" --insecure-ignore-tlog=true --allow-http-registry "${ref}" >/dev/null 2>"${work}/cosign.err"; then
        echo "cosign verify ok: ${ref}"
    else
        echo "cosign verify FAILED: ${ref}"; cat "${work}/cosign.err"; fail=1
    fi
    for type in spdxjson slsaprovenance1 https://dorisarm.dev/attestations/scan/v1; do
        if .cache/bin/cosign verify-attestation --key "${work}/keys/cosign.pub" --type "${type}" --insecure-ignore-tlog=true --allow-http-registry "${ref}" >/dev/null 2>"${work}/cosign.err"; then
            echo "cosign verify-attestation --type ${type} ok: ${ref}"
        else
            echo "cosign verify-attestation --type ${type} FAILED: ${ref}"; cat "${work}/cosign.err"; fail=1
        fi
    done
}
digests=$(bin/dorisarm sign --key "${work}/keys/cosign.key" "${repo}/doris-be:2.1.8" | awk '{print $2}')
for ref in "${repo}/doris-be:2.1.8" "${repo}/doris-be:2.1.8-generic-armv8" "${repo}/doris-be:2.1.8-x86_64" ${digests}; do
    verify_all "${ref}"
done
d=$(echo "${digests}" | sed -n 2p) # a platform manifest of the index
# What cosign verified on the multi-arch tag names every platform of the
# index: the provenance each platform's digest, target and build parameters,
# the SBOM a CONTAINER package per platform, the scan each platform's result.
children=$(curl -fs -H 'Accept: application/vnd.oci.image.index.v1+json' "http://${REGISTRY}/v2/doris/doris-be/manifests/2.1.8" |
    python3 -c 'import json,sys; print(" ".join(sorted(m["digest"] for m in json.load(sys.stdin)["manifests"])))')
for type in slsaprovenance1 spdxjson https://dorisarm.dev/attestations/scan/v1; do
    .cache/bin/cosign verify-attestation --key "${work}/keys/cosign.pub" --type "${type}" --insecure-ignore-tlog=true --allow-http-registry "${repo}/doris-be:2.1.8" 2>/dev/null >"${work}/att.json" || true
    named=$(python3 scripts/e2e-index-platforms.py "${work}/att.json" || true)
    if [[ -n "${children}" && "${named}" == "${children}" ]]; then
        echo "the index's ${type} attestation names its platforms: ${named}"
    else
        echo "the index's ${type} attestation names '${named}', the index holds '${children}'"; fail=1
    fi
done
# Promote to a release repository and let cosign verify it there.
bin/dorisarm promote --key "${work}/keys/cosign.pub" --sign-key "${work}/keys/cosign.key" --yes "${repo}/doris-be:2.1.8" "${REGISTRY}/release/doris-be:2.1.8"
if .cache/bin/cosign verify --key "${work}/keys/cosign.pub" --insecure-ignore-tlog=true --allow-http-registry "${REGISTRY}/release/doris-be:2.1.8" >/dev/null 2>"${work}/cosign.err" &&
    .cache/bin/cosign verify-attestation --key "${work}/keys/cosign.pub" --type spdxjson --insecure-ignore-tlog=true --allow-http-registry "${REGISTRY}/release/doris-be@${d#*@}" >/dev/null 2>>"${work}/cosign.err" &&
    .cache/bin/cosign verify-attestation --key "${work}/keys/cosign.pub" --type slsaprovenance1 --insecure-ignore-tlog=true --allow-http-registry "${REGISTRY}/release/doris-be:2.1.8" >/dev/null 2>>"${work}/cosign.err"; then
    echo "cosign verify ok at the destination: ${REGISTRY}/release/doris-be:2.1.8"
else
    echo "cosign verify FAILED at the destination"; cat "${work}/cosign.err"; fail=1
fi
# A key cosign did not sign with must be refused.
bin/dorisarm keygen --out "${work}/keys/other" >/dev/null
if .cache/bin/cosign verify --key "${work}/keys/other/cosign.pub" --insecure-ignore-tlog=true --allow-http-registry "${repo}/doris-be:2.1.8" >/dev/null 2>&1; then
    echo "cosign verify accepted another key"; fail=1
else
    echo "cosign verify refused another key, as it should"
fi
# The other way round: a key pair made by the cosign CLI signs with
# dorisarm, and what the cosign CLI signs with it dorisarm verifies.
rm -rf "${work}/cosign-keys" && mkdir -p "${work}/cosign-keys"
(cd "${work}/cosign-keys" && "${OLDPWD}/.cache/bin/cosign" generate-key-pair >/dev/null 2>&1)
x="${repo}/doris-be:2.1.8-x86_64"
if bin/dorisarm sign --key "${work}/cosign-keys/cosign.key" "${x}" >/dev/null 2>"${work}/sign.err" &&
    .cache/bin/cosign sign --key "${work}/cosign-keys/cosign.key" --tlog-upload=false --allow-http-registry --yes "${repo}/doris-be:2.1.8-generic-armv8" >/dev/null 2>"${work}/cosign.err" &&
    bin/dorisarm verify --signatures-only --key "${work}/cosign-keys/cosign.pub" "${x}" >/dev/null 2>>"${work}/sign.err" &&
    bin/dorisarm verify --signatures-only --key "${work}/cosign-keys/cosign.pub" "${repo}/doris-be:2.1.8-generic-armv8" >"${work}/verify.out" 2>&1; then
    echo "dorisarm signs with a cosign-made key and verifies what cosign signed"
else
    echo "cosign-made key or signature FAILED in dorisarm"; cat "${work}/sign.err" "${work}/cosign.err" "${work}/verify.out" 2>/dev/null; fail=1
fi
# Keyless, against a FAKE Sigstore (internal/sign/fakesigstore: a fake
# Fulcio, Rekor and OIDC issuer with throw-away keys on loopback; the real
# Sigstore cannot run here): dorisarm signs and attests a fresh copy of the
# release keylessly, and the real cosign CLI verifies it with the fake's
# trusted_root.json, identity and issuer (SCT and Rekor entry checked).
go build -o .cache/bin/fake-sigstore ./internal/sign/fakesigstore/cmd/fake-sigstore
rm -rf "${work}/fake-sigstore"
.cache/bin/fake-sigstore --dir "${work}/fake-sigstore" &
FAKE_PID=$!
trap 'kill ${FAKE_PID} ${REGISTRY_PID} 2>/dev/null; rm -rf "${REGISTRY_DIR}"' EXIT
for _ in $(seq 100); do [[ -s "${work}/fake-sigstore/env" ]] && break; sleep 0.05; done
. "${work}/fake-sigstore/env"
kl="${REGISTRY}/keyless"
bin/dorisarm publish --build "${work}/out" --repo "${kl}" --epoch 1700000000 --base scratch >/dev/null
bin/dorisarm sign --keyless --fulcio-url "${FULCIO_URL}" --rekor-url "${REKOR_URL}" --identity-token "$(cat "${work}/fake-sigstore/token")" \
    --build "${work}/out" -o json "${kl}/doris-be:2.1.8" >"${work}/keyless.json"
ktrust=(--trusted-root "${work}/fake-sigstore/trusted_root.json" --certificate-identity "${IDENTITY}" --certificate-oidc-issuer "${OIDC_ISSUER}")
if bin/dorisarm verify "${ktrust[@]}" "${kl}/doris-be:2.1.8" >"${work}/verify.out" 2>&1; then
    echo "dorisarm verify ok (keyless, fake Sigstore): ${kl}/doris-be:2.1.8"
else
    echo "dorisarm verify FAILED (keyless, fake Sigstore)"; cat "${work}/verify.out"; fail=1
fi
for d in $(python3 -c 'import json,sys; [print(s["digest"]) for s in json.load(open(sys.argv[1]))]' "${work}/keyless.json"); do
    if .cache/bin/cosign verify "${ktrust[@]}" --allow-http-registry "${d}" >/dev/null 2>"${work}/cosign.err"; then
        echo "cosign verify ok (keyless, fake Sigstore): ${d}"
    else
        echo "cosign verify FAILED (keyless, fake Sigstore): ${d}"; cat "${work}/cosign.err"; fail=1
    fi
done
d=$(python3 -c 'import json,sys; print([s["digest"] for s in json.load(open(sys.argv[1])) if s["attestations"]][0])' "${work}/keyless.json")
# cosign 2.6's verify-attestation takes --trusted-root only for the new
# bundle format; for cosign's storage format it takes the same trust piece
# by piece from the environment.
fs="${work}/fake-sigstore"
for type in spdxjson slsaprovenance1 https://dorisarm.dev/attestations/scan/v1; do
    if SIGSTORE_ROOT_FILE="${fs}/fulcio_roots.pem" SIGSTORE_REKOR_PUBLIC_KEY="${fs}/rekor.pub" SIGSTORE_CT_LOG_PUBLIC_KEY_FILE="${fs}/ctlog.pub" \
        .cache/bin/cosign verify-attestation "${ktrust[@]:2}" --type "${type}" --allow-http-registry "${d}" >/dev/null 2>"${work}/cosign.err"; then
        echo "cosign verify-attestation --type ${type} ok (keyless, fake Sigstore): ${d}"
    else
        echo "cosign verify-attestation --type ${type} FAILED (keyless, fake Sigstore): ${d}"; cat "${work}/cosign.err"; fail=1
    fi
done
if .cache/bin/cosign verify --trusted-root "${work}/fake-sigstore/trusted_root.json" --certificate-identity https://github.com/evil/fork/.github/workflows/release.yml@refs/tags/v1 \
    --certificate-oidc-issuer "${OIDC_ISSUER}" --allow-http-registry "${kl}/doris-be:2.1.8" >/dev/null 2>&1; then
    echo "cosign verify accepted another identity"; fail=1
else
    echo "cosign verify refused another identity, as it should"
fi
# A signed, attested image promoted under a tag that names something else
# (another target, the multi-arch tag, another version, another image):
# refused with exit 1, and no tag written.
src="${repo}/doris-be:2.1.8-generic-armv8"
for dst in release/doris-be:2.1.8-x86_64 release/doris-be:2.1.8-generic-armv8-x release/doris-be:9.9.9-generic-armv8 release/doris-fe:2.1.8-generic-armv8; do
    code=0
    bin/dorisarm promote --key "${work}/keys/cosign.pub" --yes "${src}" "${REGISTRY}/${dst}" >/dev/null 2>"${work}/promote.err" || code=$?
    if [[ ${code} == 1 ]] && grep -q "promotion refused" "${work}/promote.err" &&
        ! curl -fs -o /dev/null "http://${REGISTRY}/v2/${dst%%:*}/manifests/${dst##*:}"; then
        echo "promotion to ${dst} refused, as it should: $(sed 's/.*promotion refused: //' "${work}/promote.err" | head -c 160)"
    else
        echo "promotion of ${src} to ${dst}: exit ${code}, not refused"; cat "${work}/promote.err"; fail=1
    fi
done
# The shared FE image: signed but not attested, promotion refuses it (its
# SBOM, provenance and scan are missing) and writes no tag; signed with
# --build, the cosign CLI verifies its three attestations and promotion
# goes through.
fe="${repo}/doris-fe:2.1.8"
bin/dorisarm sign --key "${work}/keys/cosign.key" "${fe}" >/dev/null
code=0
bin/dorisarm promote --key "${work}/keys/cosign.pub" --yes "${fe}" "${REGISTRY}/release/doris-fe:2.1.8" >/dev/null 2>"${work}/promote.err" || code=$?
if [[ ${code} == 1 ]] && grep -q "missing (sign it with dorisarm sign --build)" "${work}/promote.err" &&
    ! curl -fs -o /dev/null "http://${REGISTRY}/v2/release/doris-fe/manifests/2.1.8"; then
    echo "promotion of the unattested FE refused, as it should; no tag written"
else
    echo "promotion of the unattested FE: exit ${code}, not refused"; cat "${work}/promote.err"; fail=1
fi
bin/dorisarm sign --key "${work}/keys/cosign.key" --build "${work}/out" "${fe}" >/dev/null
for type in spdxjson slsaprovenance1 https://dorisarm.dev/attestations/scan/v1; do
    if .cache/bin/cosign verify-attestation --key "${work}/keys/cosign.pub" --type "${type}" --insecure-ignore-tlog=true --allow-http-registry "${fe}" >/dev/null 2>"${work}/cosign.err"; then
        echo "cosign verify-attestation --type ${type} ok: ${fe}"
    else
        echo "cosign verify-attestation --type ${type} FAILED: ${fe}"; cat "${work}/cosign.err"; fail=1
    fi
done
if bin/dorisarm promote --key "${work}/keys/cosign.pub" --yes "${fe}" "${REGISTRY}/release/doris-fe:2.1.8" >/dev/null 2>"${work}/promote.err"; then
    echo "the attested FE promoted"
else
    echo "promotion of the attested FE failed"; cat "${work}/promote.err"; fail=1
fi
# An index provenance, signed with the right key by the cosign CLI, that
# leaves out one platform: cosign accepts it (it checks the signature, not
# what the predicate says), dorisarm verify and promote refuse it.
.cache/bin/cosign verify-attestation --key "${work}/keys/cosign.pub" --type slsaprovenance1 --insecure-ignore-tlog=true --allow-http-registry "${repo}/doris-be:2.1.8" 2>/dev/null |
    python3 -c 'import base64,json,sys; p=json.loads(base64.b64decode(json.loads(sys.stdin.readline())["payload"]))["predicate"]; p["buildDefinition"]["resolvedDependencies"].pop(); json.dump(p, sys.stdout)' >"${work}/short-provenance.json"
.cache/bin/cosign attest --yes --key "${work}/keys/cosign.key" --type slsaprovenance1 --predicate "${work}/short-provenance.json" --replace \
    --tlog-upload=false --allow-http-registry "${repo}/doris-be:2.1.8" >/dev/null 2>"${work}/cosign.err" || { cat "${work}/cosign.err"; fail=1; }
if .cache/bin/cosign verify-attestation --key "${work}/keys/cosign.pub" --type slsaprovenance1 --insecure-ignore-tlog=true --allow-http-registry "${repo}/doris-be:2.1.8" >/dev/null 2>&1; then
    echo "cosign verify-attestation accepts the index provenance that leaves out a platform (it does not read the predicate)"
fi
code=0
bin/dorisarm verify --key "${work}/keys/cosign.pub" "${repo}/doris-be:2.1.8" >"${work}/verify.out" 2>&1 || code=$?
if [[ ${code} == 1 ]] && grep -q "does not describe the index's platforms: it does not name" "${work}/verify.out"; then
    echo "dorisarm verify refuses it: $(grep -o 'it does not name [^ ]*' "${work}/verify.out")"
else
    echo "dorisarm verify of the short index provenance: exit ${code}"; cat "${work}/verify.out"; fail=1
fi
code=0
bin/dorisarm promote --key "${work}/keys/cosign.pub" --yes "${repo}/doris-be:2.1.8" "${REGISTRY}/release/doris-be:2.1" >/dev/null 2>"${work}/promote.err" || code=$?
if [[ ${code} == 1 ]] && grep -q "does not describe the index's platforms" "${work}/promote.err" &&
    ! curl -fs -o /dev/null "http://${REGISTRY}/v2/release/doris-be/manifests/2.1"; then
    echo "dorisarm promote refuses it; no tag written"
else
    echo "dorisarm promote of the short index provenance: exit ${code}"; cat "${work}/promote.err"; fail=1
fi
# A layer altered in the registry's storage: cosign verify still passes (a
# signature covers the manifest, which names the layer by digest, and cosign
# does not read layers), dorisarm verify and promote read every blob and refuse.
ref="${repo}/doris-be:2.1.8-x86_64"
layer=$(curl -fs -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://${REGISTRY}/v2/doris/doris-be/manifests/2.1.8-x86_64" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][-1]["digest"].split(":")[1])')
blob="${REGISTRY_DIR}/data/docker/registry/v2/blobs/sha256/${layer:0:2}/${layer}/data"
python3 - "${blob}" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
for i in range(16):
    b[len(b) // 2 + i] ^= 0xFF
open(p, "wb").write(bytes(b))
EOF
if .cache/bin/cosign verify --key "${work}/keys/cosign.pub" --insecure-ignore-tlog=true --allow-http-registry "${ref}" >/dev/null 2>&1; then
    echo "cosign verify passes on the altered image (it does not read layers)"
fi
code=0
bin/dorisarm verify --key "${work}/keys/cosign.pub" "${ref}" >"${work}/verify.out" 2>&1 || code=$?
if [[ ${code} == 1 ]] && grep -q "altered in storage" "${work}/verify.out"; then
    echo "dorisarm verify refuses the altered layer sha256:${layer}"
else
    echo "dorisarm verify of the altered layer: exit ${code}"; cat "${work}/verify.out"; fail=1
fi
code=0
bin/dorisarm promote --key "${work}/keys/cosign.pub" --yes "${ref}" "${REGISTRY}/release/doris-be:2.1.8-x86_64" >/dev/null 2>"${work}/promote.err" || code=$?
if [[ ${code} == 1 ]] && grep -q "altered in storage" "${work}/promote.err" &&
    ! curl -fs -o /dev/null "http://${REGISTRY}/v2/release/doris-be/manifests/2.1.8-x86_64"; then
    echo "dorisarm promote refuses the altered layer; no tag written"
else
    echo "dorisarm promote of the altered layer: exit ${code}"; cat "${work}/promote.err"; fail=1
fi
exit ${fail}
