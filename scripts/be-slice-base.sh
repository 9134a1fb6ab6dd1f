#!/usr/bin/env bash
# be-slice-base.sh: assemble an aarch64 third-party install for a BE slice.
#
# A BE slice (dorisarm build --be-targets, docs/maintainers.md "A BE slice")
# configures the real Doris BE and compiles some of its units; it links
# nothing. This script assembles what that needs, in the layout of Doris's
# thirdparty/installed (include/, lib/, bin/), from
#
#   - Debian 12 (bookworm) arm64 packages, each pinned by exact version and
#     sha256, fetched with `apt-get download PKG:arm64=VERSION` (apt checks
#     the Release signature chain) and unpacked with `dpkg-deb -x`: nothing is
#     installed into the host;
#   - upstream archives Debian lacks (or has in a version the BE does not
#     compile against), by the archive name of the tree's thirdparty/vars.sh,
#     from --mirror (Doris's REPOSITORY_URL layout, a directory or URL) or
#     else from vars.sh's own download URL, checked against vars.sh's MD5;
#   - headers generated here with the build machine's protoc (brpc's .pb.h).
#
# It is NOT the release path: the release builds every third-party package
# for the target from Doris's own sources (dorisarm build --packages). Some
# pieces here stand in for Doris's (other versions, Debian's builds, empty
# placeholder archives where configure only checks that a file exists);
# PROVENANCE in the output says what each piece is and where it came from.
#
# Usage: scripts/be-slice-base.sh [--doris TREE] [--mirror DIR|URL] [--downloads DIR] OUT
#
#   OUT          output directory; the install is OUT/installed, the record
#                OUT/installed/PROVENANCE
#   --doris      a Doris tree whose thirdparty/vars.sh names the upstream
#                archives and their MD5 (default: $DORIS_SRC)
#   --mirror     archives in Doris's REPOSITORY_URL layout (<mirror>/<NAME>);
#                without it, vars.sh's *_DOWNLOAD URLs
#   --downloads  download cache (default OUT/downloads); .debs and archives
#                are kept there and checked again on every run
#
# Needs on the build machine: apt-get with arm64 as a foreign architecture
# (dpkg --add-architecture arm64 && apt-get update, as root, once), dpkg-deb,
# curl, tar, gzip, md5sum, sha256sum, protoc (apt-get install
# protobuf-compiler; scripts/install-deps.sh --profile build installs it).
# Idempotent: a second run re-checks the downloads and rebuilds OUT/installed.
# It writes nothing outside OUT and the download cache.
set -euo pipefail

