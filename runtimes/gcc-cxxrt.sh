#!/usr/bin/env bash
# gcc-cxxrt.sh: build GCC's static C++ runtime against a capped sysroot.
#
# dorisarm's runtime step runs this in the step's sandbox (matrix.yaml
# runtimes.<name>.script). It builds, from the upstream GCC source, only
# what a `-static-libstdc++ -static-libgcc` link takes from the compiler,
# and no compiler:
#
#   $PREFIX/include/c++/<major>/   libstdc++'s headers (c++config.h made by
#                                  configure's tests against the sysroot)
#   $PREFIX/lib/libstdc++.a libsupc++.a libstdc++fs.a libgcc.a libgcc_eh.a
#   $PREFIX/share/glibc.txt        the GLIBC_ versions every member needs
#
# Environment (set by dorisarm):
#   CXXRT_SOURCE   the source archive: a Debian orig.tar.gz that holds
#                  gcc-*-dfsg.tar.xz, a gcc-*.tar.xz or a gcc-*.tar.gz
#   CXXRT_SYSROOT  the sysroot, capped at CXXRT_GLIBC
#   CXXRT_HOST     the target triple (aarch64-linux-gnu)
#   CXXRT_CC       the target's GCC C driver (it compiles libstdc++ too, as
#                  GCC's own build does with xgcc: a C++ driver's configure
#                  link tests would pull in the compiler's own libstdc++.so)
#   CXXRT_GLIBC    the glibc ceiling; nothing built may need a newer one
#   CXXRT_PREFIX   where the runtime goes
#   CXXRT_WORK     a scratch directory (removed at the end)
#   JOBS           make's -j
#
# The compiler is pinned to the sysroot by a wrapper: --sysroot alone does
# not do it with Debian's cross GCC, which searches /usr/<triple>/include
# and /usr/<triple>/lib (the build machine's glibc) before the sysroot.
set -euo pipefail
for v in CXXRT_SOURCE CXXRT_SYSROOT CXXRT_HOST CXXRT_CC CXXRT_GLIBC CXXRT_PREFIX CXXRT_WORK JOBS; do
  [ -n "${!v:-}" ] || { echo "gcc-cxxrt: $v is not set" >&2; exit 2; }
done
SRC=$CXXRT_SOURCE SYSROOT=$CXXRT_SYSROOT HOST=$CXXRT_HOST CC_T=$CXXRT_CC
CEIL=$CXXRT_GLIBC PREFIX=$CXXRT_PREFIX WORK=$CXXRT_WORK
say() { echo "== gcc-cxxrt: $* ($(date -u +%T))"; }
die() { echo "gcc-cxxrt: $*" >&2; exit 1; }

BUILD=$(gcc -dumpmachine)
for t in as ld ar ranlib nm objdump readelf strip; do
  command -v "$HOST-$t" >/dev/null || die "no $HOST-$t: install the $HOST binutils"
done
[ "$("$CC_T" -dumpmachine)" = "$HOST" ] || die "$CC_T targets $("$CC_T" -dumpmachine), not $HOST"
[ -d "$SYSROOT/usr/include" ] || die "$SYSROOT has no usr/include"
rm -rf "$WORK"; mkdir -p "$WORK" "$PREFIX"

say "unpack $(basename "$SRC")"
# Only what the runtime needs: the other front ends, runtimes and the test
# suites are most of the archive. Anchored, and * does not cross '/'.
# (libstdc++'s configure reads testsuite/ and doc/ templates: only their
# tests and generated manuals go.)
EXCL=(gcc/testsuite 'libstdc++-v3/testsuite/[0-9]*' libstdc++-v3/testsuite/ext libstdc++-v3/testsuite/tr1
      libstdc++-v3/testsuite/experimental libgo libphobos libgfortran libsanitizer libada gnattools gotools
      libobjc libgomp libitm libvtv liboffloadmic libquadmath libssp libffi zlib lto-plugin libcc1 c++tools
      libatomic libbacktrace intl maintainer-scripts gcc/ada gcc/go gcc/d gcc/fortran gcc/m2 gcc/objc
      gcc/objcp gcc/jit gcc/po libcpp/po libstdc++-v3/doc/html libstdc++-v3/doc/xml newlib)
