package build

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/source"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLayBase(t *testing.T) {
	base := t.TempDir()
	writeFiles(t, base, map[string]string{"include/snappy.h": "h", "lib/libsnappy.a": "a"})
	if err := os.Symlink("lib", filepath.Join(base, "lib64")); err != nil {
		t.Fatal(err)
	}
	b, err := plan.CheckBase(base)
	if err != nil {
		t.Fatal(err)
	}
	b.Into = "thirdparty/installed"
	src := t.TempDir()
	// Left from nothing: a fresh tree has no install directory; a stale one goes.
	writeFiles(t, src, map[string]string{"thirdparty/installed/lib/stale.a": "old"})
	r := &runner{src: src, opts: Options{ThirdpartyBase: base}}
	s := plan.Step{ID: plan.BaseStep, Kind: plan.KindBase, Inputs: plan.StepInputs{Base: b}}
	var log bytes.Buffer
	if err := r.layBase(s, &log); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(src, "thirdparty", "installed", "lib64", "libsnappy.a"))
	if err != nil || string(got) != "a" {
		t.Errorf("lib64/libsnappy.a: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(src, "thirdparty", "installed", "lib", "stale.a")); !os.IsNotExist(err) {
		t.Errorf("a stale file survived the base: %v", err)
	}

	// Changed after planning: refused, naming both digests.
	writeFiles(t, base, map[string]string{"lib/libsnappy.a": "other bytes"})
	err = r.layBase(s, &log)
	if err == nil || !strings.Contains(err.Error(), "changed since it was planned") {
		t.Errorf("a base changed after planning: %v", err)
	}
	r.opts.ThirdpartyBase = ""
	if err := r.layBase(s, &log); err == nil || !strings.Contains(err.Error(), "pass --thirdparty-base") {
		t.Errorf("no base given: %v", err)
	}
}

