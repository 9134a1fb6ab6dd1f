#!/usr/bin/env bash
# tree-for-mirror.sh SRC DEST MIRROR...
# Copies the Doris tree SRC to DEST and, for every archive in the MIRROR
# directories whose MD5 differs from the *_MD5SUM that thirdparty/vars.sh
# gives the entries naming it (*_NAME), writes the archive's MD5 into the
# copy, printing each changed line: the way to build from substitute
# archives (see ../shared/corpus/README.md, mirror-substitutes). DEST must
# not exist. Nothing in SRC changes.
set -euo pipefail
if [[ $# -lt 3 ]]; then
    echo "usage: $0 SRC DEST MIRROR..." >&2
    exit 2
fi
src=$1 dest=$2
shift 2
vars="${src}/thirdparty/vars.sh"
[[ -f "${vars}" ]] || { echo "tree-for-mirror: ${vars} not found: SRC must be a Doris tree" >&2; exit 2; }
[[ ! -e "${dest}" ]] || { echo "tree-for-mirror: ${dest} exists; give a new directory" >&2; exit 2; }
cp -r "${src}" "${dest}"
chmod -R u+w "${dest}"
out="${dest}/thirdparty/vars.sh"
for m in "$@"; do
    [[ -d "${m}" ]] || { echo "tree-for-mirror: ${m} is not a directory" >&2; exit 2; }
    for f in "${m}"/*; do
        [[ -f "${f}" ]] || continue
        name=$(basename "${f}")
        # The entries whose NAME is this file, quoted or not.
        entries=$(grep -E "^[A-Z0-9_]+_NAME=[\"']?${name//./\\.}[\"']?\$" "${out}" | sed 's/_NAME=.*//' || true)
        [[ -n "${entries}" ]] || continue
        sum=$(md5sum "${f}" | cut -d' ' -f1)
        for e in ${entries}; do
            old=$(sed -n "s/^${e}_MD5SUM=[\"']\{0,1\}\([0-9a-f]*\)[\"']\{0,1\}\$/\1/p" "${out}")
            if [[ -z "${old}" ]]; then
                echo "tree-for-mirror: ${e} has no ${e}_MD5SUM line in vars.sh" >&2
                exit 2
            fi
            if [[ "${old}" != "${sum}" ]]; then
                sed -i "s/^${e}_MD5SUM=.*/${e}_MD5SUM=\"${sum}\"/" "${out}"
                echo "${e}_MD5SUM ${old} -> ${sum} (${f})"
            fi
        done
    done
done
