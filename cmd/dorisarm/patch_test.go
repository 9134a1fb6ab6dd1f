package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unpackSample extracts one of the sample's release archives into dir/src and
// copies the archive beside it, as Doris's thirdparty/src holds both.
func unpackSample(t *testing.T, dir, name string) string {
	t.Helper()
	archive, _ := filepath.Abs(filepath.Join(repo, "examples/minidoris/thirdparty/mirror", name+".tar.gz"))
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	if out, err := exec.Command("tar", "xzf", archive, "-C", src).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	data, _ := os.ReadFile(archive)
	os.WriteFile(filepath.Join(src, name+".tar.gz"), data, 0o644)
	return filepath.Join(src, name)
}

const samplePatches = "examples/minidoris/patches"

func TestPatchListCommand(t *testing.T) {
	out, _, code := run(t, "patch", "list")
	if code != 0 || !strings.Contains(out, "bitshuffle/0001-scalar-bitshuffle") || !strings.Contains(out, "doris/0001-dynamic-openssl") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	out, _, _ = run(t, "patch", "list", "--patches", samplePatches, "--target", "generic-armv8")
	if !strings.Contains(out, "simdprobe/0001-sve-off") || strings.Contains(out, "scalar-bitshuffle") {
		t.Errorf("generic-armv8 selection:\n%s", out)
	}
	out, _, _ = run(t, "patch", "list", "--patches", samplePatches, "--doris", "4.1.0")
	if strings.Contains(out, "dynamic-openssl") {
		t.Errorf("doris 4.1.0 should not list dynamic-openssl:\n%s", out)
	}
}

func TestPatchCheckAndApplyCommands(t *testing.T) {
	dir := t.TempDir()
	src := unpackSample(t, dir, "bitshuffle-0.5.1")
	args := []string{"--patches", samplePatches, "--source", src, "--component", "bitshuffle", "--version", "0.5.1", "--target", "kunpeng920"}
	out, _, code := run(t, append([]string{"patch", "check"}, args...)...)
	if code != 0 || !strings.Contains(out, "src/bitshuffle_core.c hunk #1: clean") {
		t.Fatalf("check: %d\n%s", code, out)
	}
	// Upstream grew three lines at the top: the hunk applies with an offset.
	core := filepath.Join(src, "src/bitshuffle_core.c")
	orig, _ := os.ReadFile(core)
	os.WriteFile(core, append([]byte("/* a */\n/* b */\n/* c */\n"), orig...), 0o644)
	out, _, code = run(t, append([]string{"patch", "check"}, args...)...)
	if code != 0 || !strings.Contains(out, "offset +3") {
		t.Fatalf("offset check: %d\n%s", code, out)
	}
	// refresh re-anchors a copy of the patch, keeping its header.
	pdir := filepath.Join(dir, "patches")
	os.MkdirAll(filepath.Join(pdir, "bitshuffle"), 0o755)
	pdata, _ := os.ReadFile(filepath.Join(repo, samplePatches, "bitshuffle/0001-scalar-bitshuffle.patch"))
	pfile := filepath.Join(pdir, "bitshuffle/0001-scalar-bitshuffle.patch")
	os.WriteFile(pfile, pdata, 0o644)
	out, _, code = run(t, "patch", "refresh", "scalar-bitshuffle", "--patches", pdir, "--source", src)
	if code != 0 || !strings.Contains(out, "refreshed") {
		t.Fatalf("refresh: %d\n%s", code, out)
	}
	refreshed, _ := os.ReadFile(pfile)
	if !strings.Contains(string(refreshed), "@@ -14,7 +14,7 @@") || !strings.HasPrefix(string(refreshed), "Description: Build bitshuffle's scalar") {
		t.Errorf("refreshed patch:\n%s", refreshed)
	}
	out, _, _ = run(t, "patch", "check", "--patches", pdir, "--source", src, "--component", "bitshuffle", "--version", "0.5.1")
	if !strings.Contains(out, "hunk #1: clean") {
		t.Errorf("refreshed patch is not clean:\n%s", out)
	}
	if _, errOut, code := run(t, "patch", "check", "--patches", pdir, "--source", src, "--component", "bitshuffle", "--version", "0.5.1", "-o", "json"); code != 0 {
		t.Errorf("check -o json: %d %s", code, errOut)
	}
	// apply writes; applying again fails and changes nothing.
	out, _, code = run(t, append([]string{"patch", "apply"}, args...)...)
	if code != 0 {
		t.Fatalf("apply: %d\n%s", code, out)
	}
	applied, _ := os.ReadFile(core)
	if strings.Contains(string(applied), "#define USEARMNEON") {
		t.Fatal("apply did not change the file")
	}
	out, errOut, code := run(t, append([]string{"patch", "apply"}, args...)...)
	if code != 1 || !strings.Contains(out, "FAILED") || !strings.Contains(out, "closest candidate") || !strings.Contains(errOut, "left untouched") {
		t.Errorf("second apply: %d\n%s\n%s", code, out, errOut)
	}
	if again, _ := os.ReadFile(core); string(again) != string(applied) {
		t.Error("a failed apply changed the file")
	}
	if _, _, code := run(t, append([]string{"patch", "apply", "-o", "json"}, args...)...); code != 1 {
		t.Errorf("failing apply -o json: exit %d", code)
	}
	// refresh of a patch that no longer applies writes nothing.
	before, _ := os.ReadFile(pfile)
	if _, _, code := run(t, "patch", "refresh", "scalar-bitshuffle", "--patches", pdir, "--source", src, "-o", "json"); code != 1 {
		t.Errorf("refresh of a failing patch: exit %d", code)
	}
	if after, _ := os.ReadFile(pfile); string(after) != string(before) {
		t.Error("refresh rewrote a failing patch")
	}
}