// An absolute link inside the base lands in the tree as a relative link
// (the tree never points at the base's machine path) and the copy's digest
// is the plan's; a link into the build machine added after planning is
// refused (bad input, naming it), one that leaves the base by a relative
// path fails the digest, and neither leaves the base in the tree.
func TestLayBaseLinks(t *testing.T) {
	base := t.TempDir()
	writeFiles(t, base, map[string]string{"include/snappy.h": "h", "lib/libsnappy.a": "a"})
	for link, target := range map[string]string{"lib64": filepath.Join(base, "lib"), "include/snappy-c.h": filepath.Join(base, "include", "snappy.h")} {
		if err := os.Symlink(target, filepath.Join(base, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	b, err := plan.CheckBase(base)
	if err != nil {
		t.Fatal(err)
	}
	b.Into = "thirdparty/installed"
	src := t.TempDir()
	inst := filepath.Join(src, "thirdparty", "installed")
	r := &runner{src: src, opts: Options{ThirdpartyBase: base}}
	s := plan.Step{ID: plan.BaseStep, Kind: plan.KindBase, Inputs: plan.StepInputs{Base: b}}
	if err := r.layBase(s, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for link, want := range map[string]string{"lib64": "lib", "include/snappy-c.h": "snappy.h"} {
		if got, err := os.Readlink(filepath.Join(inst, filepath.FromSlash(link))); err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %q", link, got, err, want)
		}
	}
	if got, err := os.ReadFile(filepath.Join(inst, "lib64", "libsnappy.a")); err != nil || string(got) != "a" {
		t.Errorf("lib64/libsnappy.a: %q, %v", got, err)
	}

	outside := filepath.Join(t.TempDir(), "libhost.so")
	writeFiles(t, filepath.Dir(outside), map[string]string{"libhost.so": "host"})
	for _, c := range []struct {
		link, target, want string
		input              bool
	}{
		{"lib/libhost.so", outside, "lib/libhost.so -> " + outside + " is an absolute link outside the base", true},
		{"lib/libup.a", "../../" + filepath.Base(base) + "/lib/libsnappy.a", "changed since it was planned", false},
	} {
		p := filepath.Join(base, filepath.FromSlash(c.link))
		if err := os.Symlink(c.target, p); err != nil {
			t.Fatal(err)
		}
		err := r.layBase(s, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) || fault.IsInput(err) != c.input {
			t.Errorf("%s -> %s added after planning: %v, want %q (bad input: %v)", c.link, c.target, err, c.want, c.input)
		}
		if _, err := os.Lstat(inst); !os.IsNotExist(err) {
			t.Errorf("a refused base is left in the tree: %v", err)
		}
		os.Remove(p)
	}
}

func TestPlaceBuildTools(t *testing.T) {
	hostDir := t.TempDir()
	writeFiles(t, hostDir, map[string]string{"fakegen": "#!/bin/sh\necho fakegen 1.0\n"})
	t.Setenv("PATH", hostDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	d, err := source.FileDigest(filepath.Join(hostDir, "fakegen"))
	if err != nil {
		t.Fatal(err)
	}
	tool := plan.BuildToolInfo{Name: "fakegen", Path: "thirdparty/installed/bin/fakegen", Version: "1.0", Digest: d}
	other := plan.BuildToolInfo{Name: "fakegen", Path: "thirdparty/installed/bin/other", Version: "1.0", Digest: tool.Digest}

	src := t.TempDir()
	// A target program a package installed stands where the tree runs it.
	writeFiles(t, src, map[string]string{"thirdparty/installed/bin/fakegen": "target ELF"})
	r := &runner{src: src}
	s := plan.Step{ID: "build:be", Kind: plan.KindBuild, Inputs: plan.StepInputs{Build: &plan.BuildInputs{Tools: []plan.BuildToolInfo{tool, other}}}}
	var log bytes.Buffer
	restore, err := r.placeBuildTools(s, &log)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(src, "thirdparty", "installed", "bin", "fakegen")
	if st, err := os.Lstat(at); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("during the step %s is %v (%v), not an executable copy", at, st, err)
	}
	if got, _ := source.FileDigest(at); got != d {
		t.Errorf("during the step %s is %s, not the build machine's program %s", at, got, d)
	}
	// What the step writes there is its tree's, never the build machine's program.
	os.WriteFile(at, []byte("overwritten by the step"), 0o755)
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if got, _ := source.FileDigest(filepath.Join(hostDir, "fakegen")); got != d {
		t.Error("the step's write reached the build machine's program")
	}
	if got, err := os.ReadFile(at); err != nil || string(got) != "target ELF" {
		t.Errorf("after the step: %q, %v; want the target program back", got, err)
	}
	if _, err := os.Lstat(filepath.Join(src, "thirdparty", "installed", "bin", "other")); !os.IsNotExist(err) {
		t.Errorf("a tool placed where nothing stood is left after the step: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(at)); len(ents) != 1 {
		t.Errorf("the tree after the step holds %d entries in bin/, want 1", len(ents))
	}

	// The program changed since planning: a gate failure, and the tree as it was.
	writeFiles(t, hostDir, map[string]string{"fakegen": "#!/bin/sh\necho fakegen 2.0\n"})
	restore, err = r.placeBuildTools(s, &log)
	if !errors.Is(err, ErrGate) || !strings.Contains(err.Error(), "changed since the plan was made") {
		t.Errorf("a changed build tool: %v", err)
	}
	restore()
	if got, err := os.ReadFile(at); err != nil || string(got) != "target ELF" {
		t.Errorf("after a refused step: %q, %v", got, err)
	}
}

// TestBuildToolsRestoreFollowsNoLink: a step that replaces installed/bin
// with a link to a directory of the build machine (which holds the host's
// program under the same name) makes the restore fail, not delete that
// program, and the step fails.
func TestBuildToolsRestoreFollowsNoLink(t *testing.T) {
	hostDir := t.TempDir()
	writeFiles(t, hostDir, map[string]string{"fakegen": "#!/bin/sh\necho fakegen 1.0\n"})
	t.Setenv("PATH", hostDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	d, _ := source.FileDigest(filepath.Join(hostDir, "fakegen"))
	tool := plan.BuildToolInfo{Name: "fakegen", Path: "thirdparty/installed/bin/fakegen", Version: "1.0", Digest: d}
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"thirdparty/installed/bin/fakegen": "target ELF"})
	r := &runner{src: src}
	s := plan.Step{ID: "build:be", Kind: plan.KindBuild, Inputs: plan.StepInputs{Build: &plan.BuildInputs{Tools: []plan.BuildToolInfo{tool}}}}
	restore, err := r.placeBuildTools(s, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(src, "thirdparty", "installed", "bin")
	if err := os.RemoveAll(bin); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostDir, bin); err != nil {
		t.Fatal(err)
	}
	if err := restore(); err == nil {
		t.Error("the restore through a link out of the tree succeeded")
	}
	if got, err := source.FileDigest(filepath.Join(hostDir, "fakegen")); err != nil || got != d {
		t.Errorf("the build machine's program after the restore: %s, %v", got, err)
	}
}

// A tree step whose host_env is unset fails before it starts, saying how to set it.
func TestHostEnvGate(t *testing.T) {
	r := &runner{src: t.TempDir(), in: Input{Recipe: &recipe.Recipe{Name: "doris", HostEnv: map[string]*recipe.HostEnv{"JAVA_HOME": {Read: []string{"include"}}}}}}
	s := plan.Step{ID: "build:be", Kind: plan.KindBuild, Inputs: plan.StepInputs{Build: &plan.BuildInputs{
		HostEnv: []plan.HostEnvInfo{{Name: "JAVA_HOME", Missing: "JAVA_HOME is not set (a JDK 8 or newer)"}}}}}
	restore, err := r.placeBuildTools(s, &bytes.Buffer{})
	restore()
	if !errors.Is(err, ErrGate) || !strings.Contains(err.Error(), "JAVA_HOME is not set (a JDK 8 or newer)") {
		t.Errorf("got %v", err)
	}
}

// build-thirdparty.sh's `ln -sf lib64 lib`, run once per package, leaves
// lib64/lib64 -> lib64 on the second run: the package check removes links
// that loop, and keeps the rest.
func TestInstalledLoopLinksRemoved(t *testing.T) {
	work := t.TempDir()
	r := &runner{work: work, src: filepath.Join(work, "src"), in: Input{Recipe: &recipe.Recipe{Thirdparty: recipe.Thirdparty{Install: "thirdparty/installed"}}}}
	inst := r.installDir()
	if err := os.MkdirAll(filepath.Join(inst, "lib64"), 0o755); err != nil {
		t.Fatal(err)
	}
	before, err := takeSnapshot(inst, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{
		{"lib64", "lib"},                 // Doris's own link: kept
		{"lib64", "lib64/lib64"},         // resolves to itself
		{"..", "lib64/up"},               // to the directory it is in
		{"libz.a", "lib64/libz-alias.a"}, // dangling, not a loop: kept
	} {
		if err := os.Symlink(c[0], filepath.Join(inst, c[1])); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	if err := r.checkInstalled(plan.Step{ID: "thirdparty:GLOG"}, before, &log); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"lib64/lib64", "lib64/up"} {
		if _, err := os.Lstat(filepath.Join(inst, gone)); !os.IsNotExist(err) {
			t.Errorf("%s: still there (%v)", gone, err)
		}
	}
	for _, kept := range []string{"lib", "lib64/libz-alias.a"} {
		if _, err := os.Lstat(filepath.Join(inst, kept)); err != nil {
			t.Errorf("%s: %v", kept, err)
		}
	}
	if !strings.Contains(log.String(), "removed lib64/lib64 -> lib64") {
		t.Errorf("log: %s", log.String())
	}
}

// A package's flag read-back is kept in the step's work tree; a runner
// without one (a test's, as one was) is an error, and nothing is written
// under the working directory (internal/build/flag-readback/GLOG.scan.json
// was committed that way).
func TestSaveFlagsNeedsAWorkTree(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	src := t.TempDir()
	r := &runner{src: src, in: Input{Recipe: &recipe.Recipe{Thirdparty: recipe.Thirdparty{Install: "thirdparty/installed"}}}}
	var log bytes.Buffer
	if err := r.saveFlags(plan.Step{ID: "thirdparty:GLOG"}, &scan.Report{}, &log); err == nil || !strings.Contains(err.Error(), "no work tree") {
		t.Errorf("saveFlags without a work tree: %v", err)
	}
	// Through the package check of a step that installed nothing.
	if err := r.checkInstalled(plan.Step{ID: "thirdparty:GLOG"}, nil, &log); err == nil || !strings.Contains(err.Error(), "no work tree") {
		t.Errorf("checkInstalled without a work tree: %v", err)
	}
	if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
		t.Errorf("written under the working directory: %v", ents)
	}
	r.work = t.TempDir()
	if err := r.saveFlags(plan.Step{ID: "thirdparty:GLOG"}, &scan.Report{}, &log); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(r.work, flagsDir, "GLOG"+scanSuffix)); err != nil || !strings.Contains(string(b), `"files":0`) {
		t.Errorf("the empty scan in the work tree: %q %v", b, err)
	}
}

// An archive that unpacks to another release than the tree names is said
// in the record (and fails with --strict-versions), also on a cache hit.
func TestUnpackedVersionChecked(t *testing.T) {
	work := t.TempDir()
	dest := filepath.Join(work, "src", "thirdparty", "src", "openssl-OpenSSL_1_1_1s")
	writeFiles(t, dest, map[string]string{"include/openssl/opensslv.h": "# define OPENSSL_VERSION_TEXT    \"OpenSSL 1.1.1w  11 Sep 2023\"\n"})
	in := &plan.UnpackInputs{Archive: "openssl-1.1.1s.tar.gz", Source: "openssl-OpenSSL_1_1_1s", Package: "OPENSSL", Version: "1.1.1s",
		VersionFrom: &source.VersionFrom{File: "include/openssl/opensslv.h", Match: `OPENSSL_VERSION_TEXT\s+"OpenSSL ([0-9][0-9a-z.]*)`}}
	var warned []string
	r := &runner{work: work, in: Input{Recipe: &recipe.Recipe{Thirdparty: recipe.Thirdparty{Vars: "thirdparty/vars.sh"}},
		Plan: &plan.Plan{Steps: []plan.Step{{ID: "unpack:OPENSSL", Kind: plan.KindUnpack, Inputs: plan.StepInputs{Unpack: in}}}}},
		warn: func(s string) { warned = append(warned, s) }}
	var log bytes.Buffer
	if err := r.checkVersion(in, dest, &log); err != nil {
		t.Fatal(err)
	}
	if err := r.versionWarnings(); err != nil {
		t.Fatal(err)
	}
	want := "OPENSSL: the unpacked source declares version 1.1.1w (openssl-OpenSSL_1_1_1s/include/openssl/opensslv.h), but openssl-1.1.1s.tar.gz is named 1.1.1s"
	if len(warned) != 1 || !strings.Contains(warned[0], want) {
		t.Errorf("warnings %q, want one containing %q", warned, want)
	}
	// A cached unpack brings its note back: with --strict-versions the build fails on it.
	r.opts.StrictVersions = true
	if err := r.versionWarnings(); err == nil || !strings.Contains(err.Error(), "--strict-versions") {
		t.Errorf("strict, from the note: %v", err)
	}
	if err := r.checkVersion(in, dest, &log); err == nil || !strings.Contains(err.Error(), "1.1.1w") {
		t.Errorf("strict unpack: %v", err)
	}
	// The release named: nothing said.
	r.opts.StrictVersions, warned = false, nil
	in.Version = "1.1.1w"
	if err := r.checkVersion(in, dest, &log); err != nil {
		t.Fatal(err)
	}
	if err := r.versionWarnings(); err != nil || len(warned) != 0 {
		t.Errorf("matching release: %v %q", err, warned)
	}
}

// A plan marked unbuildable (a sysroot whose C++ library is too old for
// the tree) is refused before anything runs, as bad input.
func TestUnbuildablePlanRefused(t *testing.T) {
	in := fastInput(t, "kunpeng920", "")
	in.Plan.Unbuildable = "recipe minidoris compiles against libstdc++ of GCC 11 or newer"
	fx := &fakeExec{}
	_, err := Run(context.Background(), in, Options{Out: t.TempDir(), Cache: t.TempDir(), Exec: fx.exec})
	if err == nil || !strings.Contains(err.Error(), "kunpeng920: recipe minidoris compiles against libstdc++ of GCC 11") || !fault.IsInput(err) {
		t.Errorf("got %v", err)
	}
	if ran := fx.commands(); len(ran) != 0 {
		t.Errorf("steps ran: %v", ran)
	}
}
