#!/usr/bin/env bash
# Builds minidoris with Apache Doris's build interface:
#   build.sh [--be] [--fe] [--clean] [-j N]        (no module option: both)
# Environment, as in Doris: ARM_MARCH (default armv8-a+crc), USE_AVX2 (default
# ON), EXTRA_CXX_FLAGS, GLIBC_COMPATIBILITY, BUILD_FE_JNI (default OFF),
# DORIS_TOOLCHAIN / DORIS_GCC_HOME / DORIS_CLANG_HOME (env.sh).
# Outputs: output/be/lib/doris_be, output/fe/lib/*.jar.
set -eo pipefail
DORIS_HOME="$(cd "$(dirname "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
export DORIS_HOME
. "${DORIS_HOME}/env.sh"

BUILD_BE=0 BUILD_FE=0 CLEAN=0 PARALLEL=$(($(nproc) / 4 + 1))
while [[ $# -gt 0 ]]; do
    case "$1" in
    --be) BUILD_BE=1; shift ;;
    --fe) BUILD_FE=1; shift ;;
    --clean) CLEAN=1; shift ;;
    -j) PARALLEL="$2"; shift 2 ;;
    -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "Error: unknown option $1" >&2; exit 2 ;;
    esac
done
if [[ ${BUILD_BE} -eq 0 && ${BUILD_FE} -eq 0 ]]; then
    BUILD_BE=1 BUILD_FE=1
fi
ARM_MARCH="${ARM_MARCH:-armv8-a+crc}"
USE_AVX2="${USE_AVX2:-ON}"
GLIBC_COMPATIBILITY="${GLIBC_COMPATIBILITY:-ON}"
BUILD_FE_JNI="${BUILD_FE_JNI:-OFF}"
OUTPUT="${DORIS_OUTPUT:-${DORIS_HOME}/output}"
TP_INSTALL="${DORIS_THIRDPARTY}/installed"

if [[ ${CLEAN} -eq 1 ]]; then
    rm -rf "${DORIS_HOME}/be/build" "${DORIS_HOME}/fe/build" "${OUTPUT}"
fi

bash "${DORIS_HOME}/gensrc/script/gen_build_version.sh"

