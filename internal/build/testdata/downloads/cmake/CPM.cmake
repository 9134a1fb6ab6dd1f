# Shaped like CPM.cmake's bootstrap: the URL is built from a variable, and
# CMake's error names only this file and line, not the URL.
set(CPM_DOWNLOAD_VERSION 0.38.6)
set(CPM_DOWNLOAD_LOCATION "${CMAKE_BINARY_DIR}/cmake/CPM_${CPM_DOWNLOAD_VERSION}.cmake")
file(DOWNLOAD
     https://example.invalid/dorisarm-test/v${CPM_DOWNLOAD_VERSION}/CPM.cmake
     ${CPM_DOWNLOAD_LOCATION} EXPECTED_HASH SHA256=11c3fa5f1ba14f15d31c2fb63dbc8628ee133d81c8d764caad9a8db9e0bacb07
)
include(${CPM_DOWNLOAD_LOCATION})
