package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cmakeBlock returns the lines of Doris's real be/CMakeLists.txt from the
// line starting with from up to the first line after it that is exactly
// "endif()" followed by a line exactly "#" (the end of its SIMD section).
func cmakeBlock(t *testing.T, file, from string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, from) {
			continue
		}
		for j := i + 1; j+1 < len(lines); j++ {
			if lines[j] == "endif()" && lines[j+1] == "#" {
				return strings.Join(lines[i:j+1], "\n") + "\n"
			}
		}
	}
	t.Fatalf("%s: no block from %q", file, from)
	return ""
}

// patchedCorpus copies the files of the corpus's Doris 2.1.7 tree that
// kunpeng920's Doris patch series touches and applies the series to them
// with dorisarm patch apply; it returns the corpus tree and the copy.
func patchedCorpus(t *testing.T) (tree, patched string) {
	t.Helper()
	tree, _ = corpusTree(t)
	patched = filepath.Join(t.TempDir(), "doris")
	for _, f := range []string{"build.sh", "be/CMakeLists.txt", "be/cmake/thirdparty.cmake", "thirdparty/build-thirdparty.sh"} {
		b, err := os.ReadFile(filepath.Join(tree, f))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(patched, f)), 0o755)
		os.WriteFile(filepath.Join(patched, f), b, 0o644)
	}
	if out, errOut, code := run(t, "patch", "apply", "--source", patched, "--component", "doris", "--version", "2.1.7", "--target", "kunpeng920"); code != 0 {
		t.Fatalf("patch apply: exit %d\n%s%s", code, out, errOut)
	}
	return tree, patched
}

// TestBEMarchFromBuild compiles a C++ file under Doris 2.1.7's own SIMD
// section of be/CMakeLists.txt, as the BE build would: the wrapper's target
// flags first (CMAKE_CXX_FLAGS stands in for them: CMake puts them before
// add_compile_options), the recipe's ARM_MARCH pin on the cache. Unpatched,
// Doris's -march=armv8-a+crc comes last and the flag read-back calls the
// object lost tuning; with patches/doris/0002-be-march-from-build.patch
// applied by dorisarm patch apply, the object is at kunpeng920's flags,
// and readelf shows the target's -march last.
func TestBEMarchFromBuild(t *testing.T) {
	for _, tool := range []string{"cmake", "clang++-16", "readelf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-deps.sh)", tool)
		}
	}
	tree, patched := patchedCorpus(t)
	march := "armv8.2-a+crypto+fp16+dotprod+fp16fml"
	verdict := func(name, cmakeLists string) (string, string) {
		dir := filepath.Join(t.TempDir(), name)
		os.MkdirAll(dir, 0o755)
		simd := cmakeBlock(t, cmakeLists, "# simd for architectures")
		proj := "cmake_minimum_required(VERSION 3.19)\nproject(bemarch CXX)\n" +
			"set(CMAKE_BUILD_TARGET_ARCH aarch64)\nset(ARCH_ARM 1)\n" + simd +
			"add_library(unit OBJECT unit.cc)\n"
		os.WriteFile(filepath.Join(dir, "CMakeLists.txt"), []byte(proj), 0o644)
		os.WriteFile(filepath.Join(dir, "unit.cc"), []byte("#include <atomic>\nstd::atomic<long> n;\nlong bump() { return n.fetch_add(1); }\n"), 0o644)
		cfg := exec.Command("cmake", "-S", dir, "-B", filepath.Join(dir, "build"),
			"-DCMAKE_CXX_COMPILER=clang++-16", "-DCMAKE_CXX_COMPILER_TARGET=aarch64-linux-gnu",
			"-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64", "-DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY",
			"-DCMAKE_CXX_FLAGS=-march="+march+" -mtune=tsv110 -frecord-command-line",
			"-DARM_MARCH="+march)
		if out, err := cfg.CombinedOutput(); err != nil {
			t.Fatalf("%s: cmake: %v\n%s", name, err, out)
		}
		if out, err := exec.Command("cmake", "--build", filepath.Join(dir, "build")).CombinedOutput(); err != nil {
			t.Fatalf("%s: build: %v\n%s", name, err, out)
		}
		objs, _ := filepath.Glob(filepath.Join(dir, "build", "CMakeFiles", "unit.dir", "unit.cc.o"))
		if len(objs) != 1 {
			t.Fatalf("%s: no object", name)
		}
		rec, _ := exec.Command("readelf", "-p", ".GCC.command.line", objs[0]).CombinedOutput()
		stdout, errOut, code := run(t, "scan", "--target", "kunpeng920", "-o", "json", objs[0])
		if code != 0 {
			t.Fatalf("%s: scan exit %d\n%s", name, code, errOut)
		}
		var rep struct {
			Files []struct {
				Flags struct{ Verdict, Flags string }
			}
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Files) != 1 {
			t.Fatalf("%s: %v\n%s", name, err, stdout)
		}
		return rep.Files[0].Flags.Verdict, string(rec)
	}
	if v, rec := verdict("unpatched", filepath.Join(tree, "be", "CMakeLists.txt")); v != "lost" || !strings.Contains(rec, "-march=armv8-a+crc") {
		t.Errorf("Doris 2.1.7 as it is: verdict %q, want lost; record:\n%s", v, rec)
	}
	v, rec := verdict("patched", filepath.Join(patched, "be", "CMakeLists.txt"))
	if v != "target" || strings.Contains(rec, "armv8-a+crc") {
		t.Errorf("patched: verdict %q, want target; record:\n%s", v, rec)
	}
	// The last -march readelf shows is the target's.
	if i := strings.LastIndex(rec, "-march="); i < 0 || !strings.HasPrefix(rec[i:], "-march="+march) {
		t.Errorf("patched: the last -march is not the target's:\n%s", rec)
	}
}

