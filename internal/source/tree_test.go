package source

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/testproc"
)

func dorisRecipe(t *testing.T) *recipe.Recipe {
	t.Helper()
	r, err := recipe.Load(filepath.Join(testproc.RepoRoot(t), "recipes", "doris.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func byEntry(pkgs []Package) map[string]Package {
	m := map[string]Package{}
	for _, p := range pkgs {
		m[p.Entry] = p
	}
	return m
}

// The build function of each 2.1.7 entry comes from build-thirdparty.sh:
// entries it has no function for are reported, not run into exit 127.
func TestBuildFunctionsFromRealTree(t *testing.T) {
	tree := filepath.Join(testproc.Corpus(t), "doris-2.1.7")
	r := dorisRecipe(t)
	pkgs, err := ReadPackages(tree, r, "aarch64")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(tree, "thirdparty", "build-thirdparty.sh")
	funcs, err := BuildFunctions(script)
	if err != nil {
		t.Fatal(err)
	}
	ResolveBuilds(pkgs, funcs, r, "thirdparty/build-thirdparty.sh")
	m := byEntry(pkgs)
	for entry, want := range map[string]string{"ODBC": "libunixodbc", "JEMALLOC_DORIS": "jemalloc", "SNAPPY": "snappy", "BZIP": "bzip",
		"BITSHUFFLE": "bitshuffle", "TSAN_HEADER": "tsan_header", "DATATABLES": "js_and_css", "RAGEL": "", "XSIMD": "", "BROTLI": "", "JEMALLOC_ARROW": ""} {
		if got := m[entry].Build; got != want {
			t.Errorf("%s: build function %q, want %q (%s)", entry, got, want, m[entry].NoBuild)
		}
	}
	if !strings.Contains(m["XSIMD"].NoBuild, "build_xsimd") {
		t.Errorf("XSIMD's reason does not name the missing function: %q", m["XSIMD"].NoBuild)
	}
	if !strings.Contains(m["RAGEL"].NoBuild, "no build of its own") {
		t.Errorf("RAGEL is marked by the recipe, reason %q", m["RAGEL"].NoBuild)
	}
	// Every package that got a function really has it in the script.
	for _, p := range pkgs {
		if p.Build != "" && !funcs[p.Build] {
			t.Errorf("%s: build_%s is not defined", p.Entry, p.Build)
		}
	}
	if _, err := BuildFunctions(filepath.Join(tree, "thirdparty", "vars.sh")); err == nil {
		t.Error("vars.sh was taken for a build script")
	}
}

// The patch section of 2.1.7's download script, read without running it:
// each package's own patches in the order the script applies them.
func TestTreePatchesFromRealTree(t *testing.T) {
	tree := filepath.Join(testproc.Corpus(t), "doris-2.1.7")
	r := dorisRecipe(t)
	tp, err := ReadTreePatches(tree, r, "thirdparty/download-thirdparty.sh", "aarch64")
	if err != nil {
		t.Fatal(err)
	}
	files := func(src string) []string {
		var out []string
		for _, p := range tp.BySource[src] {
			if !strings.HasPrefix(p.SHA256, "sha256:") {
				t.Errorf("%s: %s has no digest", src, p.File)
			}
			out = append(out, p.Args+" "+p.File)
		}
		return out
	}
	want := map[string][]string{
		"glog-0.6.0":                     {"-p1 thirdparty/patches/glog-0.6.0.patch"},
		"libevent-release-2.1.12-stable": {"-p1 thirdparty/patches/libevent.patch", "-p1 thirdparty/patches/libevent-1532.patch", "-p1 thirdparty/patches/libevent-keepalive-accepted-socket.patch"},
		"librdkafka-1.9.2":               {"-p0 thirdparty/patches/librdkafka-1.9.2.patch"},
		// vectorscan only when vars.sh was read for aarch64.
		"vectorscan-vectorscan-5.4.11": {"-p1 thirdparty/patches/vectorscan-5.4.11.patch"},
	}
	for src, w := range want {
		if got := files(src); strings.Join(got, "|") != strings.Join(w, "|") {
			t.Errorf("%s: patches %q, want %q", src, got, w)
		}
	}
	if n := len(tp.BySource["brpc-1.4.0"]); n < 4 {
		t.Errorf("brpc-1.4.0: %d patches from the brpc-* glob, want every brpc-* file", n)
	}
	for _, src := range []string{"snappy-1.1.8", "lz4-1.9.4", "bzip2-1.0.8", "bitshuffle-0.5.1"} {
		if got := files(src); len(got) != 0 {
			t.Errorf("%s: unexpected patches %q", src, got)
		}
	}
	// aws-sdk's block downloads and runs a helper script: reported, never run.
	other := strings.Join(tp.Other["aws-sdk-cpp-1.11.119"], "\n")
	if !strings.Contains(other, "wget") {
		t.Errorf("aws-sdk's download is not reported: %q", other)
	}
	// x86-64 reads vars.sh as x86: hyperscan, no vectorscan patch.
	tpx, err := ReadTreePatches(tree, r, "thirdparty/download-thirdparty.sh", "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if len(tpx.BySource["vectorscan-vectorscan-5.4.11"]) != 0 {
		t.Error("the vectorscan patch was selected for x86_64")
	}
}

// A Doris 3.0-style script guards each block by the package list and may do
// anything else a shell can; the recorder runs none of it.
func TestTreePatchesGuardedAndHarmless(t *testing.T) {
	tree := t.TempDir()
	tp := filepath.Join(tree, "thirdparty")
	os.MkdirAll(filepath.Join(tp, "patches"), 0o755)
	os.WriteFile(filepath.Join(tp, "patches", "zstd.patch"), []byte("x\n"), 0o644)
	os.WriteFile(filepath.Join(tp, "vars.sh"), []byte(`TP_SOURCE_DIR="${TP_DIR}/src"
TP_PATCH_DIR="${TP_DIR}/patches"
ZSTD_SOURCE=zstd-1.5.5
LZ4_SOURCE=lz4-1.9.4
TP_ARCHIVES=(ZSTD LZ4)
`), 0o644)
	canary := filepath.Join(tree, "canary")
	os.WriteFile(canary, []byte("keep"), 0o644)
	os.WriteFile(filepath.Join(tp, "download-thirdparty.sh"), []byte(`#!/bin/bash
echo "download everything first"
wget -q https://example.invalid/all.tar.gz
PATCHED_MARK="patched_mark"
if [[ " ${TP_ARCHIVES[*]} " =~ " ZSTD " ]]; then
    cd "${TP_SOURCE_DIR}/${ZSTD_SOURCE}"
    if [[ ! -f "${PATCHED_MARK}" ]]; then
        patch -p1 <"${TP_PATCH_DIR}/zstd.patch"
        rm -f `+canary+`
        touch "${PATCHED_MARK}"
    fi
    cd -
fi
if [[ " ${TP_ARCHIVES[*]} " =~ " NOPE " ]]; then
    cd "${TP_SOURCE_DIR}/${LZ4_SOURCE}"
    patch -p1 <"${TP_PATCH_DIR}/zstd.patch"
fi
`), 0o755)
	r := &recipe.Recipe{Thirdparty: recipe.Thirdparty{Vars: "thirdparty/vars.sh"}}
	got, err := ReadTreePatches(tree, r, "thirdparty/download-thirdparty.sh", "aarch64")
	if err != nil {
		t.Fatal(err)
	}
	if z := got.BySource["zstd-1.5.5"]; len(z) != 1 || z[0].File != "thirdparty/patches/zstd.patch" || z[0].Args != "-p1" {
		t.Errorf("zstd patches %+v", z)
	}
	if len(got.BySource["lz4-1.9.4"]) != 0 {
		t.Errorf("an unguarded block was recorded: %+v", got.BySource["lz4-1.9.4"])
	}
	if o := got.Other["zstd-1.5.5"]; len(o) != 1 || !strings.HasPrefix(o[0], "rm -f") {
		t.Errorf("other commands %q", o)
	}
	if _, err := os.Stat(canary); err != nil {
		t.Fatal("the recorder ran rm:", err)
	}
	// No patch section at all.
	os.WriteFile(filepath.Join(tp, "download-thirdparty.sh"), []byte("echo hi\n"), 0o755)
	if _, err := ReadTreePatches(tree, r, "thirdparty/download-thirdparty.sh", "aarch64"); err == nil || !strings.Contains(err.Error(), "PATCHED_MARK") {
		t.Errorf("no patch section: %v", err)
	}
	// A named pipe for the script is refused at once, by name.
	os.Remove(filepath.Join(tp, "download-thirdparty.sh"))
	if err := syscall.Mkfifo(filepath.Join(tp, "download-thirdparty.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ReadTreePatches(tree, r, "thirdparty/download-thirdparty.sh", "aarch64")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "download-thirdparty.sh: not a regular file (a named pipe)") {
			t.Errorf("a pipe for the script: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a named pipe for the script still blocked after 10 s")
	}
}