prog=be-slice-base
die() { echo "$prog: $*" >&2; exit 1; }
usage() {
  sed -n '/^# Usage:/,/^# It writes/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

doris=${DORIS_SRC:-}
mirror=
downloads=
out=
while [ $# -gt 0 ]; do
  case "$1" in
    --doris) [ $# -ge 2 ] || usage; doris=$2; shift 2 ;;
    --mirror) [ $# -ge 2 ] || usage; mirror=$2; shift 2 ;;
    --downloads) [ $# -ge 2 ] || usage; downloads=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "$prog: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || { echo "$prog: one output directory only" >&2; usage; }; out=$1; shift ;;
  esac
done
[ -n "$out" ] || usage
[ -n "$doris" ] || die "no Doris tree: pass --doris TREE (or set DORIS_SRC); its thirdparty/vars.sh names the upstream archives"
vars=$doris/thirdparty/vars.sh
[ -f "$vars" ] || die "$vars not found: --doris must be a Doris source tree"

for tool in apt-get dpkg dpkg-deb curl tar gzip md5sum sha256sum protoc; do
  command -v "$tool" >/dev/null || die "$tool is not installed (protoc: apt-get install protobuf-compiler; the rest: apt-get install dpkg curl tar gzip coreutils)"
done
dpkg --print-foreign-architectures | grep -qx arm64 ||
  die "arm64 is not a dpkg foreign architecture here; as root, once: dpkg --add-architecture arm64 && apt-get update"

mkdir -p "$out"
out=$(cd "$out" && pwd)
downloads=${downloads:-$out/downloads}
mkdir -p "$downloads/deb" "$downloads/archives"
downloads=$(cd "$downloads" && pwd)
inst=$out/installed
stage=$out/.stage

# --- Debian 12 arm64 packages: name, version, sha256 of the .deb ----------
# (apt-cache show PKG:arm64=VERSION prints the SHA256 this pins.)
debs=(
  "libboost1.81-dev 1.81.0-5+deb12u1 3e33f47db94df69091cbb3e63e4f51539512fc3cc7958597ab9b40dfd8de9a27"
  "libboost-system1.81-dev 1.81.0-5+deb12u1 b1a5f6a1283ae452e32a008949dd701741446d578f9dd7d22006890d97073104"
  "libboost-date-time1.81-dev 1.81.0-5+deb12u1 f03630bc75b53c266f5c44970d4113f4c8d311758e9bd37b202b474272c421ed"
  "libprotobuf-dev 3.21.12-3+deb12u1 92b1c87b95d99a06ba9e7ac2f29d791a6992d65ae41725438197f61d97404228"
  "libprotoc-dev 3.21.12-3+deb12u1 9350a9e43a74f0cdf89b21b9bf9d320520b7079808ee86a45bc5879d4ec58da6"
  "libthrift-dev 0.17.0-2+b2 0378522cd061f542f3cc0493d0164e26ade70de920dc7f44b90c404271d5b4db"
  "libgoogle-glog-dev 0.6.0-2 52e839a01a296c94d9b22e8703dca54b9c4dbc7732c09ec04c671838bd1a97b9"
  "libgflags-dev 2.2.2-2 d48167ab3627cb02da77094fdcecc544934fa6a69edf79cd58d9699a71ac7885"
  "rapidjson-dev 1.1.0+dfsg2-7.1 37d2bd2dd97e3f8a25d9d27958ba22dfed13550a515852cc30434e538b9f47a3"
  "libsimdjson-dev 3.0.1-1 a0ac6d902c517df38dee5a5062daa46bb02a64c5c6130b48615ad59948e600fc"
  "libconcurrentqueue-dev 1.0.3+ds-1 bfebbe7028503a59273fdc7a9fbfb6f72d68ca21e4f6ad3f425f0d4a757d81de"
  "libfast-float-dev 3.9.0-1 ffd6ee09f81ad561ca99215a9855f3098f153d57939c31eb39829095ddb59cc6"
  "libcctz-dev 2.3+dfsg1-3 0a5b3f220a07c3b07ae5111d340dade1a8bf65f2992b725188001885c39d7742"
  "libre2-dev 20220601+dfsg-1+b1 664495d8ff3be934611b61da3636f8c097edd1de9a11deba2a5bb4af41424237"
  "libjemalloc-dev 5.3.0-1 9adac863d61ab51a3ac7773d15302ca8a8a06bcf73ced17cb46c833c2e9d94c4"
  "libsnappy-dev 1.1.9-3 83815370e47859480cb07b01e5c3dfdfa1021f6157be9e2080f67794bb371543"
  "liblz4-dev 1.9.4-1 d1946be158d29cc044e4c03a222423cd94d1602fd631a00745f28b9472742f48"
  "libzstd-dev 1.5.4+dfsg2-5+deb12u1 2dc8d2578567d2bd5aea37236f52c75fbaf8adb3f8836dc5d67cad8c565b5cd3"
  "zlib1g-dev 1:1.2.13.dfsg-1+deb12u1 d86143f08aa173aecd262358e9710a071f95b78ba0dd84971c25ebff39f78e05"
  "libbz2-dev 1.0.8-5+b1 c9827ab40420f1259b1a10983978ec8de87c11fc1a6b3c192adea1c4c490754f"
  "libevent-dev 2.1.12-stable-8+deb12u1 03238620c3de525a5f89e890ef5805f610785a4dd21dbe83cf7b09cd36c0464d"
  "libcurl4-openssl-dev 7.88.1-10+deb12u15 b64c072a4cf1a5bbf2e7ced12564c73ce4ba6810c7e1de4c861c46c7d5eae6b0"
  "libssl-dev 3.0.22-1~deb12u2 d141686eacc7e271630bf9032cd19cebe984b6864e59c02ac85554ff62941d00"
  "librocksdb-dev 7.8.3-2 1133bb5fbaa26c6e0e23d22d26d321223efea462db782969a942f38e0b9dc345"
  "libvectorscan-dev 5.4.9-1 d02eab5976f2a80f6cfb3a7e883276055590dba2ba5283e9bb6f81433d15cf39"
  "libxxhash-dev 0.8.1-1 30df1dc1b8d8436d1b66af5886b788775b33a7bee5fd319f7101d17076618f57"
  "libgtest-dev 1.12.1-0.2 6f6c7defd14a75e73d6d1a7ea5cbe8dd0f6c52010228b0873464ce606bf2771e"
  "libdouble-conversion-dev 3.2.1-1 f925b839938aa8799607b3c5d25e01bb6aa525ebe24a17eb5a081b8625e740dc"
)

# --- upstream archives, by vars.sh variable prefix -------------------------
# Each is looked up in vars.sh (NAME, MD5SUM, DOWNLOAD, SOURCE).
# CROARINGBITMAP: Debian's libroaring-dev is 0.2.66, older than the
# roaring::api the BE's bitmap_value.h uses. FMT: Debian has fmt 9, the BE
# is written against 7.1.3.
# ARROW: not in Debian 12; headers (arrow/, parquet/) with config.h written
# here as Doris's build_arrow configures it.
upstream=(BRPC SSE2NEON PARALLEL_HASHMAP PDQSORT FMT CROARINGBITMAP ARROW)

# Archives whose bytes are known to differ from vars.sh's (a substitute from
# the same upstream tag; its MD5 is pinned here and PROVENANCE says so).
# Either vars.sh's MD5 or the substitute's is accepted.
declare -A substitute_md5=(
  [CRoaring-2.1.2.tar.gz]=8134b6a2ecbfdbc77da944fc0c5a06dc
  [apache-arrow-17.0.0.tar.gz]=06843ac477adde95c0e53e8a793b1706
  [apache-arrow-15.0.2.tar.gz]=2e1c77ada8996a11c9b00cfd1eb3375b
)
# How the substitutes were made (from git snapshots; the tag archive could not
# be had byte for byte):
#   CRoaring-2.1.2.tar.gz   ../shared/corpus/mirror-substitutes (its README)
#   apache-arrow-*.tar.gz   the tag's tree less one blob the snapshot lacked
#                           (go/arrow/compute/internal/kernels/scalar_comparison_avx2_amd64.s),
#                           tar --sort=name --mtime=@0 --owner=0 --group=0 | gzip -n,
#                           prefix arrow-apache-arrow-VERSION/

varof() { # varof PREFIX FIELD: a field of vars.sh, expanded as vars.sh would
  ( set +u; . "$vars" >/dev/null 2>&1; eval "printf '%s' \"\${$1_$2}\"" )
}

# --- fetch and check the .debs --------------------------------------------
prov=()
for entry in "${debs[@]}"; do
  read -r pkg ver sha <<<"$entry"
  file=$(ls "$downloads/deb/${pkg}_"*"_"{arm64,all}.deb 2>/dev/null | head -1 || true)
  if [ -n "$file" ] && [ "$(sha256sum <"$file" | cut -c1-64)" != "$sha" ]; then
    rm -f "$file"; file=
  fi
  if [ -z "$file" ]; then
    arch=arm64
    apt-cache show "$pkg:arm64=$ver" >/dev/null 2>&1 || arch=all
    if ! (cd "$downloads/deb" && apt-get download -q "$pkg:$arch=$ver" >/dev/null 2>"$downloads/deb/.err"); then
      # Architecture: all packages are named without :arm64.
      (cd "$downloads/deb" && apt-get download -q "$pkg=$ver" >/dev/null 2>"$downloads/deb/.err") ||
        die "apt-get download $pkg:arm64=$ver failed: $(tail -1 "$downloads/deb/.err")
  (run apt-get update as root; a version dropped from the archive is on snapshot.debian.org: put its .deb in $downloads/deb)"
    fi
    file=$(ls "$downloads/deb/${pkg}_"*"_"{arm64,all}.deb 2>/dev/null | head -1 || true)
    [ -n "$file" ] || die "apt-get download $pkg=$ver left no .deb in $downloads/deb"
  fi
  got=$(sha256sum <"$file" | cut -c1-64)
  [ "$got" = "$sha" ] || die "$file: sha256 $got, pinned $sha (delete it to fetch again)"
  dver=$(dpkg-deb -f "$file" Version); darch=$(dpkg-deb -f "$file" Architecture)
  [ "$dver" = "$ver" ] || die "$file is version $dver, pinned $ver"
  case "$darch" in arm64|all) ;; *) die "$file is for $darch, not arm64" ;; esac
  prov+=("debian  $pkg $ver $darch sha256:$sha")
