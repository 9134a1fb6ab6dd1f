#!/usr/bin/env bash
# Installs the Debian packages and tools dorisarm needs, by profile:
#
#   build  what `dorisarm build`, `scan`, `publish` and `sign` need: the
#          compilers for both ISAs (native plus a cross compiler for the
#          other one), clang-16/lld/llvm, qemu-user, proot, what Doris's
#          thirdparty scripts check for. The Dagger module's build
#          containers install only this.
#   test   build + what the test suite adds: docker-registry, headless
#          Chromium for the report tests, bc and time, actionlint and
#          staticcheck (Go tools, into .cache/bin).
#   demo   build + what `make demo` adds: docker-registry, bc, Chromium
#          (the report screenshot).
#
# With no --profile, every profile (what `make test`, `make demo` and
# .ci/run expect). --print lists the packages for this machine, or for
# --arch amd64|arm64, and installs nothing.
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail

usage() {
  echo "usage: install-deps.sh [--profile build|test|demo|all]... [--print [--arch amd64|arm64]]" >&2
  exit 2
}

profiles=()
print=
arch=
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) [ $# -ge 2 ] || usage; profiles+=("$2"); shift 2 ;;
    --profile=*) profiles+=("${1#--profile=}"); shift ;;
    --print) print=1; shift ;;
    --arch) [ $# -ge 2 ] || usage; arch="$2"; shift 2 ;;
    --arch=*) arch="${1#--arch=}"; shift ;;
    -h|--help) usage ;;
    *) echo "install-deps: unknown argument $1" >&2; usage ;;
  esac
done
[ "${#profiles[@]}" -gt 0 ] || profiles=(all)
want_build= want_test= want_demo=
for p in "${profiles[@]}"; do
  case "$p" in
    build) want_build=1 ;;
    test) want_build=1; want_test=1 ;;
    demo) want_build=1; want_demo=1 ;;
    all) want_build=1; want_test=1; want_demo=1 ;;
    *) echo "install-deps: unknown profile $p (build, test, demo or all)" >&2; exit 2 ;;
  esac
done

# The machine's Debian architecture decides which ISA is native and which
# needs the cross compiler and the foreign (multiarch) libraries.
if [ -n "$arch" ] && [ -z "$print" ]; then
  echo "install-deps: --arch only goes with --print (packages install for this machine's architecture)" >&2
  exit 2
fi
[ -n "$arch" ] || arch="$(dpkg --print-architecture)"
case "$arch" in
  amd64) foreign=arm64; cross=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu binutils-aarch64-linux-gnu) ;;
  arm64) foreign=amd64; cross=(gcc-x86-64-linux-gnu g++-x86-64-linux-gnu binutils-x86-64-linux-gnu) ;;
  *) echo "install-deps: Debian architecture $arch is not supported (amd64 or arm64)" >&2; exit 2 ;;
esac

pkgs=()
if [ -n "$want_build" ]; then
  pkgs+=(
    # Native compilers (native targets, the exec shim, host tools of a
    # cross build) and the cross compiler for the other ISA.
    gcc g++ libc6-dev "${cross[@]}"
    clang-16 lld-16 llvm-16
    qemu-user
    make cmake patch unzip zstd file libssl-dev curl ca-certificates python3
    # What Apache Doris's own thirdparty scripts need (build-thirdparty.sh
    # checks cmake, byacc, flex, automake and libtool; packages use the rest).
    byacc flex bison automake autoconf libtool pkg-config ninja-build
    # build_lzma runs autopoint (gettext's); packages that autoreconf with
    # LT_INIT([dlopen]) need libltdl's macros (libltdl-dev).
    autopoint libltdl-dev
    xz-utils bzip2 zip python-is-python3
    # The build machine's code generators a cross build's BE steps run
    # (recipes/doris.yaml build_tools: Doris's gensrc runs protoc and thrift).
    protobuf-compiler thrift-compiler
    # Runs target programs a cross build starts where dorisarm's exec shim cannot be compiled.
    proot
    # The BE's compiler launcher (Doris's env.sh uses it where installed):
    # the compile cache that a killed or second build compiles only the rest with.
    ccache
    # Every build step runs in a bubblewrap sandbox (as root, setpriv of
    # util-linux drops it to an unprivileged user).
    bubblewrap util-linux
    # Clang's native profile runtime (PGO profiles).
    libclang-rt-16-dev
    # The other ISA's OpenSSL and profile runtime (multiarch).
    "libssl-dev:${foreign}" "libclang-rt-16-dev:${foreign}"
  )
fi
if [ -n "$want_test" ] || [ -n "$want_demo" ]; then
  pkgs+=(docker-registry bc chromium)
fi
if [ -n "$want_test" ]; then
  pkgs+=(time chromium-driver)
fi

if [ -n "$print" ]; then
  printf '%s\n' "${pkgs[@]}" | awk '!seen[$0]++'
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi

if ! command -v go >/dev/null 2>&1; then
  echo "install-deps: Go 1.26 is required (https://go.dev/dl/); it is not a Debian package at that version" >&2
  exit 1
fi

# Go tools the tests use, pinned, into .cache/bin (a few seconds).
if [ -n "$want_test" ]; then
  tools_bin="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache/bin"
  if [ ! -x "${tools_bin}/actionlint" ]; then
    GOBIN="${tools_bin}" go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.7
  fi
  # make test runs it (make lint); 2026.2.2 knows Go 1.26. A different
  # version installed earlier is replaced.
  # make lint: no function of the project's own code branches more than 40 ways.
  if [ ! -x "${tools_bin}/gocyclo" ]; then
    GOBIN="${tools_bin}" go install github.com/fzipp/gocyclo/cmd/gocyclo@v0.6.0
  fi
  staticcheck_version=v0.8.2
  if ! "${tools_bin}/staticcheck" -version 2>/dev/null | grep -qF "(${staticcheck_version#v})"; then
    GOBIN="${tools_bin}" go install "honnef.co/go/tools/cmd/staticcheck@${staticcheck_version}"
  fi
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all packages present (${profiles[*]})"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if ! dpkg --print-foreign-architectures | grep -qx "$foreign"; then
  $SUDO dpkg --add-architecture "$foreign"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The Debian registry package enables a system service we never use; tests start their own.
if command -v systemctl >/dev/null 2>&1; then
  $SUDO systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi
echo "install-deps: done"
