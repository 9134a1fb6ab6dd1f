#!/usr/bin/env bash
build_version_prefix="doris"
build_version_major=2
build_version_minor=0
build_version_patch=4
build_version_rc_version="rc06"