done

# --- fetch and check the upstream archives --------------------------------
fetch_archive() { # fetch_archive PREFIX -> path of the checked archive
  local p=$1 name md5 url dest want got
  name=$(varof "$p" NAME); md5=$(varof "$p" MD5SUM); url=$(varof "$p" DOWNLOAD)
  [ -n "$name" ] && [ -n "$md5" ] || die "$vars names no ${p}_NAME/${p}_MD5SUM"
  dest=$downloads/archives/$name
  want=${substitute_md5[$name]:-$md5}
  ok() { local m; m=$(md5sum <"$1" | cut -c1-32); [ "$m" = "$md5" ] || [ "$m" = "$want" ]; }
  if [ ! -f "$dest" ] || ! ok "$dest"; then
    rm -f "$dest"
    if [ -n "$mirror" ] && [ -d "$mirror" ]; then
      [ -f "$mirror/$name" ] || die "$name (${p}_NAME in vars.sh) is not in the mirror $mirror"
      cp "$mirror/$name" "$dest.part"
    else
      [ -z "$mirror" ] || url=${mirror%/}/$name
      curl -fsSL --retry 3 -o "$dest.part" "$url" || die "download of $name from $url failed"
    fi
    mv "$dest.part" "$dest"
  fi
  got=$(md5sum <"$dest" | cut -c1-32)
  ok "$dest" || die "$name: md5 $got, vars.sh says $md5${substitute_md5[$name]:+ (substitute pinned at $want)}"
  printf '%s' "$dest"
}