func TestPatchNewFromArchive(t *testing.T) {
	dir := t.TempDir()
	src := unpackSample(t, dir, "minilz-1.2.0")
	mf := filepath.Join(src, "minilz.c")
	data, _ := os.ReadFile(mf)
	os.WriteFile(mf, []byte(strings.Replace(string(data), "#define MIN_MATCH 4", "#define MIN_MATCH 5", 1)), 0o644)
	os.WriteFile(filepath.Join(src, "NOTES"), []byte("new file\n"), 0o644)
	os.WriteFile(filepath.Join(src, "minilz.o"), []byte("\x7fELF build product"), 0o644) // ignored
	pdir := filepath.Join(dir, "patches")
	out, errOut, code := run(t, "patch", "new", "longer-matches", "--patches", pdir, "--component", "minilz", "--version", "1.2.0",
		"--source", src, "--description", "Require 5-byte matches.", "--evidence", "ratio test", "--targets", "kunpeng920")
	if code != 0 {
		t.Fatalf("new: %d %s %s", code, out, errOut)
	}
	pf := filepath.Join(pdir, "minilz", "0001-longer-matches.patch")
	text, err := os.ReadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Applies-To: minilz = 1.2.0", "Targets: kunpeng920", "-#define MIN_MATCH 4", "+#define MIN_MATCH 5", "+++ b/NOTES"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("patch lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(string(text), "minilz.o") {
		t.Error("a build product got into the patch")
	}
	// GNU patch, the oracle, applies it to a pristine copy.
	clean := unpackSample(t, t.TempDir(), "minilz-1.2.0")
	cmd := exec.Command("patch", "-p1", "--dry-run")
	cmd.Dir = clean
	cmd.Stdin = strings.NewReader(string(text))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("GNU patch rejects the new patch: %v\n%s", err, out)
	}
	// Numbers continue; no edits means no patch.
	_, errOut, code = run(t, "patch", "new", "nothing", "--patches", pdir, "--component", "minilz", "--source", clean)
	if code != 1 || !strings.Contains(errOut, "no changes") {
		t.Errorf("no edits: %d %s", code, errOut)
	}
}

func TestPatchNewFromGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	src := unpackSample(t, dir, "simdprobe-1.0.2")
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@x", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "import")
	os.WriteFile(filepath.Join(src, "README"), []byte("changed\n"), 0o644)
	os.Remove(filepath.Join(src, "simdprobe.h"))
	os.WriteFile(filepath.Join(src, "extra.c"), []byte("int x;\n"), 0o644)
	pdir := filepath.Join(dir, "patches")
	if out, errOut, code := run(t, "patch", "new", "git-edit", "--patches", pdir, "--component", "simdprobe", "--source", src, "-o", "json"); code != 0 {
		t.Fatalf("%d %s %s", code, out, errOut)
	}
	text, _ := os.ReadFile(filepath.Join(pdir, "simdprobe", "0001-git-edit.patch"))
	for _, want := range []string{"--- a/README", "+changed", "+++ /dev/null", "--- /dev/null\n+++ b/extra.c"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("git patch lacks %q:\n%s", want, text)
		}
	}
}

