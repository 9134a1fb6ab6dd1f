#!/usr/bin/env bash
# End to end, both signature formats, with the real cosign CLIs built from
# the Go module proxy into .cache/bin: cosign v2.6.2 (the legacy .sig/.att
# tags, and --new-bundle-format) and cosign v3.1.3 (Sigstore bundles as OCI
# referrers, its default). The transparency log is checked everywhere (no
# --insecure-ignore-tlog): key-based signatures are logged in the FAKE
# Sigstore's Rekor, keyless ones get its Fulcio certificates.
#
# 1. dorisarm signs and attests (both formats), key-based and keyless; every
#    cosign verifies every signature and attestation type in its format.
# 2. Each cosign (v2 legacy, v2 --new-bundle-format, v3) signs and attests a
#    copy of the release, key-based and keyless; dorisarm verifies it and
#    says which format it checked.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=.cache/e2e-bundles
rm -rf "${work}" && mkdir -p "${work}" .cache/bin

build_cosign() { # MODULE VERSION BINARY
    [[ -x .cache/bin/$3 ]] && return
    echo "building the cosign CLI $2 into .cache/bin/$3 ..."
    local d
    d=$(mktemp -d)
    GOBIN="${d}" go install "$1/cmd/cosign@$2"
    mv "${d}/cosign" ".cache/bin/$3"
    rmdir "${d}"
}
build_cosign github.com/sigstore/cosign/v2 v2.6.2 cosign
build_cosign github.com/sigstore/cosign/v3 v3.1.3 cosign3
go build -o bin/dorisarm ./cmd/dorisarm
go build -o .cache/bin/fake-sigstore ./internal/sign/fakesigstore/cmd/fake-sigstore
bin/dorisarm build --target generic-armv8 --out "${work}/out" --cache "${work}/cache" >/dev/null 2>"${work}/build.err" || { cat "${work}/build.err"; exit 1; }

. scripts/registry.sh
start_registry
fs="${work}/fake-sigstore"
.cache/bin/fake-sigstore --dir "${fs}" &
FAKE_PID=$!
trap 'kill ${FAKE_PID} ${REGISTRY_PID} 2>/dev/null; rm -rf "${REGISTRY_DIR}"' EXIT
for _ in $(seq 100); do [[ -s "${fs}/env" ]] && break; sleep 0.05; done
. "${fs}/env"
export COSIGN_PASSWORD=e2e
bin/dorisarm keygen --out "${work}/keys" >/dev/null
pub="${work}/keys/cosign.pub" key="${work}/keys/cosign.key"
token="${fs}/token" # cosign takes the token or a file holding it
types=(spdxjson slsaprovenance1 https://dorisarm.dev/attestations/scan/v1)
fail=0
pass() { echo "ok    $*"; }
flunk() { echo "FAIL  $*"; [[ -s "${work}/err" ]] && sed 's/^/      /' "${work}/err" | head -20; fail=1; }

# What each cosign needs to check the log and the certificates: cosign
# v2's legacy path takes the fake's keys from the environment, its
# --new-bundle-format path and v3 take the fake's trusted_root.json.
legacy_env=(env SIGSTORE_ROOT_FILE="${fs}/fulcio_roots.pem" SIGSTORE_REKOR_PUBLIC_KEY="${fs}/rekor.pub" SIGSTORE_CT_LOG_PUBLIC_KEY_FILE="${fs}/ctlog.pub")
cosign_verify() { # FLAVOUR TRUST(key|keyless) SUBCOMMAND [ARGS...] REF
    local flavour=$1 trust=$2 sub=$3
    shift 3
    local t=()
    if [[ ${trust} == key ]]; then t=(--key "${pub}"); else t=(--certificate-identity "${IDENTITY}" --certificate-oidc-issuer "${OIDC_ISSUER}"); fi
    case ${flavour} in
    v2-legacy) "${legacy_env[@]}" .cache/bin/cosign "${sub}" "${t[@]}" --allow-http-registry "$@" ;;
    v2-bundle) .cache/bin/cosign "${sub}" --new-bundle-format --trusted-root "${fs}/trusted_root.json" "${t[@]}" --allow-http-registry "$@" ;;
    v3) .cache/bin/cosign3 "${sub}" --trusted-root "${fs}/trusted_root.json" "${t[@]}" --allow-http-registry "$@" ;;
    esac
}

publish() { # REPO
    bin/dorisarm publish --build "${work}/out" --repo "$1" --epoch 1700000000 --base scratch >/dev/null
}

