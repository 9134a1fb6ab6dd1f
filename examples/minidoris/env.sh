#!/usr/bin/env bash
# minidoris build environment, with the same interface as Apache Doris's env.sh:
# DORIS_TOOLCHAIN picks gcc or clang, whose drivers are found under
# DORIS_GCC_HOME/bin (gcc, g++) or DORIS_CLANG_HOME/bin (clang, clang++).

export LC_ALL=C
DORIS_HOME="${DORIS_HOME:-$(cd "$(dirname "${BASH_SOURCE[0]}")" &>/dev/null && pwd)}"
export DORIS_HOME
export DORIS_THIRDPARTY="${DORIS_THIRDPARTY:-${DORIS_HOME}/thirdparty}"

DORIS_TOOLCHAIN="${DORIS_TOOLCHAIN:-gcc}"
case "${DORIS_TOOLCHAIN}" in
gcc)
    DORIS_GCC_HOME="${DORIS_GCC_HOME:-$(dirname "$(command -v gcc)")/..}"
    export CC="${DORIS_GCC_HOME}/bin/gcc"
    export CXX="${DORIS_GCC_HOME}/bin/g++"
    ;;
clang)
    DORIS_CLANG_HOME="${DORIS_CLANG_HOME:-$(dirname "$(command -v clang)")/..}"
    export CC="${DORIS_CLANG_HOME}/bin/clang"
    export CXX="${DORIS_CLANG_HOME}/bin/clang++"
    ;;
*)
    echo "Error: DORIS_TOOLCHAIN must be gcc or clang, got '${DORIS_TOOLCHAIN}'" >&2
    exit 1
    ;;
esac
for tool in "${CC}" "${CXX}"; do
    if [[ ! -x "${tool}" ]]; then
        echo "Error: compiler ${tool} not found; set DORIS_GCC_HOME or DORIS_CLANG_HOME" >&2
        exit 1
    fi
done
export DORIS_BIN_UTILS="${DORIS_BIN_UTILS:-/usr/bin/}"
export AR="${AR:-ar}"

# The target architecture comes from the compiler, not from uname: cross
# builds then need no special casing.
TARGET_TRIPLE="$("${CC}" -dumpmachine)"
TARGET_ARCH="${TARGET_TRIPLE%%-*}"
export TARGET_ARCH
export TARGET_MULTIARCH="${TARGET_ARCH}-linux-gnu"

# As Doris's env.sh: ccache, where installed, launches the BE's compiles.
if CCACHE_VERSION="$(ccache --version 2>/dev/null)"; then
    # Its first line, with no pipe (head closing it early is SIGPIPE for
    # echo, which set -o pipefail makes the build's failure).
    echo "${CCACHE_VERSION%%$'\n'*}"
    export CCACHE_LAUNCHER=ccache
fi