ex=(--anchored --no-wildcards-match-slash --no-same-owner --no-same-permissions)
for e in "${EXCL[@]}"; do ex+=(--exclude="gcc-*/$e"); done
case $SRC in
  *.orig.tar.gz) tar -xzOf "$SRC" --wildcards '*/gcc-*-dfsg.tar.xz' | xz -dc | tar -x -C "$WORK" "${ex[@]}" ;;
  *.tar.xz) xz -dc "$SRC" | tar -x -C "$WORK" "${ex[@]}" ;;
  *.tar.gz) tar -xzf "$SRC" -C "$WORK" "${ex[@]}" ;;
  *) die "$SRC: not a .tar.gz or .tar.xz" ;;
esac
set -- "$WORK"/gcc-[0-9]*
[ $# = 1 ] && [ -d "$1/libstdc++-v3" ] || die "$SRC holds no gcc-<version>/ with libstdc++-v3"
S=$1
GCCVER=$(cat "$S/gcc/BASE-VER")
MAJOR=${GCCVER%%.*}
ver=$("$CC_T" -dumpversion)
[ "${ver%%.*}" = "$MAJOR" ] || die "$CC_T is GCC $ver; this source is GCC $GCCVER: the runtime is built by the same major release"

GCCINC=$("$CC_T" -print-file-name=include)
FIXED=$("$CC_T" -print-file-name=include-fixed)
mkdir -p "$WORK/bin"
{
  echo '#!/bin/sh'
  printf 'exec %s --sysroot=%s -nostdinc -isystem %s' "$(command -v "$CC_T")" "$SYSROOT" "$GCCINC"
  [ -d "$FIXED" ] && printf ' -isystem %s' "$FIXED"
  printf ' -isystem %s/usr/include/%s -isystem %s/usr/include' "$SYSROOT" "$HOST" "$SYSROOT"
  printf ' -B%s/usr/lib/%s/ -B%s/lib/%s/ "$@"\n' "$SYSROOT" "$HOST" "$SYSROOT" "$HOST"
} >"$WORK/bin/cc"
chmod +x "$WORK/bin/cc"
TCC=$WORK/bin/cc
TOOLS=(AR="$HOST-ar" RANLIB="$HOST-ranlib" NM="$HOST-nm" LD="$HOST-ld" AS="$HOST-as")

say "gcc/: the headers libgcc compiles against"
# libiberty for the build machine, then gcc/ configured for the target and
# only its generated headers made (-o: never the compiler itself).
mkdir -p "$WORK/build-$BUILD/libiberty" "$WORK/gcc"
(cd "$WORK/build-$BUILD/libiberty" &&
 "$S/libiberty/configure" --build="$BUILD" --host="$BUILD" --target="$HOST" >/dev/null &&
 make -s -j"$JOBS" libiberty.a)
(cd "$WORK/gcc" &&
 env AS_FOR_TARGET="$HOST-as" LD_FOR_TARGET="$HOST-ld" NM_FOR_TARGET="$HOST-nm" \
     OBJDUMP_FOR_TARGET="$HOST-objdump" READELF_FOR_TARGET="$HOST-readelf" \
   "$S/gcc/configure" --build="$BUILD" --host="$BUILD" --target="$HOST" \
     --prefix="$PREFIX" --enable-languages=c --disable-multilib \
     --enable-threads=posix --enable-default-pie --enable-shared \
     --with-sysroot="$SYSROOT" --with-glibc-version="$CEIL" --disable-plugin >/dev/null &&
 make -s -j"$JOBS" -o xgcc -o specs tconfig.h tm.h options.h insn-constants.h \
     insn-modes.h version.h libgcc.mvars)
grep -q '^#define HAVE_LD_EH_FRAME_HDR 1' "$WORK/gcc/auto-host.h" ||
  die "gcc/configure did not find $HOST-ld's --eh-frame-hdr"

say "libgcc.a, libgcc_eh.a"
# --enable-shared keeps the unwinder in libgcc_eh.a (the layout
# -static-libgcc expects); libgcc_s is not made. The compiler's own
# libgcc_eh.a needs _dl_find_object (glibc 2.35): it is rebuilt here.
mkdir -p "$WORK/$HOST/libgcc"
(cd "$WORK/$HOST/libgcc" &&
 "$S/libgcc/configure" --build="$BUILD" --host="$HOST" --target="$HOST" \
   --prefix="$PREFIX" --enable-shared --disable-gcov CC="$TCC" CFLAGS="-g -O2" "${TOOLS[@]}" >/dev/null &&
 make -s -j"$JOBS" libgcc.a libgcc_eh.a gthr-default.h)

say "libstdc++-v3 (static)"
# Standalone, the C++ sources get no -O2 unless CXXFLAGS says so; -fPIC:
# the archives link into shared objects as well as PIE programs.
mkdir -p "$WORK/$HOST/libstdc++-v3"
(cd "$WORK/$HOST/libstdc++-v3" &&
 "$S/libstdc++-v3/configure" --build="$BUILD" --host="$HOST" --target="$HOST" --prefix="$PREFIX" \
   --with-gxx-include-dir="$PREFIX/include/c++/$MAJOR" \
   --disable-multilib --disable-nls --disable-shared --enable-static \
   --disable-libstdcxx-pch --enable-libstdcxx-threads --enable-clocale=gnu \
   --with-default-libstdcxx-abi=new \
   CC="$TCC" CXX="$TCC" CFLAGS="-g -O2 -fPIC" CXXFLAGS="-g -O2 -fPIC" "${TOOLS[@]}" >/dev/null &&
 make -s -j"$JOBS" && make -s install >/dev/null)
install -m 644 "$WORK/$HOST/libgcc/libgcc.a" "$WORK/$HOST/libgcc/libgcc_eh.a" "$PREFIX/lib/"
rm -f "$PREFIX"/lib/*.la
rm -rf "$PREFIX/share/gcc-$GCCVER" "$PREFIX/lib/gcc"
for a in "$PREFIX"/lib/*.a; do "$HOST-strip" --strip-debug "$a"; done

say "check: every member against glibc $CEIL"
# Every member of the archives in one shared object against the sysroot:
# a reference to a symbol the capped glibc lacks fails the link.
"$TCC" -shared -o "$WORK/all-members.so" -Wl,--no-undefined \
  -Wl,--whole-archive "$PREFIX/lib/libstdc++.a" "$PREFIX/lib/libstdc++fs.a" "$PREFIX/lib/libgcc_eh.a" \
  -Wl,--no-whole-archive -L"$PREFIX/lib" -static-libgcc -lm -lpthread -lc
mkdir -p "$PREFIX/share"
"$HOST-readelf" -V "$WORK/all-members.so" | sed -n 's/.*Name: GLIBC_\([0-9][0-9.]*\).*/\1/p' | sort -uV >"$PREFIX/share/glibc.txt"
max=$(tail -1 "$PREFIX/share/glibc.txt")
[ -n "$max" ] || die "the archives need no GLIBC_ version at all: the check linked nothing"
[ "$(printf '%s\n%s\n' "$max" "$CEIL" | sort -V | tail -1)" = "$CEIL" ] ||
  die "the runtime needs GLIBC_$max, newer than the ceiling $CEIL"
echo "GLIBC versions needed: $(tr '\n' ' ' <"$PREFIX/share/glibc.txt")(ceiling $CEIL)"
echo "GCC $GCCVER" >"$PREFIX/share/version.txt"
rm -rf "$WORK"
say "done: $PREFIX"