# --- 1. dorisarm signs, every cosign verifies -------------------------------
publish "${REGISTRY}/key"
publish "${REGISTRY}/keyless"
bin/dorisarm sign --key "${key}" --rekor-url "${REKOR_URL}" --build "${work}/out" -o json "${REGISTRY}/key/doris-be:2.1.8" >"${work}/key.json"
bin/dorisarm sign --keyless --fulcio-url "${FULCIO_URL}" --rekor-url "${REKOR_URL}" --identity-token "$(cat "${token}")" \
    --build "${work}/out" -o json "${REGISTRY}/keyless/doris-be:2.1.8" >"${work}/keyless.json"
for trust in key keyless; do
    # The index and its platform manifest, by digest.
    digests=$(python3 -c 'import json,sys; [print(s["digest"]) for s in json.load(open(sys.argv[1]))]' "${work}/${trust}.json")
    for flavour in v2-legacy v2-bundle v3; do
        for d in ${digests}; do
            if cosign_verify "${flavour}" "${trust}" verify "${d}" >/dev/null 2>"${work}/err"; then
                pass "cosign ${flavour} verify (${trust}, dorisarm-signed, log checked): ${d##*@}"
            else
                flunk "cosign ${flavour} verify (${trust}, dorisarm-signed): ${d}"
            fi
            for type in "${types[@]}"; do
                if cosign_verify "${flavour}" "${trust}" verify-attestation --type "${type}" "${d}" >/dev/null 2>"${work}/err"; then
                    pass "cosign ${flavour} verify-attestation --type ${type##*/} (${trust}, dorisarm-signed): ${d##*@}"
                else
                    flunk "cosign ${flavour} verify-attestation --type ${type} (${trust}, dorisarm-signed): ${d}"
                fi
            done
        done
    done
done
# dorisarm itself, the log checked for the key-based release too.
for trust in key keyless; do
    if [[ ${trust} == key ]]; then vt=(--key "${pub}"); else vt=(--certificate-identity "${IDENTITY}" --certificate-oidc-issuer "${OIDC_ISSUER}"); fi
    if bin/dorisarm verify "${vt[@]}" --trusted-root "${fs}/trusted_root.json" "${REGISTRY}/${trust}/doris-be:2.1.8" >"${work}/err" 2>&1 &&
        [[ $(grep -c '^ok .*\[Sigstore bundle and legacy .sig/.att tag\]' "${work}/err") == 8 ]]; then
        pass "dorisarm verify (${trust}, log checked) of its own release: 8 checks in both formats"
    else
        flunk "dorisarm verify (${trust}, log checked) of its own release"
    fi
done
# Another key, another identity: refused in the bundle format too.
bin/dorisarm keygen --out "${work}/keys/other" >/dev/null
if .cache/bin/cosign3 verify --key "${work}/keys/other/cosign.pub" --trusted-root "${fs}/trusted_root.json" --allow-http-registry "${REGISTRY}/key/doris-be:2.1.8" >/dev/null 2>&1; then
    flunk "cosign v3 accepted another key"
else
    pass "cosign v3 refuses another key"
fi
if .cache/bin/cosign3 verify --certificate-identity https://github.com/evil/fork/.github/workflows/release.yml@refs/tags/v1 --certificate-oidc-issuer "${OIDC_ISSUER}" \
    --trusted-root "${fs}/trusted_root.json" --allow-http-registry "${REGISTRY}/keyless/doris-be:2.1.8" >/dev/null 2>&1; then
    flunk "cosign v3 accepted another identity"
else
    pass "cosign v3 refuses another identity"
fi

# --- 2. each cosign signs and attests, dorisarm verifies --------------------
# The predicates dorisarm made for the index and its platform manifest, as
# cosign v3 reads them back, for the cosign CLIs to attest again.
index=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["digest"])' "${work}/key.json")
child=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[1]["digest"])' "${work}/key.json")
for d in "${index}" "${child}"; do
    for type in "${types[@]}"; do
        f="${work}/pred-${d##*:}-${type##*/}.json"
        cosign_verify v3 key verify-attestation --type "${type}" "${d}" 2>/dev/null | head -1 |
            python3 -c 'import base64,json,sys; json.dump(json.loads(base64.b64decode(json.loads(sys.stdin.readline())["payload"]))["predicate"], sys.stdout)' >"${f}"
    done