if [[ ${BUILD_BE} -eq 1 ]]; then
    if [[ ! -f "${TP_INSTALL}/lib/libbitshuffle.a" ]]; then
        echo "Error: third-party libraries are not built; run thirdparty/build-thirdparty.sh" >&2
        exit 1
    fi
    ARCH_FLAGS=()
    case "${TARGET_ARCH}" in
    aarch64) ARCH_FLAGS=("-march=${ARM_MARCH}") ;;
    x86_64)
        ARCH_FLAGS=(-msse4.2)
        if [[ "${USE_AVX2}" == ON ]]; then ARCH_FLAGS+=(-mavx2); fi
        ;;
    *) echo "Error: unsupported target architecture ${TARGET_ARCH}" >&2; exit 1 ;;
    esac
    echo "ARM_MARCH is ${ARM_MARCH}; target ${TARGET_ARCH}; GLIBC_COMPATIBILITY=${GLIBC_COMPATIBILITY}"
    BE_BUILD="${DORIS_HOME}/be/build"
    mkdir -p "${BE_BUILD}"
    objs=()
    for src in "${DORIS_HOME}"/be/src/*.cpp; do
        obj="${BE_BUILD}/$(basename "${src%.cpp}").o"
        # shellcheck disable=2086
        ${CCACHE_LAUNCHER:+"${CCACHE_LAUNCHER}"} "${CXX}" -std=c++17 -O2 -g -Wall -Wextra -Werror "${ARCH_FLAGS[@]}" ${EXTRA_CXX_FLAGS} \
            -I "${DORIS_HOME}/gensrc/build" -I "${TP_INSTALL}/include" -c "${src}" -o "${obj}" &
        objs+=("${obj}")
        while [[ $(jobs -r | wc -l) -ge ${PARALLEL} ]]; do wait -n; done
    done
    wait
    for obj in "${objs[@]}"; do [[ -f "${obj}" ]] || { echo "Error: compile failed" >&2; exit 1; }; done
    OPENSSL_LIBS=("${TP_INSTALL}/lib/libssl.a" "${TP_INSTALL}/lib/libcrypto.a")
    # shellcheck disable=2086
    "${CXX}" "${ARCH_FLAGS[@]}" ${EXTRA_CXX_FLAGS} -o "${BE_BUILD}/doris_be" "${objs[@]}" \
        "${TP_INSTALL}/lib/libbitshuffle.a" "${TP_INSTALL}/lib/libsimdprobe.a" "${TP_INSTALL}/lib/libminilz.a" \
        "${OPENSSL_LIBS[@]}" -static-libstdc++ -static-libgcc -ldl -pthread
    mkdir -p "${OUTPUT}/be/lib" "${OUTPUT}/be/bin" "${OUTPUT}/be/conf"
    cp "${BE_BUILD}/doris_be" "${OUTPUT}/be/lib/"
    cp "${DORIS_HOME}/bin/start_be.sh" "${OUTPUT}/be/bin/"
    cp "${DORIS_HOME}/conf/be.conf" "${OUTPUT}/be/conf/"
    echo "Built ${OUTPUT}/be/lib/doris_be"
fi

if [[ ${BUILD_FE} -eq 1 ]]; then
    FE_BUILD="${DORIS_HOME}/fe/build"
    rm -rf "${FE_BUILD}"
    mkdir -p "${FE_BUILD}/classes/org/apache/doris/minife"
    MAJOR=$(sed -n 's/^build_version_major=//p' "${DORIS_HOME}/gensrc/script/gen_build_version.sh")
    MINOR=$(sed -n 's/^build_version_minor=//p' "${DORIS_HOME}/gensrc/script/gen_build_version.sh")
    PATCH=$(sed -n 's/^build_version_patch=//p' "${DORIS_HOME}/gensrc/script/gen_build_version.sh")
    cat >"${FE_BUILD}/Version.java" <<JAVA_EOF
package org.apache.doris.minife;
final class Version { static final String VERSION = "${MAJOR}.${MINOR}.${PATCH}"; private Version() {} }
JAVA_EOF
    javac --release 17 -d "${FE_BUILD}/classes" "${FE_BUILD}/Version.java" "${DORIS_HOME}"/fe/src/org/apache/doris/minife/*.java
    if [[ "${BUILD_FE_JNI}" == ON ]]; then
        JAVA_INC="${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")}/include"
        mkdir -p "${FE_BUILD}/classes/native/linux-${TARGET_ARCH}"
        "${CC}" -O2 -shared -fPIC -I "${JAVA_INC}" -I "${JAVA_INC}/linux" "${DORIS_HOME}/fe/native/minife_jni.c" \
            -o "${FE_BUILD}/classes/native/linux-${TARGET_ARCH}/libminife_jni.so"
    fi
    mkdir -p "${OUTPUT}/fe/lib" "${OUTPUT}/fe/bin" "${OUTPUT}/fe/conf"
    # A reproducible jar: sorted entries with a fixed timestamp.
    (cd "${FE_BUILD}/classes" && find . -type f | LC_ALL=C sort | sed 's|^\./||' >"${FE_BUILD}/files.txt" &&
        touch -d '2024-01-01 00:00:00Z' $(cat "${FE_BUILD}/files.txt") &&
        jar --create --file "${OUTPUT}/fe/lib/doris-fe.jar" --date=2024-01-01T00:00:00Z -C . @"${FE_BUILD}/files.txt")
    cp "${DORIS_HOME}/bin/start_fe.sh" "${OUTPUT}/fe/bin/"
    cp "${DORIS_HOME}/conf/fe.conf" "${OUTPUT}/fe/conf/"
    echo "Built ${OUTPUT}/fe/lib/doris-fe.jar"
fi
