package plan

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/sample"
)

// fakeClang is a clang installation of scripts: what planning reads of a
// compiler is its binaries' bytes and its --version banner.
func fakeClang(t *testing.T, cc *matrix.Compiler, extra string) string {
	t.Helper()
	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho 'Debian clang version 16.0.6 (15~deb12u1)'\n"
	names := []string{cc.CC, cc.CXX}
	for _, n := range cc.Tools {
		names = append(names, n)
	}
	for _, n := range names {
		body := script
		if n == cc.CC {
			body += extra
		}
		if err := os.WriteFile(filepath.Join(bin, n), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// fakeLauncherClang is a clang installation like Debian's clang-16: an
// ELF launcher (cc) whose code and banner are in lib/libclang-cpp.so.16,
// found through RUNPATH $ORIGIN/../lib. libNote varies the library's
// bytes, not the launcher's.
func fakeLauncherClang(t *testing.T, cc *matrix.Compiler, libNote string) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no host C compiler (cc) to make the fake compiler with")
	}
	home := fakeClang(t, cc, "")
	lib := filepath.Join(home, "lib")
	src := t.TempDir()
	files := map[string]string{
		"lib.c":  `const char *banner(void) { return "Debian clang version 16.0.6 (15~deb12u1)"; } const char *note = "` + libNote + `";`,
		"main.c": "#include <stdio.h>\nextern const char *banner(void);\nint main(void) { puts(banner()); return 0; }\n",
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(src, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-Wl,-soname,libclang-cpp.so.16", "-o", filepath.Join(lib, "libclang-cpp.so.16"), filepath.Join(src, "lib.c")},
		{"-o", filepath.Join(home, "bin", cc.CC), filepath.Join(src, "main.c"), "-L" + lib, "-l:libclang-cpp.so.16", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib"},
	} {
		if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %v: %v\n%s", args, err, out)
		}
	}
	return home
}

// usersOf are the steps that are in ids or need one of them, directly or
// through others.
func usersOf(p *Plan, ids map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, s := range p.Steps { // needs come first in a plan
		if ids[s.ID] {
			out[s.ID] = true
		}
		for _, n := range s.Needs {
			if out[n] {
				out[s.ID] = true
			}
		}
	}
	return out
}

// A plan's keys rest on content digests: another compiler binary changes
// exactly the toolchain step, the steps that compile and what needs them;
// another sysroot spec (a Debian package pinned to another version)
// exactly the sysroot step and what needs it. Fetching, unpacking and
// patching keep their keys, so their cached results stay good.
func TestPlanKeysFollowDigests(t *testing.T) {
	f := load(t, "")
	cc := f.Matrix.Compilers["clang"]
	if cc == nil || cc.HomeEnv == "" {
		t.Fatal("matrix.yaml's clang has no home_env: the facts this test is about are gone")
	}
	cache := t.TempDir()
	planFor := func(home string) *Plan {
		t.Helper()
		t.Setenv(cc.HomeEnv, home)
		ps, err := ForTargets(context.Background(), Request{Matrix: f.Matrix, Targets: "graviton3", Tree: f.Tree, Recipe: f.Recipe,
			Compiler: "clang", SysrootCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		return ps[0].Plan
	}
	a := planFor(fakeClang(t, cc, ""))
	if again := planFor(fakeClang(t, cc, "")); !sameKeys(a, again) {
		t.Fatal("two installations with the same bytes gave other keys")
	}
	b := planFor(fakeClang(t, cc, "# another build of the compiler\n"))
	compiles := map[string]bool{}
	for _, s := range a.Steps {
		if s.Kind == KindToolchain || s.Phase != "" || s.Kind == KindThirdparty || s.Kind == KindBuild {
			compiles[s.ID] = true
		}
	}
	checkChanged(t, "another compiler binary", a, b, usersOf(a, compiles))

	// The launcher's bytes stay; the library holding the compiler changes.
	a = planFor(fakeLauncherClang(t, cc, "first build"))
	b = planFor(fakeLauncherClang(t, cc, "second build"))
	if a.Toolchain.Compiler.Digest != b.Toolchain.Compiler.Digest {
		t.Fatal("the two launchers differ: the test shows nothing")
	}
	checkChanged(t, "another libclang-cpp under the same launcher", a, b, usersOf(a, compiles))

	home := fakeClang(t, cc, "")
	a = planFor(home)
	sr := f.Matrix.Sysroots["debian-11-arm64"]
	if sr == nil || sr.Debian == nil || len(sr.Debian.Packages) == 0 {
		t.Fatal("matrix.yaml's debian-11-arm64 is not a Debian sysroot: the facts this test is about are gone")
	}
	sr.Debian.Packages = append([]string{sr.Debian.Packages[0] + "=2.31-13+deb11u11"}, sr.Debian.Packages[1:]...)
	b = planFor(home)
	checkChanged(t, "another sysroot package", a, b, usersOf(a, map[string]bool{"sysroot:debian-11-arm64": true}))
}

func sameKeys(a, b *Plan) bool {
	if len(a.Steps) != len(b.Steps) {
		return false
	}
	for i := range a.Steps {
		if a.Steps[i].ID != b.Steps[i].ID || a.Steps[i].Key != b.Steps[i].Key {
			return false
		}
	}
	return true
}

func checkChanged(t *testing.T, what string, a, b *Plan, want map[string]bool) {
	t.Helper()
	for _, s := range a.Steps {
		switch s.Kind {
		case KindFetch, KindUnpack, KindPatch, KindPatchTree:
			if want[s.ID] {
				t.Errorf("%s: %s (%s) would change: it does not depend on the compiler or the sysroot", what, s.ID, s.Kind)
			}
		}
	}
	if len(want) == 0 || len(want) == len(a.Steps) {
		t.Fatalf("%s: %d of %d steps should change: the test shows nothing", what, len(want), len(a.Steps))
	}
	for _, s := range a.Steps {
		o := b.Step(s.ID)
		if o == nil {
			t.Errorf("%s: step %s is gone", what, s.ID)
			continue
		}
		if changed := o.Key != s.Key; changed != want[s.ID] {
			t.Errorf("%s: %s (%s): key changed %v, want %v", what, s.ID, s.Kind, changed, want[s.ID])
		}
	}
}

// BenchmarkPlanAllWarm plans the sample for every target on a warm
// machine (the memo holds the compilers' and scripts' answers): no process
// starts, no sysroot is made. Issue 34's bound: well under a second.
func BenchmarkPlanAllWarm(b *testing.B) {
	f := fixture{sample.Load(b, repo, "", "")}
	req := Request{Matrix: f.Matrix, Targets: "all", Tree: f.Tree, Recipe: f.Recipe, SysrootCache: b.TempDir()}
	if _, err := ForTargets(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := ForTargets(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
