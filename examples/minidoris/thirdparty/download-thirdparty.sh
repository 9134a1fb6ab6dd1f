#!/usr/bin/env bash
# Fetches (from REPOSITORY_URL, a local directory, default ./mirror), checks
# (MD5, as Apache Doris does), unpacks and patches third-party archives.
# Usage: download-thirdparty.sh [PACKAGE...]   (default: all of TP_ARCHIVES)
# Archives already in src/ with the right MD5 are not fetched again, sources
# already unpacked are not unpacked again, and each of minidoris's own patches
# is applied once (a patched_mark file records it).
set -eo pipefail
TP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
. "${TP_DIR}/vars.sh"
REPOSITORY_URL="${REPOSITORY_URL:-${TP_DIR}/mirror}"
mkdir -p "${TP_SOURCE_DIR}"

if [[ $# -gt 0 ]]; then
    wanted=()
    for given in "$@"; do
        found=
        for p in "${TP_ARCHIVES[@]}"; do
            if [[ "${given,,}" == "${p,,}" ]]; then found="${p}"; fi
        done
        if [[ -z "${found}" ]]; then
            echo "given lib: ${given} not found" >&2
            exit 1
        fi
        wanted+=("${found}")
    done
    TP_ARCHIVES=("${wanted[@]}")
fi

md5_ok() { [[ "$(md5sum "$1" | cut -d' ' -f1)" == "$2" ]]; }

for p in "${TP_ARCHIVES[@]}"; do
    name_var="${p}_NAME" md5_var="${p}_MD5SUM" src_var="${p}_SOURCE"
    archive="${TP_SOURCE_DIR}/${!name_var}"
    if [[ -f "${archive}" ]] && md5_ok "${archive}" "${!md5_var}"; then
        echo "Archive ${!name_var} already exist."
    else
        rm -f "${archive}"
        if [[ ! -f "${REPOSITORY_URL}/${!name_var}" ]]; then
            echo "Failed to download ${!name_var}: not in ${REPOSITORY_URL}" >&2
            exit 1
        fi
        cp "${REPOSITORY_URL}/${!name_var}" "${archive}"
        if ! md5_ok "${archive}" "${!md5_var}"; then
            echo "${archive} md5sum check failed!" >&2
            rm -f "${archive}"
            exit 1
        fi
    fi
    if [[ ! -d "${TP_SOURCE_DIR}/${!src_var}" ]]; then
        tar xzf "${archive}" -C "${TP_SOURCE_DIR}/"
    fi
    # minidoris's own patches, like Doris's thirdparty/patches.
    for patch_file in "${TP_PATCH_DIR}/${!src_var}"*.patch; do
        [[ -f "${patch_file}" ]] || continue
        mark="${TP_SOURCE_DIR}/${!src_var}/patched_mark_$(basename "${patch_file}")"
        if [[ ! -f "${mark}" ]]; then
            (cd "${TP_SOURCE_DIR}/${!src_var}" && patch -p1 -s <"${patch_file}")
            touch "${mark}"
        fi
    done
    echo "Finished ${!src_var}"
done
