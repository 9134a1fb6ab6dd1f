#!/bin/bash
# One third-party package, in C++17 that needs libstdc++ 11 or newer
# (std::to_chars for double): it compiles against the C++ runtime too.
# shellcheck disable=2034
export TP_SOURCE_DIR="${TP_DIR:-.}/src"
export TP_INSTALL_DIR="${TP_DIR:-.}/installed"

PROBEFMT_DOWNLOAD="https://cxx20-probe.example.invalid/thirdparty/probefmt-1.0.tar.gz"
PROBEFMT_NAME=probefmt-1.0.tar.gz
PROBEFMT_SOURCE=probefmt-1.0
PROBEFMT_MD5SUM="e6cae805b7e5bd0a4b029ad0877b11f4"

export TP_ARCHIVES=(
    'PROBEFMT'
)