// TestBESubmodulesOffline runs Doris 2.1.7's own update_submodule (read
// from the corpus build.sh, as is and with
// patches/doris/0003-be-submodules-offline.patch applied by dorisarm patch
// apply) in a tree without .git whose clucene submodule is in place, with
// a curl that records being called and fails: as it is, the function
// downloads and the build stops; patched, it uses the submodule.
func TestBESubmodulesOffline(t *testing.T) {
	for _, tool := range []string{"bash", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	tree, patched := patchedCorpus(t)
	fakebin := t.TempDir()
	called := filepath.Join(fakebin, "curl-called")
	os.WriteFile(filepath.Join(fakebin, "curl"), []byte("#!/bin/sh\necho \"$@\" >> "+called+"\nexit 6\n"), 0o755)
	try := func(buildSh string) (curl bool, err error) {
		home := t.TempDir()
		os.MkdirAll(filepath.Join(home, "be", "src", "clucene"), 0o755)
		os.WriteFile(filepath.Join(home, "be", "src", "clucene", "CMakeLists.txt"), []byte("# in place\n"), 0o644)
		os.Remove(called)
		script := "set -eo pipefail\nDORIS_HOME=" + home + "\n" +
			"source <(sed -n '/^update_submodule() {/,/^}/p' " + buildSh + ")\n" +
			"update_submodule be/src/clucene clucene https://github.com/apache/doris-thirdparty/archive/refs/heads/clucene.tar.gz\n"
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+fakebin+":"+os.Getenv("PATH"), "GIT_CEILING_DIRECTORIES="+filepath.Dir(home))
		cmd.Dir = home
		out, err := cmd.CombinedOutput()
		_, statErr := os.Stat(called)
		t.Logf("%s:\n%s", buildSh, out)
		return statErr == nil, err
	}
	if curl, err := try(filepath.Join(tree, "build.sh")); err == nil || !curl {
		t.Errorf("Doris 2.1.7 as it is: err %v, curl called %v; want a failed download", err, curl)
	}
	if curl, err := try(filepath.Join(patched, "build.sh")); err != nil || curl {
		t.Errorf("patched: err %v, curl called %v; want the submodule used offline", err, curl)
	}
}