func TestBadPatchDirExitsTwo(t *testing.T) {
	pdir := t.TempDir()
	os.MkdirAll(filepath.Join(pdir, "zstd"), 0o755)
	os.WriteFile(filepath.Join(pdir, "zstd", "0001-x.patch"), []byte("Description: d\nAuthor: a\nApplies-To: zstd\nEvidence: e\n\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n"), 0o644)
	_, errOut, code := run(t, "patch", "list", "--patches", pdir)
	if code != 2 || !strings.Contains(errOut, "0001-x.patch:8:1") {
		t.Errorf("%d %s", code, errOut)
	}
}

// corpusDir returns the real inputs at ../shared/corpus beside the
// repository root (the directory with go.mod), or skips the test.
func corpusDir(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatal("no go.mod above the test's directory")
		}
		root = parent
	}
	corpus := filepath.Join(filepath.Dir(root), "shared", "corpus")
	if st, err := os.Stat(filepath.Join(corpus, "mirror")); err != nil || !st.IsDir() {
		t.Skipf("the corpus of real Doris inputs is not at %s (../shared/corpus beside the repository); skipped", corpus)
	}
	return corpus
}

// untarCorpus unpacks a corpus archive into dir with the system tar and
// returns the tree.
func untarCorpus(t *testing.T, archive, dir, name string) string {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	if out, err := exec.Command("tar", "-xzf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xzf %s: %v %s", archive, err, out)
	}
	return filepath.Join(dir, name)
}

// editFile replaces the first from with to in a file, which must hold it.
func editFile(t *testing.T, path, from, to string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), from) {
		t.Fatalf("%s lacks %q", path, from)
	}
	os.Chmod(path, 0o755)
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), from, to, 1)), 0o755); err != nil {
		t.Fatal(err)
	}
}

func gnuPatchDryRun(t *testing.T, dir, patchFile string) {
	t.Helper()
	if _, err := exec.LookPath("patch"); err != nil {
		return
	}
	cmd := exec.Command("patch", "-p1", "--dry-run", "-i", patchFile)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("GNU patch rejects %s: %v\n%s", patchFile, err, out)
	}
}

