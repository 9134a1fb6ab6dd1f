#!/bin/bash
# shellcheck disable=2034
# minidoris third-party packages, declared the way Apache Doris's
# thirdparty/vars.sh declares them: <PKG>_DOWNLOAD, _NAME, _SOURCE, _MD5SUM,
# and the TP_ARCHIVES list. The example.invalid host never resolves: the
# archives come from a mirror (thirdparty/mirror, or REPOSITORY_URL).

export TP_SOURCE_DIR="${TP_DIR:-.}/src"
export TP_INSTALL_DIR="${TP_DIR:-.}/installed"
export TP_PATCH_DIR="${TP_DIR:-.}/patches"
export TP_INCLUDE_DIR="${TP_INSTALL_DIR}/include"
export TP_LIB_DIR="${TP_INSTALL_DIR}/lib"

# openssl (imported from the target OS sysroot's libssl-dev, or this machine's multiarch one)
OPENSSL_DOWNLOAD="https://minidoris.example.invalid/thirdparty/openssl-sysimport-3.0.tar.gz"
OPENSSL_NAME=openssl-sysimport-3.0.tar.gz
OPENSSL_SOURCE=openssl-sysimport-3.0
OPENSSL_MD5SUM="ac4b71284587f2d78c26f15593f56567"

# bitshuffle
BITSHUFFLE_DOWNLOAD="https://minidoris.example.invalid/thirdparty/bitshuffle-0.5.1.tar.gz"
BITSHUFFLE_NAME=bitshuffle-0.5.1.tar.gz
BITSHUFFLE_SOURCE=bitshuffle-0.5.1
BITSHUFFLE_MD5SUM="b1482eb056147a92e3646120dd17c246"

# simdprobe (tunes itself to the build host, like vectorscan and OpenBLAS)
SIMDPROBE_DOWNLOAD="https://minidoris.example.invalid/thirdparty/simdprobe-1.0.2.tar.gz"
SIMDPROBE_NAME=simdprobe-1.0.2.tar.gz
SIMDPROBE_SOURCE=simdprobe-1.0.2
SIMDPROBE_MD5SUM="a3ba42be8c861e7df92b3d5a99b7b8a9"

# minilz
MINILZ_DOWNLOAD="https://minidoris.example.invalid/thirdparty/minilz-1.2.0.tar.gz"
MINILZ_NAME=minilz-1.2.0.tar.gz
MINILZ_SOURCE=minilz-1.2.0
MINILZ_MD5SUM="7d94a843e592b92079cdd2d06ac434f6"

export TP_ARCHIVES=(
    'OPENSSL'
    'BITSHUFFLE'
    'SIMDPROBE'
    'MINILZ'
)