declare -A arc
for p in "${upstream[@]}"; do
  arc[$p]=$(fetch_archive "$p") || exit 1
done
# fetch_archive ran in a subshell: record again here.
for p in "${upstream[@]}"; do
  name=$(varof "$p" NAME); md5=$(varof "$p" MD5SUM)
  got=$(md5sum <"${arc[$p]}" | cut -c1-32)
  if [ "$got" != "$md5" ]; then
    prov+=("upstream $name md5:${substitute_md5[$name]} SUBSTITUTE: vars.sh's ${p}_MD5SUM is $md5 (made from a git snapshot of the same tag; how: substitute_md5 in scripts/be-slice-base.sh)")
  else
    prov+=("upstream $name md5:$md5 (= vars.sh ${p}_MD5SUM) from ${mirror:-its vars.sh URL}")
  fi
done

# --- assemble --------------------------------------------------------------
# Up to date when this script, vars.sh, protoc and every input are the ones
# the install was made from.
stamp=$( { sha256sum <"$0"; md5sum <"$vars"; protoc --version; printf '%s\n' "${prov[@]}"; } | sha256sum | cut -c1-64)
if [ -f "$inst/PROVENANCE" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$prog: $inst is up to date (inputs unchanged); see $inst/PROVENANCE"
  exit 0
fi
rm -f "$out/.stamp"
rm -rf "$stage" "$inst"
mkdir -p "$stage/deb" "$stage/src" "$inst/include" "$inst/lib" "$inst/bin"
for entry in "${debs[@]}"; do
  read -r pkg _ <<<"$entry"
  dpkg-deb -x "$(ls "$downloads/deb/${pkg}_"*"_"{arm64,all}.deb 2>/dev/null | head -1)" "$stage/deb"
done
# Multiarch layout -> Doris's: usr/include and usr/include/aarch64-linux-gnu
# merge into include/, usr/lib/aarch64-linux-gnu into lib/.
cp -a "$stage/deb/usr/include/." "$inst/include/"
if [ -d "$inst/include/aarch64-linux-gnu" ]; then
  cp -a "$inst/include/aarch64-linux-gnu/." "$inst/include/"
  rm -rf "$inst/include/aarch64-linux-gnu"
fi
cp -a "$stage/deb/usr/lib/aarch64-linux-gnu/." "$inst/lib/"
# Static archives only: the .so links point at runtime packages not unpacked
# here (some absolutely, out of the install), and the BE links statically.
find "$inst/lib" \( -name '*.so' -o -name '*.so.*' \) -exec rm -f {} +
# pkg-config and CMake package files name /usr; the BE's configure finds
# boost by FindBoost's search of Boost_ROOT (no config needed).
rm -rf "$inst/lib/pkgconfig" "$inst/lib/cmake"

untar() { # untar ARCHIVE: unpack into the stage, print the top directory
  local d; d=$(mktemp -d "$stage/src/x.XXXX")
  tar -xzf "$1" -C "$d"
  printf '%s' "$d/$(ls "$d" | head -1)"
}

# fmt 7.1.3 (header-only use; Debian's fmt 9 headers are replaced).
rm -rf "$inst/include/fmt"
d=$(untar "${arc[FMT]}"); cp -a "$d/include/fmt" "$inst/include/"
# sse2neon: one header.
d=$(untar "${arc[SSE2NEON]}"); cp "$d/sse2neon.h" "$inst/include/"
# parallel-hashmap: headers.
d=$(untar "${arc[PARALLEL_HASHMAP]}"); cp -a "$d/parallel_hashmap" "$inst/include/"
# pdqsort: one header (vars.sh's archive is the file itself).
cp "${arc[PDQSORT]}" "$inst/include/pdqsort.h"
# CRoaring 2.1.2: headers as its CMake install lays them out.
rm -rf "$inst/include/roaring"
d=$(untar "${arc[CROARINGBITMAP]}")
cp -a "$d/include/roaring" "$inst/include/"
cp "$d/cpp/"*.hh "$inst/include/roaring/"
# brpc 1.4.0: its headers (src/**/*.h) plus the .pb.h of its .proto files,
# generated with the build machine's protoc against Debian's protobuf
# headers of the same release (3.21.12).
d=$(untar "${arc[BRPC]}")
(cd "$d/src" && find . -name '*.h' -o -name '*.hpp' | while read -r h; do
  mkdir -p "$inst/include/$(dirname "$h")"; cp "$h" "$inst/include/$h"; done)
# butil/config.h: brpc's CMake writes it from config.h.in; Doris builds brpc
# WITH_GLOG=ON.
sed 's|^#cmakedefine BRPC_WITH_GLOG @WITH_GLOG_VAL@|#define BRPC_WITH_GLOG 1|' "$d/config.h.in" >"$inst/include/butil/config.h"
grep -q '^#define BRPC_WITH_GLOG 1' "$inst/include/butil/config.h" || die "brpc's config.h.in has no BRPC_WITH_GLOG line to fill"
pver=$(protoc --version | awk '{print $2}')
case "$pver" in 3.21.*) ;; *) die "protoc $pver: brpc's .pb.h must be generated by protoc 3.21.x to match Debian 12's libprotobuf-dev 3.21.12 headers (apt-get install protobuf-compiler on Debian 12)" ;; esac
(cd "$d/src" && find . -name '*.proto' | sed 's|^\./||' | sort >"$stage/protos" &&
  xargs protoc -I. -I"$inst/include" --cpp_out="$inst/include" <"$stage/protos") ||
  die "protoc failed on brpc's .proto files"
