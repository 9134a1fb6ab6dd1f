#!/usr/bin/env bash
# Installs every Debian package and tool that dorisarm's tests and demo need.
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi

# Packages for the host (amd64) and for the aarch64 target (multiarch).
host_pkgs=(
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu binutils-aarch64-linux-gnu
  clang-16 lld-16 llvm-16
  qemu-user
  docker-registry
  make cmake patch unzip zstd file libssl-dev bc time curl python3
  chromium chromium-driver
  # What Apache Doris's own thirdparty scripts need (build-thirdparty.sh
  # checks cmake, byacc, flex, automake and libtool; packages use the rest).
  byacc flex bison automake autoconf libtool pkg-config ninja-build
  xz-utils bzip2 zip python-is-python3
  # Runs target programs a cross build starts where dorisarm's exec shim cannot be compiled.
  proot
  # Clang's native profile runtime (PGO profiles made in tests).
  libclang-rt-16-dev
)
arm64_pkgs=(
  libssl-dev:arm64
  libclang-rt-16-dev:arm64
)

if ! command -v go >/dev/null 2>&1; then
  echo "install-deps: Go 1.26 is required (https://go.dev/dl/); it is not a Debian package at that version" >&2
  exit 1
fi

# Go tools the tests use, pinned, into .cache/bin (a few seconds).
tools_bin="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache/bin"
if [ ! -x "${tools_bin}/actionlint" ]; then
  GOBIN="${tools_bin}" go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.7
fi

missing=()
for p in "${host_pkgs[@]}" "${arm64_pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The Debian registry package enables a system service we never use; tests start their own.
if command -v systemctl >/dev/null 2>&1; then
  $SUDO systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi
echo "install-deps: done"
