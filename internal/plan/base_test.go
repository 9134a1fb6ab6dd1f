package plan

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// writeBase makes a small third-party install: headers, an archive and
// Doris's lib64 -> lib link.
func writeBase(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"include/snappy.h", "lib/libsnappy.a", "lib/libbacktrace.a"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("lib", filepath.Join(dir, "lib64")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckBase(t *testing.T) {
	dir := writeBase(t)
	b, err := CheckBase(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b.Files != 3 || !strings.HasPrefix(b.Digest, "sha256:") {
		t.Errorf("base: %+v", b)
	}
	// One byte changed is another base.
	if err := os.WriteFile(filepath.Join(dir, "include", "snappy.h"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b2, err := CheckBase(dir); err != nil || b2.Digest == b.Digest {
		t.Errorf("a changed base kept its digest %s (%v)", b.Digest, err)
	}

	bad := []struct {
		name string
		make func(dir string) error
		want string
	}{
		{"host program", func(d string) error {
			os.MkdirAll(filepath.Join(d, "bin"), 0o755)
			return os.Symlink("/usr/bin/env", filepath.Join(d, "bin", "protoc"))
		}, "bin/protoc -> /usr/bin/env resolves to /usr/bin/env, outside the base"},
		// Each link read alone stays inside (a/b/u/../../x is a/x);
		// followed together they leave it (a/b/u is a, so a/b/u/.. is the base).
		{"link chain", func(d string) error {
			secret := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(secret, []byte("host file"), 0o644); err != nil {
				return err
			}
			rel, _ := filepath.Rel(d, secret)
			os.MkdirAll(filepath.Join(d, "a", "b"), 0o755)
			if err := os.Symlink("..", filepath.Join(d, "a", "b", "u")); err != nil {
				return err
			}
			return os.Symlink("b/u/../"+rel, filepath.Join(d, "a", "passwd"))
		}, "outside the base"},
		{"dangling", func(d string) error { return os.Symlink("lib/nothing.a", filepath.Join(d, "libz.a")) }, "does not resolve"},
		{"fifo", func(d string) error { return syscall.Mkfifo(filepath.Join(d, "pipe"), 0o644) }, "a base holds files, directories and links only"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			d := writeBase(t)
			if err := tc.make(d); err != nil {
				t.Fatal(err)
			}
			_, err := CheckBase(d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := CheckBase(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no files") {
		t.Errorf("empty base: %v", err)
	}
	if _, err := CheckBase(filepath.Join(dir, "include", "snappy.h")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as base: %v", err)
	}
}

// An absolute link into the base counts as the relative link the build
// lays down in its place: the base's digest is the same as with that
// link, wherever the base is and whatever path its links name it by. An
// absolute link outside it, or a relative one whose path leaves it, is
// bad input naming the link, its target and what to do.
func TestCheckBaseLinks(t *testing.T) {
	want, err := CheckBase(writeBase(t))
	if err != nil {
		t.Fatal(err)
	}
	relink := func(d, name, target string) {
		t.Helper()
		p := filepath.Join(d, filepath.FromSlash(name))
		os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	abs := writeBase(t)
	relink(abs, "lib64", filepath.Join(abs, "lib"))
	// Named through a link to the base, as --thirdparty-base is given.
	alias := filepath.Join(t.TempDir(), "base")
	if err := os.Symlink(abs, alias); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{abs, alias} {
		got, err := CheckBase(dir)
		if err != nil || got.Digest != want.Digest || got.Files != want.Files {
			t.Errorf("%s with lib64 -> %s: %+v, %v; want the digest of lib64 -> lib, %s", dir, filepath.Join(abs, "lib"), got, err, want.Digest)
		}
	}
	relink(abs, "lib64", alias+"/lib/") // by the path given, not clean
	if got, err := CheckBase(alias); err != nil || got.Digest != want.Digest {
		t.Errorf("lib64 -> %s/lib/: %+v, %v", alias, got, err)
	}

	// One level down: include/snappy-c.h -> <base>/include/snappy.h is snappy.h.
	deep, rel := writeBase(t), writeBase(t)
	relink(deep, "include/snappy-c.h", filepath.Join(deep, "include", "snappy.h"))
	relink(rel, "include/snappy-c.h", "snappy.h")
	d1, err1 := CheckBase(deep)
	d2, err2 := CheckBase(rel)
	if err1 != nil || err2 != nil || d1.Digest != d2.Digest {
		t.Errorf("an absolute link one level down: %v %v, %v %v", d1, err1, d2, err2)
	}

	bad := []struct {
		name string
		make func(d string) error
		want string
	}{
		{"absolute, outside", func(d string) error { return os.Symlink("/etc/hostname", filepath.Join(d, "lib", "libhost.so")) },
			"lib/libhost.so -> /etc/hostname resolves to"},
		// It resolves into the base, but through a path of the build machine's.
		{"absolute, through an outside link", func(d string) error {
			other := filepath.Join(t.TempDir(), "other")
			if err := os.Symlink(d, other); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(other, "lib"), filepath.Join(d, "lib32"))
		}, "is an absolute link outside the base"},
		// Out of the base's own directory and back into it: laid down as
		// thirdparty/installed it would lead to thirdparty/<base>/lib.
		{"relative, out and back", func(d string) error {
			return os.Symlink(filepath.Join("..", filepath.Base(d), "lib"), filepath.Join(d, "lib32"))
		}, "link lib32 -> ../" + "BASE/lib climbs above the root of the tree"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			d := writeBase(t)
			if err := tc.make(d); err != nil {
				t.Fatal(err)
			}
			_, err := CheckBase(d)
			w := strings.ReplaceAll(tc.want, "BASE", filepath.Base(d))
			if err == nil || !strings.Contains(err.Error(), w) || !fault.IsInput(err) {
				t.Errorf("got %v, want bad input containing %q", err, w)
			}
		})
	}
}

// A base stands in for the third-party packages: a slice with a base and
// no --packages builds none, and every package and BE step starts from it.
func TestBasePlan(t *testing.T) {
	base, err := CheckBase(writeBase(t))
	if err != nil {
		t.Fatal(err)
	}
	obj := "src/util/CMakeFiles/Util.dir/bitmap.cpp.o"
	in := corpusInputs(t, "kunpeng920", nil, &Slice{Targets: []string{obj}})
	in.Base = base
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
		if s.Kind == KindThirdparty || s.Kind == KindFetch {
			t.Errorf("a base without --packages still plans %s", s.ID)
		}
	}
	if len(p.Packages) != 0 {
		t.Errorf("the plan (and so the record) lists %d packages it does not build", len(p.Packages))
	}
	bs := p.Step(BaseStep)
	if bs == nil || bs.Kind.Cacheable() || bs.Inputs.Base.Into != "thirdparty/installed" || bs.Inputs.Base.Digest != base.Digest {
		t.Fatalf("base step: %+v in %v", bs, ids)
	}
	if err := bs.Validate(); err != nil {
		t.Error(err)
	}
	// The corpus is the build interface without the BE source: the clucene
	// patch (Needs-Path) is left out, and the plan says so.
	if ids := p.Step("patch:doris").PatchIDs(); slices.Contains(ids, "doris/0004-clucene-for-march-from-build") || len(ids) == 0 {
		t.Errorf("patch:doris applies %v", ids)
	}
	if !slices.ContainsFunc(p.Warnings, func(w string) bool {
		return strings.Contains(w, "0004-clucene-for-march-from-build is not applied: the tree has no be/src/clucene")
	}) {
		t.Errorf("no warning about the clucene patch: %v", p.Warnings)
	}
	be := p.Step("build:be")
	if !slices.Contains(be.Needs, BaseStep) {
		t.Errorf("build:be needs %v, not the base", be.Needs)
	}

	// Another base is another BE.
	other := *base
	other.Digest = "sha256:" + strings.Repeat("0", 64)
	in.Base = &other
	p2, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Step("build:be").Key == be.Key || p2.Step("build:be:targets").Key == p.Step("build:be:targets").Key {
		t.Error("the BE's keys do not change with the base's digest")
	}

	// Packages named go over the base.
	in.Base, in.Packages = base, []string{"gflags"}
	p3, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	gf := p3.Step("thirdparty:GFLAGS")
	if gf == nil || !slices.Contains(gf.Needs, BaseStep) {
		t.Errorf("gflags over a base: %+v", gf)
	}
}

// tools are two resolved build tools, as ResolveBuildTools makes them.
func tools(protoc string) []BuildToolInfo {
	return []BuildToolInfo{
		{Name: "protoc", Path: "thirdparty/installed/bin/protoc", Version: protoc, Digest: "sha256:" + strings.Repeat("a", 64)},
		{Name: "thrift", Path: "thirdparty/installed/bin/thrift", Version: "0.16.0", Digest: "sha256:" + strings.Repeat("b", 64)},
	}
}

// A cross build's BE runs the build machine's code generators; a native
// build and a packages-only build do not; their digest keys the BE.
func TestBuildToolsPlan(t *testing.T) {
	in := corpusInputs(t, "kunpeng920", nil, &Slice{})
	in.Toolchain.Cross = true
	in.BuildTools = tools("21.11")
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	be := p.Step("build:be")
	if got := be.Inputs.Build.Tools; len(got) != 2 || got[0].Name != "protoc" {
		t.Fatalf("cross BE step's build tools: %+v", got)
	}
	for _, w := range p.Warnings {
		if strings.Contains(w, "build tool") {
			t.Errorf("matching versions warned: %s", w)
		}
	}

	in.BuildTools = tools("21.12")
	p2, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Step("build:be").Key == be.Key {
		t.Error("another protoc keeps the BE's key")
	}
	want := "build tool protoc: this machine's is 21.12, thirdparty/vars.sh pins PROTOBUF 21.11"
	if !slices.ContainsFunc(p2.Warnings, func(w string) bool { return strings.Contains(w, want) }) {
		t.Errorf("no warning %q in %v", want, p2.Warnings)
	}

	in.BuildTools = []BuildToolInfo{{Name: "thrift", Path: "thirdparty/installed/bin/thrift", Missing: "thrift is not on this machine's PATH (apt-get install thrift-compiler)"}}
	p3, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(p3.Warnings, func(w string) bool { return strings.Contains(w, "thrift-compiler") }) {
		t.Errorf("a missing tool is not said: %v", p3.Warnings)
	}

	// Native: the tree's own protoc runs.
	nat := corpusInputs(t, "x86_64", nil, &Slice{})
	nat.BuildTools = tools("21.11")
	p4, err := Make(nat)
	if err != nil {
		t.Fatal(err)
	}
	if got := p4.Step("build:be").Inputs.Build.Tools; got != nil {
		t.Errorf("a native build runs build tools %+v", got)
	}
	// Packages only: no BE to run them.
	pk := corpusInputs(t, "kunpeng920", []string{"gflags"}, nil)
	pk.Toolchain.Cross, pk.BuildTools = true, tools("21.11")
	p5, err := Make(pk)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p5.Steps {
		if s.Inputs.Build != nil && s.Inputs.Build.Tools != nil {
			t.Errorf("packages-only step %s has build tools", s.ID)
		}
	}
}

func TestResolveBuildTools(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "fakegen")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho 'fakegen version 1.2.3'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	r := &recipe.Recipe{BuildTools: map[string]*recipe.BuildTool{
		"fakegen":    {Path: "bin/fakegen", Package: "FAKE", Version: "--version", Match: `version (\d+\.\d+\.\d+)`},
		"nosuchprog": {Path: "bin/nosuchprog", Install: "apt-get install nosuchprog"},
		"badmatch":   {Path: "bin/badmatch", Package: "FAKE", Version: "--version", Match: `release (\d+)`},
	}}
	if err := os.Symlink(prog, filepath.Join(dir, "badmatch")); err != nil {
		t.Fatal(err)
	}
	got := ResolveBuildTools(context.Background(), r, "")
	if len(got) != 3 {
		t.Fatalf("%+v", got)
	}
	by := map[string]BuildToolInfo{}
	for _, g := range got {
		by[g.Name] = g
	}
	if f := by["fakegen"]; f.Version != "1.2.3" || f.Missing != "" || !strings.HasPrefix(f.Digest, "sha256:") {
		t.Errorf("fakegen: %+v", f)
	}
	if f := by["nosuchprog"]; !strings.Contains(f.Missing, "apt-get install nosuchprog") || f.Digest != "" {
		t.Errorf("nosuchprog: %+v", f)
	}
	if f := by["badmatch"]; !strings.Contains(f.Missing, "does not match") {
		t.Errorf("badmatch: %+v", f)
	}
	// The bytes the plan recorded, or nothing.
	if p, err := FindBuildTool(by["fakegen"]); err != nil || p != prog {
		t.Errorf("FindBuildTool: %q, %v", p, err)
	}
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho 'fakegen version 9.9.9'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := FindBuildTool(by["fakegen"]); err == nil || !strings.Contains(err.Error(), "changed since the plan was made") {
		t.Errorf("a changed tool: %v", err)
	}
	if _, err := FindBuildTool(by["nosuchprog"]); err == nil {
		t.Error("a missing tool was found")
	}
}

func TestHostEnv(t *testing.T) {
	jdk := t.TempDir()
	writeTree := func(body string) {
		p := filepath.Join(jdk, "include", "jni.h")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTree("jni 17")
	r := &recipe.Recipe{Name: "doris", HostEnv: map[string]*recipe.HostEnv{"DORISARM_TEST_JDK": {Read: []string{"include"}, Install: "install a JDK"}}}
	t.Setenv("DORISARM_TEST_JDK", jdk)
	got := ResolveHostEnv(r)
	if len(got) != 1 || got[0].Missing != "" || !strings.HasPrefix(got[0].Digest, "sha256:") {
		t.Fatalf("%+v", got)
	}
	if strings.Contains(got[0].Digest, jdk) {
		t.Error("the digest holds the machine path")
	}
	if err := CheckHostEnv(got[0], r); err != nil {
		t.Error(err)
	}
	writeTree("jni 21")
	if err := CheckHostEnv(got[0], r); err == nil || !strings.Contains(err.Error(), "changed since the plan was made") {
		t.Errorf("other JNI headers: %v", err)
	}
	t.Setenv("DORISARM_TEST_JDK", filepath.Join(jdk, "nothing"))
	if g := ResolveHostEnv(r); !strings.Contains(g[0].Missing, "$DORISARM_TEST_JDK/include") || !strings.Contains(g[0].Missing, "install a JDK") {
		t.Errorf("a JDK without include/: %+v", g)
	}
	t.Setenv("DORISARM_TEST_JDK", "")
	unset := ResolveHostEnv(r)
	if !strings.Contains(unset[0].Missing, "DORISARM_TEST_JDK is not set (install a JDK)") {
		t.Errorf("unset: %+v", unset)
	}
	if err := CheckHostEnv(unset[0], r); err == nil {
		t.Error("an unset variable passed")
	}

	// In a plan: the BE's key follows the digest; an unset one is said.
	in := corpusInputs(t, "kunpeng920", nil, &Slice{})
	in.HostEnv = []HostEnvInfo{{Name: "JAVA_HOME", Digest: "sha256:" + strings.Repeat("1", 64)}}
	p1, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	in.HostEnv = []HostEnvInfo{{Name: "JAVA_HOME", Digest: "sha256:" + strings.Repeat("2", 64)}}
	p2, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Step("build:be").Key == p2.Step("build:be").Key {
		t.Error("other JNI headers keep the BE's key")
	}
	in.HostEnv = []HostEnvInfo{{Name: "JAVA_HOME", Missing: "JAVA_HOME is not set (a JDK)"}}
	p3, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(p3.Warnings, func(w string) bool { return strings.Contains(w, "JAVA_HOME is not set") }) {
		t.Errorf("no warning: %v", p3.Warnings)
	}
	pk := corpusInputs(t, "kunpeng920", []string{"gflags"}, nil)
	pk.HostEnv = in.HostEnv
	p4, err := Make(pk)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range p4.Warnings {
		if strings.Contains(w, "JAVA_HOME") {
			t.Errorf("a packages-only plan needs JAVA_HOME: %s", w)
		}
	}
}

// A BE that compiles against a sysroot with too old a C++ library is
// marked unbuildable at plan time (the plan still shows, with the reason
// as a warning; a build stops before its first step), not at its first
// C++20 unit; configure-only and packages-only plans are not.
func TestLibstdcxxMin(t *testing.T) {
	in := corpusInputs(t, "kunpeng920", nil, &Slice{Targets: []string{"src/util/CMakeFiles/Util.dir/bitmap.cpp.o"}})
	sr := in.Matrix.Sysroots["debian-11-arm64"]
	if sr == nil || sr.Libstdcxx == "" || in.Recipe.LibstdcxxMin == "" {
		t.Fatalf("the facts this test is about are gone: sysroot %+v, recipe libstdcxx_min %q", sr, in.Recipe.LibstdcxxMin)
	}
	in.SysrootWaiver = ""
	in.Toolchain.Sysroot = &toolchain.Sysroot{Name: "debian-11-arm64", Glibc: "2.28"}
	unbuildable := func(in Inputs) string {
		t.Helper()
		p, err := Make(in)
		if err != nil {
			t.Fatal(err)
		}
		if p.Unbuildable != "" && !slices.Contains(p.Warnings, p.Unbuildable) {
			t.Errorf("the reason is not among the plan's warnings: %v", p.Warnings)
		}
		return p.Unbuildable
	}
	if why := unbuildable(in); !strings.Contains(why, "sysroot debian-11-arm64 holds GCC "+sr.Libstdcxx+"'s") || !strings.Contains(why, "--waive-sysroot") {
		t.Errorf("BE slice against GCC %s's libstdc++: %q", sr.Libstdcxx, why)
	}
	in.Slice = &Slice{} // configure only: nothing compiled
	if why := unbuildable(in); why != "" {
		t.Errorf("configure-only: %s", why)
	}
	pk := corpusInputs(t, "kunpeng920", []string{"gflags"}, nil)
	pk.SysrootWaiver, pk.Toolchain.Sysroot = "", in.Toolchain.Sysroot
	if why := unbuildable(pk); why != "" {
		t.Errorf("packages only: %s", why)
	}
	// A sysroot new enough passes.
	r := *in.Recipe
	r.LibstdcxxMin = sr.Libstdcxx
	in.Recipe, in.Slice = &r, &Slice{Targets: []string{"src/util/CMakeFiles/Util.dir/bitmap.cpp.o"}}
	if why := unbuildable(in); why != "" {
		t.Errorf("libstdcxx_min = the sysroot's: %s", why)
	}
}

// pkg-config in a cross (or sysroot) build searches installed/ only: with
// the plan's PKG_CONFIG_LIBDIR the real pkg-config finds the build
// machine's zlib.pc no more, and finds installed/'s.
func TestPkgConfigSearchesInstalledOnly(t *testing.T) {
	in := corpusInputs(t, "kunpeng920", []string{"gflags"}, nil)
	in.Toolchain.Cross = true
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	var libdir string
	for _, e := range p.Toolchain.Env {
		if v, ok := strings.CutPrefix(e, "PKG_CONFIG_LIBDIR="); ok {
			libdir = v
		}
	}
	if libdir == "" || strings.Contains(libdir, "/usr/") {
		t.Fatalf("PKG_CONFIG_LIBDIR=%q", libdir)
	}
	if _, err := exec.LookPath("pkg-config"); err != nil {
		t.Skip("pkg-config not installed")
	}
	if err := exec.Command("pkg-config", "--exists", "zlib").Run(); err != nil {
		t.Skip("the build machine has no zlib.pc to leak (apt-get install zlib1g-dev)")
	}
	src := t.TempDir()
	libdir = strings.ReplaceAll(libdir, SRC, src)
	pc := func() (string, error) {
		cmd := exec.Command("pkg-config", "--cflags", "zlib")
		cmd.Env = append(os.Environ(), "PKG_CONFIG_LIBDIR="+libdir, "PKG_CONFIG_PATH=")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := pc(); err == nil {
		t.Errorf("pkg-config found the build machine's zlib: %q", out)
	}
	dir := filepath.Join(src, "thirdparty", "installed", "lib64", "pkgconfig")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "zlib.pc"), []byte("prefix="+filepath.Join(src, "thirdparty", "installed")+"\nName: zlib\nDescription: z\nVersion: 1.2.11\nCflags: -I${prefix}/include\n"), 0o644)
	if out, err := pc(); err != nil || out != "-I"+filepath.Join(src, "thirdparty", "installed", "include") {
		t.Errorf("installed/'s zlib: %q, %v", out, err)
	}
}