find "$inst/include" -name '*.pb.cc' -delete

# Arrow and Parquet headers, config headers as Doris's build_arrow
# (build-thirdparty.sh) configures them.
d=$(untar "${arc[ARROW]}")
av=$(basename "$d"); av=${av##*-}
IFS=. read -r amaj amin apat <<<"$av"
(cd "$d/cpp/src" && find arrow parquet -name '*.h' -o -name '*.hpp' | grep -v -e /test -e _test | while read -r h; do
  mkdir -p "$inst/include/$(dirname "$h")"; cp "$h" "$inst/include/$h"; done)
arrow_on=" ARROW_COMPUTE ARROW_CSV ARROW_FILESYSTEM ARROW_FLIGHT ARROW_FLIGHT_SQL ARROW_IPC ARROW_JSON ARROW_ORC ARROW_PARQUET ARROW_ENABLE_THREADING ARROW_USE_GLOG ARROW_WITH_BROTLI ARROW_WITH_LZ4 ARROW_WITH_RE2 ARROW_WITH_SNAPPY ARROW_WITH_ZLIB ARROW_WITH_ZSTD "
subst() {
  sed -e "s|@ARROW_VERSION_MAJOR@|$amaj|; s|@ARROW_VERSION_MINOR@|$amin|; s|@ARROW_VERSION_PATCH@|$apat|" \
      -e "s|@ARROW_VERSION@|$av|; s|@ARROW_SO_VERSION@|$((amaj * 100 + amin))|; s|@ARROW_FULL_SO_VERSION@|$((amaj * 100 + amin)).$apat.0|" \
      -e "s|@CMAKE_CXX_COMPILER_ID@|Clang|; s|@CMAKE_CXX_COMPILER_VERSION@||; s|@CMAKE_CXX_FLAGS@||; s|@UPPERCASE_BUILD_TYPE@|RELEASE|; s|@ARROW_PACKAGE_KIND@||; s|@ARROW_GIT_ID@||; s|@ARROW_GIT_DESCRIPTION@||" "$1" |
  while IFS= read -r line; do
    case "$line" in
      '#cmakedefine '*) n=${line#\#cmakedefine }; n=${n%% *}
        case "$arrow_on" in *" $n "*) echo "#define $n" ;; *) echo "/* #undef $n */" ;; esac ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
}
subst "$d/cpp/src/arrow/util/config.h.cmake" >"$inst/include/arrow/util/config.h"
subst "$d/cpp/src/parquet/parquet_version.h.in" >"$inst/include/parquet/parquet_version.h"
! grep -n '@[A-Z_]*@' "$inst/include/arrow/util/config.h" "$inst/include/parquet/parquet_version.h" ||
  die "arrow $av: a config template variable is left unfilled (above)"

