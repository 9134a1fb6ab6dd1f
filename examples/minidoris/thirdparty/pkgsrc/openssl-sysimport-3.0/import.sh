#!/usr/bin/env bash
# Usage: import.sh PREFIX MULTIARCH   (e.g. import.sh /x/installed aarch64-linux-gnu)
set -euo pipefail
prefix="$1"
multiarch="$2"
libdir="/usr/lib/${multiarch}"
for f in libcrypto.a libssl.a; do
    if [[ ! -f "${libdir}/${f}" ]]; then
        echo "openssl-sysimport: ${libdir}/${f} is missing; install libssl-dev:${multiarch%%-*} (arm64 for aarch64)" >&2
        exit 1
    fi
done
mkdir -p "${prefix}/lib" "${prefix}/include"
cp -a "${libdir}"/libcrypto.a "${libdir}"/libssl.a "${prefix}/lib/"
cp -a "${libdir}"/libcrypto.so* "${libdir}"/libssl.so* "${prefix}/lib/"
cp -a /usr/include/openssl "${prefix}/include/"
# opensslconf.h and configuration.h are per architecture under Debian's multiarch include dir.
cp -a "/usr/include/${multiarch}/openssl/." "${prefix}/include/openssl/"
