#!/usr/bin/env bash
# Usage: import.sh PREFIX MULTIARCH   (e.g. import.sh /x/installed aarch64-linux-gnu)
# Imports the target's OpenSSL from the target OS's sysroot when dorisarm
# builds with one (DORISARM_SYSROOT), from this machine's multiarch
# libraries otherwise.
set -euo pipefail
prefix="$1"
multiarch="$2"
root="${DORISARM_SYSROOT:-}"
libdir="${root}/usr/lib/${multiarch}"
for f in libcrypto.a libssl.a; do
    if [[ ! -f "${libdir}/${f}" ]]; then
        echo "openssl-sysimport: ${libdir}/${f} is missing; install libssl-dev:${multiarch%%-*} (arm64 for aarch64), or add libssl-dev to the sysroot's packages" >&2
        exit 1
    fi
done
mkdir -p "${prefix}/lib" "${prefix}/include"
cp -a "${libdir}"/libcrypto.a "${libdir}"/libssl.a "${prefix}/lib/"
cp -a "${libdir}"/libcrypto.so* "${libdir}"/libssl.so* "${prefix}/lib/"
cp -a "${root}/usr/include/openssl" "${prefix}/include/"
# opensslconf.h and configuration.h are per architecture under Debian's multiarch include dir.
cp -a "${root}/usr/include/${multiarch}/openssl/." "${prefix}/include/openssl/"