done
cosign_sign() { # FLAVOUR TRUST SUBCOMMAND [ARGS...] REF
    local flavour=$1 trust=$2 sub=$3
    shift 3
    local t=(--key "${key}")
    [[ ${trust} == key ]] || t=(--identity-token "${token}")
    case ${flavour} in
    v2-legacy | v2-bundle)
        local fmt=()
        [[ ${flavour} == v2-legacy ]] || fmt=(--new-bundle-format)
        [[ ${trust} == key ]] || t+=(--fulcio-url "${FULCIO_URL}" --oidc-issuer "${OIDC_ISSUER}")
        "${legacy_env[@]}" .cache/bin/cosign "${sub}" "${fmt[@]}" "${t[@]}" --rekor-url "${REKOR_URL}" --yes --allow-http-registry "$@"
        ;;
    v3) # its services from the fake's signing config, trust from its root
        .cache/bin/cosign3 "${sub}" --signing-config "${fs}/signing_config.json" --trusted-root "${fs}/trusted_root.json" \
            "${t[@]}" --yes --allow-http-registry "$@"
        ;;
    esac
}
for flavour in v2-legacy v2-bundle v3; do
    for trust in key keyless; do
        repo="${REGISTRY}/by-${flavour}-${trust}"
        publish "${repo}"
        ok=1
        cosign_sign "${flavour}" "${trust}" sign --recursive "${repo}/doris-be:2.1.8" >/dev/null 2>"${work}/err" || ok=0
        for d in "${index}" "${child}"; do
            for type in "${types[@]}"; do
                [[ ${ok} == 1 ]] || break
                cosign_sign "${flavour}" "${trust}" attest --type "${type}" --predicate "${work}/pred-${d##*:}-${type##*/}.json" "${repo}/doris-be@${d#*@}" >/dev/null 2>"${work}/err" || ok=0
            done
        done
        if [[ ${ok} == 0 ]]; then
            flunk "cosign ${flavour} sign/attest (${trust})"
            continue
        fi
        if [[ ${trust} == key ]]; then
            vt=(--key "${pub}" --trusted-root "${fs}/trusted_root.json") # the Rekor entries required and checked
        else
            vt=(--trusted-root "${fs}/trusted_root.json" --certificate-identity "${IDENTITY}" --certificate-oidc-issuer "${OIDC_ISSUER}")
        fi
        want="legacy .sig/.att tag"
        [[ ${flavour} == v2-legacy ]] || want="Sigstore bundle"
        code=0
        bin/dorisarm verify "${vt[@]}" "${repo}/doris-be:2.1.8" >"${work}/verify.out" 2>"${work}/err" || code=$?
        n=$(grep -c "^ok .*\[${want}\]" "${work}/verify.out" || true)
        # The index and its manifest: a signature each and three attestations each.
        if [[ ${code} == 0 && ${n} == 8 ]]; then
            pass "dorisarm verify (${trust}) of what cosign ${flavour} signed and attested: 8 checks [${want}]"
        else
            cp "${work}/verify.out" "${work}/err"
            flunk "dorisarm verify (${trust}) of what cosign ${flavour} signed: exit ${code}, ${n} checks [${want}]"
        fi
    done
done
# What the cosign CLI signs with another key is not the release's.
code=0
bin/dorisarm verify --key "${work}/keys/other/cosign.pub" "${REGISTRY}/by-v3-key/doris-be:2.1.8" >"${work}/err" 2>&1 || code=$?
if [[ ${code} == 1 ]]; then pass "dorisarm verify refuses cosign v3's signatures with another key"; else flunk "dorisarm verify with another key: exit ${code}"; fi

# --- promotion copies the verified bundles ----------------------------------
bin/dorisarm promote --key "${pub}" --yes "${REGISTRY}/key/doris-be:2.1.8" "${REGISTRY}/release/doris-be:2.1.8" >/dev/null 2>"${work}/err" || flunk "promote"
if .cache/bin/cosign3 verify --key "${pub}" --trusted-root "${fs}/trusted_root.json" --allow-http-registry "${REGISTRY}/release/doris-be:2.1.8" >/dev/null 2>"${work}/err" &&
    .cache/bin/cosign3 verify-attestation --key "${pub}" --type slsaprovenance1 --trusted-root "${fs}/trusted_root.json" --allow-http-registry "${REGISTRY}/release/doris-be:2.1.8" >/dev/null 2>>"${work}/err"; then
    pass "cosign v3 verifies the promoted release's bundles (copied as referrers through the tag fallback)"
else
    flunk "cosign v3 verify at the promotion's destination"
fi
exit ${fail}
