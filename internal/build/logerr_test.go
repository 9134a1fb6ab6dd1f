package build

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

func TestFirstErrors(t *testing.T) {
	log := filepath.Join(t.TempDir(), "step.log")
	lines := []string{
		"-- The C compiler identification is Clang 16.0.6",
		"clang++ -Werror=return-type -Wall -c gzip_stream.cc",            // -Werror is a flag, not an error
		"checking for strerror_r... yes",                                 // not an error
		"/src/gzip_stream.h:50:10: fatal error: 'zlib.h' file not found", // the cause
		"#include <zlib.h>",
		"1 error generated.",
		"make[2]: *** [CMakeFiles/libprotobuf.dir/build.make:76: gzip_stream.cc.o] Error 1", // make giving up
		strings.Repeat("x", 5000) + " error: very long",
	}
	for i := 0; i < 200; i++ {
		lines = append(lines, "noise")
	}
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := firstErrors(log, 5)
	want := []string{
		"line 4: /src/gzip_stream.h:50:10: fatal error: 'zlib.h' file not found",
		"line 7: make[2]: *** [CMakeFiles/libprotobuf.dir/build.make:76: gzip_stream.cc.o] Error 1",
	}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || len(got[2]) > maxLogLine+20 {
		t.Errorf("got %q", got)
	}
	if got := firstErrors(log, 1); len(got) != 1 || got[0] != want[0] {
		t.Errorf("n=1: %q", got)
	}
	// Doris's build_libdivide in a tree without installed/include: cp
	// says why, in words no compiler uses.
	cp := filepath.Join(t.TempDir(), "libdivide.log")
	os.WriteFile(cp, []byte("===== begin build libdivide-5.0\ncp: cannot create regular file '/t/installed/include/': Not a directory\n"), 0o644)
	if got := firstErrors(cp, 5); len(got) != 1 || !strings.Contains(got[0], "line 2: cp: cannot create regular file") {
		t.Errorf("cp's refusal: %q", got)
	}
	if got := firstErrors(filepath.Join(t.TempDir(), "none"), 5); got != nil {
		t.Errorf("no log: %q", got)
	}
	if got := tail(log, 2); got != "noise\nnoise" {
		t.Errorf("tail: %q", got)
	}

	// A --keep-going summary quotes the cause, not make's exit status.
	pe := &PackagesError{Target: "kunpeng920", Failed: []PackageFailure{{Package: "PROTOBUF", Step: "thirdparty:PROTOBUF",
		Err: &StepError{Target: "kunpeng920", Step: "thirdparty:PROTOBUF", Log: log, First: firstErrors(log, 5), Err: errors.New("exit status 2")}}}}
	if msg := pe.Error(); !strings.Contains(msg, "fatal error: 'zlib.h' file not found") {
		t.Errorf("summary: %s", msg)
	}
}

// A package whose CMake configure takes a header from the build machine
// fails, naming the package and the path: the generated toolchain file
// (real CMake, real wrappers) says so at the end of the configure and the
// step reads it from its log.
func TestHostHeaderFailsPackage(t *testing.T) {
	if _, err := exec.LookPath("cmake"); err != nil {
		t.Skip("cmake not installed")
	}
	if _, err := os.Stat("/usr/include/zlib.h"); err != nil {
		t.Skip("the build machine has no /usr/include/zlib.h to leak (apt-get install zlib1g-dev)")
	}
	m, err := matrix.Load(filepath.Join(repo, "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cell, _ := m.Cell("2.1", "kunpeng920")
	tc, err := toolchain.Resolve(m, cell, toolchain.Options{Compiler: "clang", Getenv: func(string) string { return "" }})
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	f, _ := tc.Flags(toolchain.FlagOptions{NoLTO: true})
	w, err := tc.WriteWrappers(filepath.Join(dir, "home"), f, "")
	if err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(dir, "installed")
	os.MkdirAll(installed, 0o755)
	tcFile := filepath.Join(dir, "toolchain.cmake")
	os.WriteFile(tcFile, []byte(tc.CMakeToolchainFile(w, nil, installed)), 0o644)
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	// What protobuf's FindZLIB did: a host include directory, here found past the find roots.
	os.WriteFile(filepath.Join(src, "CMakeLists.txt"), []byte("cmake_minimum_required(VERSION 3.16)\nproject(p NONE)\n"+
		"find_path(ZLIB_INCLUDE_DIR zlib.h PATHS /usr/include NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)\n"), 0o644)
	logPath := filepath.Join(dir, "thirdparty_LEAKY.log")
	lf, _ := os.Create(logPath)
	err = RunProcess(context.Background(), Command{Step: "thirdparty:LEAKY", Path: "cmake", Args: []string{"-S", src, "-B", filepath.Join(dir, "b"), "-DCMAKE_TOOLCHAIN_FILE=" + tcFile}, Dir: dir, Stdout: lf, Stderr: lf})
	lf.Close()
	if err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("configure: %v\n%s", err, b)
	}
	err = leakError(plan.Step{ID: "thirdparty:LEAKY"}, logPath)
	if err == nil || !strings.Contains(err.Error(), "package LEAKY found headers or libraries outside the sysroot and installed/") ||
		!strings.Contains(err.Error(), "ZLIB_INCLUDE_DIR=/usr/include is on the build machine") {
		b, _ := os.ReadFile(logPath)
		t.Errorf("got %v\nlog:\n%s", err, b)
	}
	// A clean log says nothing.
	clean := filepath.Join(dir, "clean.log")
	os.WriteFile(clean, []byte("-- Configuring done\n"), 0o644)
	if err := leakError(plan.Step{ID: "build:be"}, clean); err != nil {
		t.Errorf("clean log: %v", err)
	}
}