# jemalloc: Doris configures it --with-jemalloc-prefix=je (its code calls
# jemallctl ...); Debian's is unprefixed. Give the header's public names the
# prefix as that configure writes them (libjemalloc.a stays Debian's,
# unprefixed: a slice links nothing).
sed -i 's/^#  define je_\([a-z_0-9]*\) \1$/#  define je_\1 je\1/' "$inst/include/jemalloc/jemalloc.h"
grep -q '^#  define je_mallctl jemallctl$' "$inst/include/jemalloc/jemalloc.h" ||
  die "jemalloc/jemalloc.h: the je_ rename block is not where Debian 5.3.0-1 has it"
prov+=("edited  include/jemalloc/jemalloc.h: Debian's, public names prefixed je (Doris's --with-jemalloc-prefix=je); lib/libjemalloc.a is Debian's unprefixed build")

# Doris's layout: concurrentqueue's headers at the top (build_concurrentqueue).
cp "$inst"/include/concurrentqueue/*.h "$inst/include/"
# Doris's layout: snappy's headers also under include/snappy (build_snappy).
mkdir -p "$inst/include/snappy"
cp "$inst"/include/snappy*.h "$inst/include/snappy/"

# libbacktrace.a: Doris's build.sh rebuilds the whole third-party tree when
# it is missing; a slice links nothing, so an empty archive stands for it.
# Roaring: clucene's configure find_library(roaring)s it.
for a in backtrace roaring; do
  [ -e "$inst/lib/lib$a.a" ] && continue
  printf '!<arch>\n' >"$inst/lib/lib$a.a"
  prov+=("empty   lib/lib$a.a: an empty ar archive (configure checks the file exists; a slice links nothing)")
done
# Doris's layout for a few headers: include/lz4, include/zstd (ORC's
# LZ4_INCLUDE_DIR/ZSTD_INCLUDE_DIR in the BE's CMakeLists.txt).
mkdir -p "$inst/include/lz4" "$inst/include/zstd"
cp "$inst"/include/lz4*.h "$inst/include/lz4/"
cp "$inst"/include/zstd*.h "$inst"/include/zdict.h "$inst/include/zstd/"

# No link may leave the install (dorisarm --thirdparty-base refuses one).
find "$inst" -type l | while read -r l; do
  t=$(readlink "$l")
  case "$t" in /*) ln -sfn "$(realpath --relative-to="$(dirname "$l")" "$inst${t#/usr}" 2>/dev/null || echo /missing)" "$l" ;; esac
  [ -e "$l" ] || { echo "$prog: removing dangling link $l -> $t" >&2; rm -f "$l"; }
done

{
  echo "# BE slice third-party base: NOT a release input. Written by scripts/be-slice-base.sh"
  echo "# from $vars ($(md5sum <"$vars" | cut -c1-32))"
  echo "# layout: Doris thirdparty/installed; Debian 12 arm64 packages unpacked (dpkg-deb -x),"
  echo "# multiarch dirs merged, shared objects, pkg-config and CMake package files dropped;"
  echo "# generated: brpc's *.pb.h by $(protoc --version) on the build machine."
  printf '%s\n' "${prov[@]}" | sort -u
} >"$inst/PROVENANCE"
rm -rf "$stage"
echo "$stamp" >"$out/.stamp"
echo "$prog: $inst ($(find "$inst" -type f | wc -l) files); see $inst/PROVENANCE"
