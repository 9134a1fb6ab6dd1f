#!/usr/bin/env bash
# Builds the C++20 runtime probe with the cell's compiler wrappers ($CXX):
# libprobe.so carries its own copy of the C++ runtime and throws; the
# program catches what it throws. Both link the runtime statically, as
# Doris's be/CMakeLists.txt links doris_be. The program also links the
# third-party package probefmt (thirdparty/installed).
set -euo pipefail
out=output/be/lib
mkdir -p "$out" build
flags=(-std=c++20 -O2 -g -fPIC -Wall -Werror)
"$CXX" "${flags[@]}" -shared -o "$out/libprobe.so" be/src/probe_lib.cc -static-libstdc++ -static-libgcc -Wl,--no-undefined
tp=thirdparty/installed
"$CXX" "${flags[@]}" -I"$tp/include" -o "$out/cxx20-probe" be/src/probe_main.cc -L"$out" -lprobe -L"$tp/lib" -lprobefmt \
  -Wl,-rpath,'$ORIGIN' -static-libstdc++ -static-libgcc -pthread
echo "built $(ls "$out")"
