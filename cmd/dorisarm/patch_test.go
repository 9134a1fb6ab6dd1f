package main

import (
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
	// refresh of a patch that no longer applies writes nothing.
	before, _ := os.ReadFile(pfile)
	if _, _, code := run(t, "patch", "refresh", "scalar-bitshuffle", "--patches", pdir, "--source", src); code != 1 {
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
	if out, errOut, code := run(t, "patch", "new", "git-edit", "--patches", pdir, "--component", "simdprobe", "--source", src); code != 0 {
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
