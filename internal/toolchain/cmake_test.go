package toolchain

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCMakeFindsNothingOnTheHost: through the generated toolchain file a
// package's find_path(zlib.h) and find_library(z) never reach the build
// machine's /usr/include and /usr/lib (they have zlib here): they find the
// cell's installed/ copy, and nothing when installed/ has none. With the
// find root path modes BOTH, protobuf found the host's zlib.h.
func TestCMakeFindsNothingOnTheHost(t *testing.T) {
	needTool(t, "cmake")
	if _, err := os.Stat("/usr/include/zlib.h"); err != nil {
		t.Skip("the build machine has no /usr/include/zlib.h to leak (apt-get install zlib1g-dev)")
	}
	m := repoMatrix(t)
	for _, target := range []string{"kunpeng920", "x86_64"} {
		t.Run(target, func(t *testing.T) {
			cell, _ := m.Cell("2.1", target)
			tc, err := Resolve(m, cell, Options{Compiler: "clang", Getenv: func(string) string { return "" }})
			if err != nil {
				t.Skip(err)
			}
			dir := t.TempDir()
			if !tc.Cross {
				// A target OS sysroot without zlib (a native build with none searches the host, its target).
				tc.Sysroot = &Sysroot{Name: "empty", Path: filepath.Join(dir, "sysroot"), RunPath: "/"}
				os.MkdirAll(filepath.Join(tc.Sysroot.Path, "usr", "include"), 0o755)
			} else if _, err := os.Stat(filepath.Join(tc.Cell.ISA.Sysroot, "include", "zlib.h")); err == nil {
				t.Skipf("%s has zlib.h", tc.Cell.ISA.Sysroot)
			}
			f, _ := tc.Flags(FlagOptions{NoLTO: true})
			w, err := tc.WriteWrappers(filepath.Join(dir, "home"), f, "")
			if err != nil {
				t.Fatal(err)
			}
			src := filepath.Join(dir, "src")
			os.MkdirAll(src, 0o755)
			os.WriteFile(filepath.Join(src, "CMakeLists.txt"), []byte("cmake_minimum_required(VERSION 3.16)\nproject(p NONE)\n"+
				"find_path(ZLIB_INCLUDE_DIR zlib.h)\nfind_library(ZLIB_LIBRARY NAMES z libz.a)\n"+
				"message(STATUS \"zlib.h=${ZLIB_INCLUDE_DIR} libz=${ZLIB_LIBRARY}\")\n"), 0o644)
			configure := func(installed string) string {
				out := configureOutput(t, tc, w, dir, src, installed)
				if strings.Contains(out, "dorisarm:") {
					t.Errorf("a clean configure is warned about:\n%s", out)
				}
				for _, l := range strings.Split(out, "\n") {
					if i := strings.Index(l, "zlib.h="); i >= 0 {
						return l[i:]
					}
				}
				t.Fatalf("no result in:\n%s", out)
				return ""
			}
			empty := filepath.Join(dir, "installed-empty")
			os.MkdirAll(empty, 0o755)
			if got := configure(empty); got != "zlib.h=ZLIB_INCLUDE_DIR-NOTFOUND libz=ZLIB_LIBRARY-NOTFOUND" {
				t.Errorf("with nothing installed CMake found %s: the build machine's zlib leaked", got)
			}
			inst := filepath.Join(dir, "installed")
			os.MkdirAll(filepath.Join(inst, "include"), 0o755)
			os.MkdirAll(filepath.Join(inst, "lib"), 0o755)
			os.WriteFile(filepath.Join(inst, "include", "zlib.h"), nil, 0o644)
			os.WriteFile(filepath.Join(inst, "lib", "libz.a"), nil, 0o644)
			if got, want := configure(inst), "zlib.h="+filepath.Join(inst, "include")+" libz="+filepath.Join(inst, "lib", "libz.a"); got != want {
				t.Errorf("CMake found %s, want installed/'s: %s", got, want)
			}
			// A host path given explicitly (or found past the find roots)
			// is named at the end of the configure.
			out := configureOutput(t, tc, w, dir, src, inst, "-DZLIB_INCLUDE_DIR=/usr/include")
			if !strings.Contains(out, "dorisarm: ZLIB_INCLUDE_DIR=/usr/include is on the build machine") {
				t.Errorf("a host include directory is not named:\n%s", out)
			}
			if strings.Count(out, "is on the build machine") != 1 {
				t.Errorf("more than the one host path named:\n%s", out)
			}
		})
	}
}

func configureOutput(t *testing.T, tc *Toolchain, w *Wrappers, dir, src, installed string, args ...string) string {
	t.Helper()
	tcFile := filepath.Join(dir, "toolchain.cmake")
	os.WriteFile(tcFile, []byte(tc.CMakeToolchainFile(w, nil, installed)), 0o644)
	b := filepath.Join(dir, "b")
	os.RemoveAll(b)
	cmd := exec.Command("cmake", append([]string{"-S", src, "-B", b, "-DCMAKE_TOOLCHAIN_FILE=" + tcFile}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return string(out)
}
