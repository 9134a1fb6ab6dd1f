#!/usr/bin/env bash
# The probe tree declares a Doris-style version, so a build of it is a 2.1 cell.
build_version_prefix="doris"
build_version_major=2
build_version_minor=1
build_version_patch=7
build_version_rc_version=""
