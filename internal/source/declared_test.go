package source

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDeclaredVersion(t *testing.T) {
	for _, c := range []struct {
		name, file, body string
		extra            *VersionFrom
		want             string
	}{
		{"cmake", "CMakeLists.txt", "cmake_minimum_required(VERSION 3.9)\nproject(leveldb VERSION 1.23.0 LANGUAGES C CXX)\n", nil, "1.23.0"},
		{"cmake multi-line", "CMakeLists.txt", "project(\n  glog\n  VERSION 0.6.0\n  LANGUAGES CXX)\n", nil, "0.6.0"},
		{"cmake variable", "CMakeLists.txt", "project(gflags VERSION ${PACKAGE_VERSION} LANGUAGES CXX)\n", nil, ""},
		{"cmake minimum only", "CMakeLists.txt", "cmake_minimum_required(VERSION 3.5)\nproject(zlib C)\n", nil, ""},
		{"autoconf", "configure.ac", "AC_INIT([Protocol Buffers],[3.21.11],[protobuf@googlegroups.com],[protobuf])\n", nil, "3.21.11"},
		{"autoconf without version", "configure.ac", "AC_INIT([Makefile.in])\n", nil, ""},
		{"configure", "configure", "#! /bin/sh\nPACKAGE_NAME='libevent'\nPACKAGE_VERSION='2.1.12-stable'\n", nil, "2.1.12-stable"},
		{"extra file", "include/openssl/opensslv.h", "# define OPENSSL_VERSION_TEXT    \"OpenSSL 1.1.1w  11 Sep 2023\"\n",
			&VersionFrom{File: "include/openssl/opensslv.h", Match: `OPENSSL_VERSION_TEXT\s+"OpenSSL ([0-9][0-9a-z.]*)`}, "1.1.1w"},
		{"extra file outside", "x", "", &VersionFrom{File: "../../etc/passwd", Match: `(root)`}, ""},
		{"groups joined", "absl/base/config.h", "#define ABSL_LTS_RELEASE_VERSION 20230125\n#define ABSL_LTS_RELEASE_PATCH_LEVEL 3\n",
			&VersionFrom{File: "absl/base/config.h", Match: `(?s)#define ABSL_LTS_RELEASE_VERSION (\d+).*?#define ABSL_LTS_RELEASE_PATCH_LEVEL (\d+)`}, "20230125.3"},
		{"placeholder", "configure.ac", "AC_INIT([brotli], [0.0.0], [https://groups.google.com/forum/#!forum/brotli])\n", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, filepath.FromSlash(c.file))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			if got, _ := DeclaredVersion(dir, c.extra); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestSameVersion(t *testing.T) {
	for _, c := range []struct {
		declared, named string
		same            bool
	}{
		{"1.23.0", "1.23", true},          // leveldb
		{"3.21.11", "21.11", true},        // protobuf's two schemes
		{"v0.6.0", "0.6.0", true},         //
		{"1.1.1w", "1.1.1s", false},       // the substituted OpenSSL
		{"5.3.0", "5.2.1", false},         //
		{"2.1.12-stable", "2.1.12", true}, // libevent's label
		{"1.0.0-rc1", "1.0.0", false},     // a release candidate is another release
		{"1.2.13", "1.2.11", false},       // zlib
	} {
		if got := SameVersion(c.declared, c.named); got != c.same {
			t.Errorf("SameVersion(%q, %q) = %v", c.declared, c.named, got)
		}
	}
}
