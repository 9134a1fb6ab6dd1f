#!/usr/bin/env bash
# minidoris declares its Doris-style version here, in the same variables and
# the same file as Apache Doris, so tools read both trees the same way.

build_version_prefix="doris"
build_version_major=2
build_version_minor=1
build_version_patch=8
build_version_rc_version=""

build_version="${build_version_prefix}-${build_version_major}.${build_version_minor}.${build_version_patch}"

mkdir -p "${DORIS_HOME:-.}/gensrc/build/gen_cpp"
cat >"${DORIS_HOME:-.}/gensrc/build/gen_cpp/version.h" <<VERSION_EOF
#pragma once
#define DORIS_BUILD_VERSION "${build_version}"
#define DORIS_BUILD_VERSION_MAJOR ${build_version_major}
#define DORIS_BUILD_VERSION_MINOR ${build_version_minor}
#define DORIS_BUILD_VERSION_PATCH ${build_version_patch}
VERSION_EOF
