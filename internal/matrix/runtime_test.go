package matrix

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRuntimeChecks breaks the repository matrix's runtimes: and the
// sysroots that carry one, one fact at a time: each is refused, naming
// the line.
func TestRuntimeChecks(t *testing.T) {
	path := filepath.Join("..", "..", "matrix.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	good := string(data)
	if _, err := Parse(path, data); err != nil {
		t.Fatalf("the repository matrix: %v", err)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"unknown runtime", "    runtime: gcc-12\n", "    runtime: gcc-13\n", `runtime "gcc-13" is not in runtimes (one of: gcc-12)`},
		{"no newer than the sysroot's", `    libstdcxx: "12"` + "\n    compiler: gcc", `    libstdcxx: "10"` + "\n    compiler: gcc", "holds GCC 10's C++ library, no newer than the sysroot's own (GCC 10)"},
		{"an OS older than the runtime's glibc", `    glibc: "2.17"` + "\n    source:", `    glibc: "2.26"` + "\n    source:", "os centos-7 (which uses the sysroot) has glibc 2.17"},
		{"a compiler of another dialect", "    compiler: gcc\n    glibc:", "    compiler: clang\n    glibc:", "compiler clang is clang; GCC's C++ runtime is built with GCC"},
		{"an unknown compiler", "    compiler: gcc\n    glibc:", "    compiler: icc\n    glibc:", `compiler "icc" is not in compilers`},
		{"a digest that is not one", "sha256: b8298be16aeeb96a889c6afed0a8e2241b47452e89cc81fe65ea849d5c740fcb", "sha256: b8298be1", "source.sha256 must be the archive's sha256"},
		{"no size", "size: 87090343", "size: 0", "source.size must be the archive's size"},
		{"not a URL", "url: http://deb.debian.org/debian/pool/main/g/gcc-12/gcc-12_12.2.0.orig.tar.gz", "url: ftp://deb.debian.org/gcc.tar.gz", "must be an http or https URL"},
		{"a script outside", "script: runtimes/gcc-cxxrt.sh", "script: ../../etc/x.sh", "must be a path beside matrix.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.old) {
				t.Fatalf("matrix.yaml has no %q", tc.old)
			}
			_, err := Parse(path, []byte(strings.Replace(good, tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
			if !strings.Contains(err.Error(), "matrix.yaml:") {
				t.Errorf("the error names no line: %v", err)
			}
		})
	}
}
