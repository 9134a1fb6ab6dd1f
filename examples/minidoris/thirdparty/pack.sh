#!/usr/bin/env bash
# Packs each pkgsrc/<name>-<version> into mirror/<name>-<version>.tar.gz the way
# an upstream release archive is made, byte-for-byte reproducibly (sorted
# entries, fixed mtime and owner, gzip without a timestamp), and prints the MD5
# sums vars.sh declares. Run it after editing a package's source.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
mkdir -p mirror
for dir in pkgsrc/*/; do
    name="$(basename "${dir}")"
    tar --sort=name --mtime='2024-01-01 00:00:00Z' --owner=0 --group=0 --numeric-owner \
        --mode='u+rwX,go+rX,go-w' --format=gnu -C pkgsrc -cf - "${name}" | gzip -n -9 >"mirror/${name}.tar.gz"
    echo "$(md5sum "mirror/${name}.tar.gz" | cut -d' ' -f1)  ${name}.tar.gz"
done
