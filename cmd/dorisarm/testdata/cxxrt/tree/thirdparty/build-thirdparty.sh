#!/usr/bin/env bash
# Builds the probe's one third-party package with the cell's wrappers.
set -euo pipefail
TP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="${TP_DIR}/src/probefmt-1.0" inst="${TP_DIR}/installed"
mkdir -p "${inst}/include" "${inst}/lib"
"${CXX}" -std=c++17 -O2 -fPIC -Wall -Werror -c "${src}/probefmt.cc" -o "${src}/probefmt.o"
"${DORIS_BIN_UTILS}ar" rcs "${inst}/lib/libprobefmt.a" "${src}/probefmt.o"
cp "${src}/probefmt.h" "${inst}/include/"