// TestPatchWorkflowOnCorpusLZ4: new, check and refresh on the real lz4 tag
// archive, which starts with git's pax_global_header.
func TestPatchWorkflowOnCorpusLZ4(t *testing.T) {
	corpus := corpusDir(t)
	archive := filepath.Join(corpus, "mirror", "lz4-1.9.4.tar.gz")
	dir := t.TempDir()
	src := untarCorpus(t, archive, filepath.Join(dir, "src"), "lz4-1.9.4")
	editFile(t, filepath.Join(src, "lib/lz4.h"), "#define LZ4_MEMORY_USAGE_DEFAULT 14", "#define LZ4_MEMORY_USAGE_DEFAULT 16")
	pdir := filepath.Join(dir, "patches")
	out, errOut, code := run(t, "patch", "new", "bigger-hash-table", "--patches", pdir, "--component", "lz4", "--version", "1.9.4",
		"--source", src, "--pristine", archive, "--targets", "kunpeng920", "--author", "A Maintainer <m@example.org>",
		"--description", "Use a 64 KiB hash table.", "--evidence", "compression ratio on the ClickBench hits column")
	if code != 0 || !strings.Contains(out, "(1 files changed)") {
		t.Fatalf("new: %d\n%s\n%s", code, out, errOut)
	}
	pf := filepath.Join(pdir, "lz4", "0001-bigger-hash-table.patch")
	text, err := os.ReadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Description: Use a 64 KiB hash table.\n", "Applies-To: lz4 = 1.9.4\n", "Targets: kunpeng920\n",
		"--- a/lib/lz4.h\n+++ b/lib/lz4.h\n", "-#define LZ4_MEMORY_USAGE_DEFAULT 14\n", "+#define LZ4_MEMORY_USAGE_DEFAULT 16\n"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("patch lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(string(text), "pax_global_header") || strings.Count(string(text), "\n--- a/") != 1 {
		t.Errorf("patch has more than lib/lz4.h:\n%s", text)
	}

	// Without --pristine, the same archive beside the tree (as Doris's
	// thirdparty/src holds it) gives the same diff.
	data, _ := os.ReadFile(archive)
	os.WriteFile(filepath.Join(dir, "src", "lz4-1.9.4.tar.gz"), data, 0o644)
	pdir2 := filepath.Join(dir, "patches-beside")
	out, errOut, code = run(t, "patch", "new", "bigger-hash-table", "--patches", pdir2, "--component", "lz4", "--version", "1.9.4",
		"--source", src, "--targets", "kunpeng920", "--author", "A Maintainer <m@example.org>")
	if code != 0 || !strings.Contains(out, "(1 files changed)") {
		t.Fatalf("new without --pristine: %d\n%s\n%s", code, out, errOut)
	}
	beside, _ := os.ReadFile(filepath.Join(pdir2, "lz4", "0001-bigger-hash-table.patch"))
	if diff := func(b []byte) string { return string(b[strings.Index(string(b), "\n--- a/"):]) }; diff(beside) != diff(text) {
		t.Errorf("the archive beside gives another diff:\n%s", beside)
	}

	// check on a fresh unpack: it applies as written, and GNU patch agrees.
	up := untarCorpus(t, archive, filepath.Join(dir, "upstream"), "lz4-1.9.4")
	check := []string{"patch", "check", "--patches", pdir, "--source", up, "--component", "lz4", "--version", "1.9.4", "--target", "kunpeng920"}
	out, errOut, code = run(t, check...)
	if code != 0 || !strings.Contains(out, "lz4/0001-bigger-hash-table lib/lz4.h hunk #1: clean") || !strings.Contains(out, "1 hunks: 1 clean") {
		t.Fatalf("check: %d\n%s\n%s", code, out, errOut)
	}
	gnuPatchDryRun(t, up, pf)

	// Upstream moves: three lines more above the hunk. check reports the
	// offset; refresh rewrites the diff there, keeping the header.
	editFile(t, filepath.Join(up, "lib/lz4.h"), "#ifndef LZ4_H_2983827168210", "/* a */\n/* b */\n/* c */\n#ifndef LZ4_H_2983827168210")
	out, _, code = run(t, check...)
	if code != 0 || !strings.Contains(out, "hunk #1: offset +3") {
		t.Fatalf("check after the upstream edit: %d\n%s", code, out)
	}
	before := string(text)
	out, errOut, code = run(t, "patch", "refresh", "bigger-hash-table", "--patches", pdir, "--source", up)
	if code != 0 || !strings.Contains(out, "refreshed "+pf) {
		t.Fatalf("refresh: %d\n%s\n%s", code, out, errOut)
	}
	refreshed, _ := os.ReadFile(pf)
	oldAt := before[strings.Index(before, "@@ "):]
	oldAt = oldAt[:strings.Index(oldAt, "\n")]
	var a, b, c, d int
	if _, err := fmt.Sscanf(oldAt, "@@ -%d,%d +%d,%d @@", &a, &b, &c, &d); err != nil {
		t.Fatalf("%q: %v", oldAt, err)
	}
	newAt := fmt.Sprintf("@@ -%d,%d +%d,%d @@", a+3, b, c+3, d)
	if !strings.Contains(string(refreshed), newAt) || !strings.HasPrefix(string(refreshed), before[:strings.Index(before, "\n--- a/")]) {
		t.Errorf("refreshed patch (want %s and the old header):\n%s", newAt, refreshed)
	}
	out, _, code = run(t, check...)
	if code != 0 || !strings.Contains(out, "hunk #1: clean") {
		t.Errorf("check after refresh: %d\n%s", code, out)
	}
	gnuPatchDryRun(t, up, pf)
	out, _, code = run(t, "patch", "refresh", "bigger-hash-table", "--patches", pdir, "--source", up)
	if code != 0 || !strings.Contains(out, "already applies cleanly") {
		t.Errorf("second refresh: %d\n%s", code, out)
	}
}

