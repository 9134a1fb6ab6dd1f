#!/usr/bin/env bash
# Builds minidoris's third-party packages into thirdparty/installed, the way
# Apache Doris's thirdparty/build-thirdparty.sh does: the compiler comes from
# env.sh (DORIS_TOOLCHAIN, DORIS_GCC_HOME / DORIS_CLANG_HOME).
# Usage: build-thirdparty.sh [-j N] [PACKAGE...]   (default: all)
# Sources must already be unpacked (download-thirdparty.sh does it).
set -eo pipefail
TP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
export DORIS_HOME="${DORIS_HOME:-$(cd "${TP_DIR}/.." && pwd)}"
. "${DORIS_HOME}/env.sh"
. "${TP_DIR}/vars.sh"

PARALLEL=$(($(nproc) / 4 + 1))
packages=()
while [[ $# -gt 0 ]]; do
    case "$1" in
    -j) PARALLEL="$2"; shift 2 ;;
    *) packages+=("${1,,}"); shift ;;
    esac
done
if [[ ${#packages[@]} -eq 0 ]]; then
    packages=(openssl bitshuffle simdprobe minilz)
fi

BIN_UTILS="${DORIS_BIN_UTILS}"
tool() { if [[ -x "${BIN_UTILS}$1" ]]; then echo "${BIN_UTILS}$1"; else echo "$1"; fi; }
AR_BIN="$(tool ar)"
LD_BIN="$(tool ld)"
NM_BIN="$(tool nm)"
OBJCOPY_BIN="$(tool objcopy)"
[[ "${DORIS_TOOLCHAIN}" == clang && -x "${BIN_UTILS}ld.lld" ]] && LD_BIN="${BIN_UTILS}ld.lld"

mkdir -p "${TP_INSTALL_DIR}/lib" "${TP_INSTALL_DIR}/include"

check_source() {
    if [[ ! -d "${TP_SOURCE_DIR}/$1" ]]; then
        echo "Error: ${TP_SOURCE_DIR}/$1 is not unpacked; run thirdparty/download-thirdparty.sh first" >&2
        exit 1
    fi
}

build_openssl() {
    check_source "${OPENSSL_SOURCE}"
    bash "${TP_SOURCE_DIR}/${OPENSSL_SOURCE}/import.sh" "${TP_INSTALL_DIR}" "${TARGET_MULTIARCH}"
    # Like Doris: keep only the static archives so BE links OpenSSL statically.
    rm -f "${TP_INSTALL_DIR}"/lib/libcrypto.so* "${TP_INSTALL_DIR}"/lib/libssl.so*
}

build_bitshuffle() {
    check_source "${BITSHUFFLE_SOURCE}"
    cd "${TP_SOURCE_DIR}/${BITSHUFFLE_SOURCE}"
    local arches=('default')
    if [[ "${TARGET_ARCH}" == aarch64 ]]; then
        arches=('default' 'neon')
    fi
    local objs=()
    for arch in "${arches[@]}"; do
        local arch_flag=""
        if [[ "${arch}" == neon ]]; then
            arch_flag="-march=armv8-a+crc"
        fi
        local tmp="build-${arch}"
        mkdir -p "${tmp}"
        for src in bitshuffle_core bitshuffle iochain; do
            # shellcheck disable=2086
            "${CC}" ${EXTRA_CFLAGS} ${arch_flag} -std=c99 -O3 -DNDEBUG -fPIC -c "src/${src}.c" -o "${tmp}/${src}.o"
        done
        local merged="${tmp}/bitshuffle_${arch}.o"
        "${LD_BIN}" -r -o "${merged}" "${tmp}"/bitshuffle_core.o "${tmp}"/bitshuffle.o "${tmp}"/iochain.o
        if [[ "${arch}" != default ]]; then
            # Rename every exported symbol to <sym>_<arch>, as Doris does.
            "${NM_BIN}" --defined-only --extern-only "${merged}" | while read -r _ _ sym; do
                echo "${sym} ${sym}_${arch}"
            done >"${tmp}/renames.txt"
            "${OBJCOPY_BIN}" --redefine-syms="${tmp}/renames.txt" "${merged}"
        fi
        objs+=("${merged}")
    done
    rm -f "${TP_INSTALL_DIR}/lib/libbitshuffle.a"
    "${AR_BIN}" rs "${TP_INSTALL_DIR}/lib/libbitshuffle.a" "${objs[@]}"
    mkdir -p "${TP_INSTALL_DIR}/include/bitshuffle"
    cp src/bitshuffle.h src/bitshuffle_core.h "${TP_INSTALL_DIR}/include/bitshuffle/"
}

build_simdprobe() {
    check_source "${SIMDPROBE_SOURCE}"
    cd "${TP_SOURCE_DIR}/${SIMDPROBE_SOURCE}"
    make clean >/dev/null
    make -j "${PARALLEL}" CC="${CC}" AR="${AR_BIN}" PREFIX="${TP_INSTALL_DIR}" install
}

build_minilz() {
    check_source "${MINILZ_SOURCE}"
    cd "${TP_SOURCE_DIR}/${MINILZ_SOURCE}"
    make clean >/dev/null
    make -j "${PARALLEL}" CC="${CC}" AR="${AR_BIN}" PREFIX="${TP_INSTALL_DIR}" install
}

for p in "${packages[@]}"; do
    if ! declare -F "build_${p}" >/dev/null; then
        echo "Error: unknown package ${p} (known: openssl bitshuffle simdprobe minilz)" >&2
        exit 1
    fi
    echo "===== begin build ${p}"
    (build_"${p}")
    echo "===== end build ${p}"
done
