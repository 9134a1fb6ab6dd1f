#!/bin/bash
# A cut-down vars.sh with the shapes of Apache Doris's (written for tests):
# exported dirs, a multi-line TP_ARCHIVES, a file-only package and the
# uname -m switch that swaps hyperscan for vectorscan on aarch64.
export TP_SOURCE_DIR="${TP_DIR:-.}/src"

OPENSSL_DOWNLOAD="https://example.invalid/OpenSSL_1_1_1s.tar.gz"
OPENSSL_NAME=openssl-OpenSSL_1_1_1s.tar.gz
OPENSSL_SOURCE=openssl-OpenSSL_1_1_1s
OPENSSL_MD5SUM="7e79a7560dee77c0758baa33c61af4b4"

BOOST_DOWNLOAD="https://example.invalid/boost_1_81_0.tar.gz"
BOOST_NAME=boost_1_81_0.tar.gz
BOOST_SOURCE=boost_1_81_0
BOOST_MD5SUM="4bf02e84afb56dfdccd1e6aec9911f4b"

HYPERSCAN_DOWNLOAD="https://example.invalid/v5.4.2.tar.gz"
HYPERSCAN_NAME=hyperscan-5.4.2.tar.gz
HYPERSCAN_SOURCE=hyperscan-5.4.2
HYPERSCAN_MD5SUM="202f4b42f5dd4a7bb2506445e51a33b9"

MACHINE_TYPE=$(uname -m)
if [[ "${MACHINE_TYPE}" == "aarch64" || "${MACHINE_TYPE}" == 'arm64' ]]; then
    echo "use vectorscan instead of hyperscan on aarch64"
    HYPERSCAN_DOWNLOAD="https://example.invalid/vectorscan/5.4.11.tar.gz"
    HYPERSCAN_NAME=vectorscan-5.4.11.tar.gz
    HYPERSCAN_SOURCE=vectorscan-vectorscan-5.4.11
    HYPERSCAN_MD5SUM="e67b70403cba6c1654a9fef4fd15a2f2"
fi

PDQSORT_DOWNLOAD="https://example.invalid/pdqsort.h"
PDQSORT_NAME="pdqsort.h"
PDQSORT_FILE="pdqsort.h"
PDQSORT_MD5SUM="af28f79d5d7d7a5486f54d9f1244c2b5"

export TP_ARCHIVES=(
    'OPENSSL'
    'BOOST'
    'HYPERSCAN'
    'PDQSORT'
)
