#!/usr/bin/env bash
# dorisarm scan's false alarms and misses on real Debian 12 arm64 packages,
# against llvm-objdump-16 (scripts/falsealarm.py says how they are counted).
# Downloads the packages in scripts/corpus-packages.txt into .cache/corpus
# (outside git) with apt-get download, extracts them with dpkg-deb, and prints
# one row per package and the SVE count of libcrypto both ways.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${TARGET:-generic-armv8}"
attrs="${ATTRS:-+neon,+fp-armv8,+crc}" # llvm names of generic-armv8's extensions (fp, simd, crc)
cache=.cache/corpus
mkdir -p "${cache}/debs" "${cache}/x"
mapfile -t pkgs < <(grep -v '^#' scripts/corpus-packages.txt | grep -v '^$')
for p in "${pkgs[@]}"; do
    if [[ ! -d "${cache}/x/${p}" ]]; then
        if ! ls "${cache}/debs/${p}"_*.deb >/dev/null 2>&1; then
            (cd "${cache}/debs" && apt-get download "${p}:arm64")
        fi
        mkdir -p "${cache}/x/${p}"
        dpkg-deb -x "$(ls "${cache}/debs/${p}"_*.deb | head -1)" "${cache}/x/${p}"
    fi
done
go build -o bin/dorisarm ./cmd/dorisarm
command -v llvm-objdump-16 >/dev/null || { echo "llvm-objdump-16 is missing: run scripts/install-deps.sh" >&2; exit 2; }
python3 scripts/falsealarm.py --target "${target}" --attrs "${attrs}" "${cache}/x" "${pkgs[@]}"