// TestPatchNewFindsCorpusArchiveBeside: without --pristine, new finds each
// corpus archive beside its unpacked tree, as Doris's thirdparty/src holds
// them, inside a Doris checkout that ignores thirdparty/src.
func TestPatchNewFindsCorpusArchiveBeside(t *testing.T) {
	corpus := corpusDir(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	doris := filepath.Join(dir, "doris")
	os.MkdirAll(doris, 0o755)
	os.WriteFile(filepath.Join(doris, ".gitignore"), []byte("thirdparty/src/\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", ".gitignore"}, {"commit", "-qm", "doris"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@x", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = doris
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	tpsrc := filepath.Join(doris, "thirdparty", "src")
	pdir := filepath.Join(dir, "patches")
	for _, c := range []struct{ name, component, file, from, to string }{
		{"lz4-1.9.4", "lz4", "lib/lz4.h", "#define LZ4_MEMORY_USAGE_DEFAULT 14", "#define LZ4_MEMORY_USAGE_DEFAULT 16"},
		{"snappy-1.1.8", "snappy", "snappy.cc", "namespace snappy {", "namespace snappy {  // dorisarm"},
		{"bitshuffle-0.5.1", "bitshuffle", "src/bitshuffle_core.c", `#include "bitshuffle_core.h"`, `#include "bitshuffle_core.h"  /* dorisarm */`},
		{"bzip2-1.0.8", "bzip2", "bzlib.c", `#include "bzlib_private.h"`, `#include "bzlib_private.h"  /* dorisarm */`},
	} {
		archive := filepath.Join(corpus, "mirror", c.name+".tar.gz")
		src := untarCorpus(t, archive, tpsrc, c.name)
		data, _ := os.ReadFile(archive)
		os.WriteFile(filepath.Join(tpsrc, c.name+".tar.gz"), data, 0o644)
		editFile(t, filepath.Join(src, c.file), c.from, c.to)
		out, errOut, code := run(t, "patch", "new", "edit", "--patches", pdir, "--component", c.component, "--source", src, "--author", "t")
		if code != 0 || !strings.Contains(out, "(1 files changed)") {
			t.Errorf("%s: new: %d\n%s\n%s", c.name, code, out, errOut)
			continue
		}
		text, _ := os.ReadFile(filepath.Join(pdir, c.component, "0001-edit.patch"))
		if !strings.Contains(string(text), "--- a/"+c.file+"\n") || !strings.Contains(string(text), "+"+c.to+"\n") {
			t.Errorf("%s: patch:\n%s", c.name, text)
		}
	}
	// With no archive beside it, new says what to pass.
	os.Remove(filepath.Join(tpsrc, "lz4-1.9.4.tar.gz"))
	_, errOut, code := run(t, "patch", "new", "again", "--patches", pdir, "--component", "lz4", "--source", filepath.Join(tpsrc, "lz4-1.9.4"))
	if code != 2 || !strings.Contains(errOut, "no archive beside it unpacks to lz4-1.9.4/") {
		t.Errorf("no archive: %d %s", code, errOut)
	}
}

// TestPatchWorkflowOnDoris217: a patch of component doris to the 2.1.7
// tree's real thirdparty/build-thirdparty.sh, made against the corpus tree
// as the pristine copy, checked and refreshed.
func TestPatchWorkflowOnDoris217(t *testing.T) {
	slow(t, "unpacks and patches the real Doris 2.1.7 tree")
	corpus := corpusDir(t)
	pristine := filepath.Join(corpus, "doris-2.1.7")
	if _, err := os.Stat(filepath.Join(pristine, "thirdparty", "build-thirdparty.sh")); err != nil {
		t.Skipf("no doris-2.1.7 tree in the corpus: %v", err)
	}
	dir := t.TempDir()
	copyDoris := func(name string) string {
		dst := filepath.Join(dir, name)
		if out, err := exec.Command("cp", "-r", pristine, dst).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		if out, err := exec.Command("chmod", "-R", "u+w", dst).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		return dst
	}
	src := copyDoris("doris")
	const from = `    MACHINE_TYPE="$(uname -m)"
    # Becuase aarch64 don't support avx2, disable it.`
	const to = `    MACHINE_TYPE="${DORIS_TARGET_ARCH:-$(uname -m)}"
    # Becuase aarch64 don't support avx2, disable it.`
	editFile(t, filepath.Join(src, "thirdparty/build-thirdparty.sh"), from, to)
	pdir := filepath.Join(dir, "patches")
	out, errOut, code := run(t, "patch", "new", "bitshuffle-target-arch", "--patches", pdir, "--component", "doris", "--version", "2.1.7",
		"--source", src, "--pristine", pristine, "--targets", "kunpeng920", "--author", "A Maintainer <m@example.org>",
		"--description", "Let a cross build say bitshuffle's target architecture.", "--evidence", "uname -m is the build host's")
	if code != 0 || !strings.Contains(out, "(1 files changed)") {
		t.Fatalf("new: %d\n%s\n%s", code, out, errOut)
	}
	pf := filepath.Join(pdir, "doris", "0001-bitshuffle-target-arch.patch")
	text, _ := os.ReadFile(pf)
	for _, want := range []string{"Applies-To: doris = 2.1.7\n", "Targets: kunpeng920\n", "--- a/thirdparty/build-thirdparty.sh\n+++ b/thirdparty/build-thirdparty.sh\n",
		"-    MACHINE_TYPE=\"$(uname -m)\"\n", "+    MACHINE_TYPE=\"${DORIS_TARGET_ARCH:-$(uname -m)}\"\n"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("patch lacks %q:\n%s", want, text)
		}
	}
	out, _, _ = run(t, "patch", "list", "--patches", pdir, "--doris", "2.1.7", "--target", "kunpeng920")
	if !strings.Contains(out, "doris/0001-bitshuffle-target-arch") {
		t.Errorf("list:\n%s", out)
	}

	// check is a dry run: the read-only corpus tree itself is the pristine tree.
	check := []string{"patch", "check", "--patches", pdir, "--component", "doris", "--version", "2.1.7", "--target", "kunpeng920", "--source"}
	out, errOut, code = run(t, append(check, pristine)...)
	if code != 0 || !strings.Contains(out, "doris/0001-bitshuffle-target-arch thirdparty/build-thirdparty.sh hunk #1: clean") {
		t.Fatalf("check: %d\n%s\n%s", code, out, errOut)
	}
	out, _, _ = run(t, "patch", "check", "--patches", pdir, "--component", "doris", "--version", "2.1.7", "--target", "generic-armv8", "--source", pristine)
	if !strings.Contains(out, "no patches") {
		t.Errorf("a target the patch is not for:\n%s", out)
	}
	next := copyDoris("doris-next")
	gnuPatchDryRun(t, next, pf)

	// The next release adds two lines to build_bitshuffle: refresh.
	editFile(t, filepath.Join(next, "thirdparty/build-thirdparty.sh"), "build_bitshuffle() {\n", "build_bitshuffle() {\n    # two new lines\n    :\n")
	out, _, code = run(t, append(check, next)...)
	if code != 0 || !strings.Contains(out, "hunk #1: offset +2") {
		t.Fatalf("check on the next tree: %d\n%s", code, out)
	}
	out, errOut, code = run(t, "patch", "refresh", "doris/0001-bitshuffle-target-arch", "--patches", pdir, "--source", next)
	if code != 0 || !strings.Contains(out, "refreshed") {
		t.Fatalf("refresh: %d\n%s\n%s", code, out, errOut)
	}
	refreshed, _ := os.ReadFile(pf)
	if string(refreshed) == string(text) || !strings.HasPrefix(string(refreshed), "Description: Let a cross build") {
		t.Errorf("refreshed:\n%s", refreshed)
	}
	out, _, code = run(t, append(check, next)...)
	if code != 0 || !strings.Contains(out, "hunk #1: clean") {
		t.Errorf("check after refresh: %d\n%s", code, out)
	}
	// and the refreshed patch no longer applies as written to 2.1.7 itself.
	out, _, _ = run(t, append(check, pristine)...)
	if !strings.Contains(out, "offset -2") {
		t.Errorf("refreshed patch on 2.1.7:\n%s", out)
	}
	// apply writes the edit that new started from.
	if out, errOut, code := run(t, append([]string{"patch", "apply", "--patches", pdir, "--component", "doris", "--version", "2.1.7", "--source"}, next)...); code != 0 {
		t.Fatalf("apply: %d\n%s\n%s", code, out, errOut)
	}
	applied, _ := os.ReadFile(filepath.Join(next, "thirdparty/build-thirdparty.sh"))
	if !strings.Contains(string(applied), to) {
		t.Error("apply did not write the edit")
	}
}
