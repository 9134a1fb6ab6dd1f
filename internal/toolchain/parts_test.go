package toolchain

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/memo"
	"github.com/dorisarm/dorisarm/internal/source"
)

// A compiler shaped like Debian's clang-16 and GCC at once: a driver whose
// --version banner is in a shared library it loads through RUNPATH
// $ORIGIN/../lib (clang's is in libclang-cpp), and which names a program
// in ../libexec when asked -print-prog-name= (GCC's cc1plus), or the bare
// name when there is none, as GCC does.
const fakeDriverC = `#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <libgen.h>
extern const char *fake_banner(void);
int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		printf("%s\n", fake_banner());
		return 0;
	}
	if (argc > 1 && strncmp(argv[1], "-print-prog-name=", 17) == 0) {
		char self[4096], path[8192];
		ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
		if (n < 0) return 1;
		self[n] = 0;
		snprintf(path, sizeof path, "%s/../libexec/%s", dirname(self), argv[1] + 17);
		puts(access(path, X_OK) == 0 ? path : argv[1] + 17);
		return 0;
	}
	return 2;
}
`

// needCC skips the test on a machine without a host C compiler.
func needCC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no host C compiler (cc) to make the test's programs with")
	}
}

// compile runs the C compiler named with args, failing the test with its
// output.
func compile(t *testing.T, compiler string, args ...string) {
	t.Helper()
	if out, err := exec.Command(compiler, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", compiler, args, err, out)
	}
}

// cSource writes text as name in a new temporary directory and returns
// its path.
func cSource(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fakeBannerLib(t *testing.T, dir, version string) {
	t.Helper()
	src := cSource(t, "banner.c", `const char *fake_banner(void) { return "Fake clang version `+version+`"; }`)
	// Written beside and renamed over, as a package upgrade does.
	tmp := filepath.Join(dir, ".libfakecc.so.1.new")
	compile(t, "cc", "-shared", "-fPIC", "-Wl,-soname,libfakecc.so.1", "-o", tmp, src)
	if err := os.Rename(tmp, filepath.Join(dir, "libfakecc.so.1")); err != nil {
		t.Fatal(err)
	}
}

func fakeCompiler(t *testing.T) (home string) {
	t.Helper()
	needCC(t)
	home = t.TempDir()
	for _, d := range []string{"bin", "lib", "libexec"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fakeBannerLib(t, filepath.Join(home, "lib"), "16.0.6")
	lib := filepath.Join(home, "lib")
	compile(t, "cc", "-o", filepath.Join(home, "bin", "fakecc"), cSource(t, "driver.c", fakeDriverC), "-L"+lib, "-l:libfakecc.so.1",
		"-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib")
	if err := os.WriteFile(filepath.Join(home, "libexec", "cc1plus"), []byte("#!/bin/sh\n# compiler proper, first build\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return home
}

// TestIdentityFollowsCompilerParts: the identity of a compiler whose
// version and code are in a shared library changes when the library does
// (an upgrade of libclang-cpp under an unchanged launcher), its --version
// is read again instead of answered from the memo, and a program the
// driver runs counts with its bytes, or as absent.
func TestIdentityFollowsCompilerParts(t *testing.T) {
	home := fakeCompiler(t)
	driver := filepath.Join(home, "bin", "fakecc")
	parts := matrix.CompilerIdentity{Programs: []string{"cc1plus", "lto1"}, Libs: []string{"libfakecc.so*"}}
	m := memo.Dir(t.TempDir())

	a, err := identify(driver, parts, m)
	if err != nil {
		t.Fatal(err)
	}
	if a.Version != "16.0.6" {
		t.Fatalf("version %q from banner %q, want 16.0.6", a.Version, a.Banner)
	}
	if !source.ValidDigest(a.Parts["lib libfakecc.so.1"]) || !source.ValidDigest(a.Parts["program cc1plus"]) || a.Parts["program lto1"] != "absent" {
		t.Fatalf("parts %v: want the library and cc1plus by digest, lto1 absent", a.Parts)
	}
	for k := range a.Parts {
		if strings.Contains(k, "libc.so") {
			t.Errorf("part %s: the C library the compiler runs on is not part of it", k)
		}
	}

	// The launcher's bytes stay; the library under it is upgraded.
	fakeBannerLib(t, filepath.Join(home, "lib"), "16.0.7")
	b, err := identify(driver, parts, m)
	if err != nil {
		t.Fatal(err)
	}
	if b.Digest != a.Digest {
		t.Fatal("the driver changed: the test shows nothing")
	}
	if b.Version != "16.0.7" {
		t.Errorf("after the library's upgrade the version is %q (banner %q): the memo answered for the old compiler", b.Version, b.Banner)
	}
	if b.Parts["lib libfakecc.so.1"] == a.Parts["lib libfakecc.so.1"] {
		t.Error("the upgraded library kept its digest in the identity")
	}

	// The compiler proper changes; then the driver finds an lto1.
	if err := os.WriteFile(filepath.Join(home, "libexec", "cc1plus"), []byte("#!/bin/sh\n# compiler proper, second build\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := identify(driver, parts, m)
	if err != nil {
		t.Fatal(err)
	}
	if c.Parts["program cc1plus"] == b.Parts["program cc1plus"] {
		t.Error("a rewritten cc1plus kept its digest in the identity (the stat memo answered for old bytes)")
	}
	if err := os.WriteFile(filepath.Join(home, "libexec", "lto1"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := identify(driver, parts, m)
	if err != nil {
		t.Fatal(err)
	}
	// "Not found" is not remembered: the driver finds the program now.
	if !source.ValidDigest(d.Parts["program lto1"]) {
		t.Errorf("lto1, installed, recorded as %q", d.Parts["program lto1"])
	}

	// Without a memo, the same answers.
	e, err := identify(driver, parts, "")
	if err != nil {
		t.Fatal(err)
	}
	if e.Version != "16.0.7" || e.Parts["program cc1plus"] != c.Parts["program cc1plus"] || e.Parts["lib libfakecc.so.1"] != b.Parts["lib libfakecc.so.1"] {
		t.Errorf("without a memo: %s %v", e.Version, e.Parts)
	}
}

// TestScriptDriverHasNoLibraries: a driver that is a script (a wrapper)
// has no shared libraries of its own; its identity is its bytes.
func TestScriptDriverHasNoLibraries(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cc")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho 'clang version 16.0.6'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := identify(p, matrix.CompilerIdentity{Libs: []string{"libLLVM*"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(id.Parts) != 0 || id.Version != "16.0.6" {
		t.Errorf("identity %+v", id)
	}
}

// TestRealClangParts: on this machine's Debian clang-16 the launcher's
// libraries are found where the loader finds them (libclang-cpp through
// RUNPATH $ORIGIN/../lib, libLLVM in the multiarch directory).
func TestRealClangParts(t *testing.T) {
	p, err := exec.LookPath("clang-16")
	if err != nil {
		t.Skip("clang-16 not installed (scripts/install-deps.sh installs it)")
	}
	id, err := identify(p, matrix.CompilerIdentity{Libs: []string{"libclang-cpp.so*", "libLLVM*.so*"}}, memo.Dir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range id.Parts {
		names = append(names, k)
	}
	if !strings.Contains(strings.Join(names, " "), "lib libclang-cpp.so") || !strings.Contains(strings.Join(names, " "), "lib libLLVM") {
		t.Errorf("clang-16's parts %v: want libclang-cpp and libLLVM", names)
	}
}

// TestProgNameFollowsTheInstall: two copies of one relocatable toolchain
// (same driver bytes, each its own cc1plus) each count their own program,
// also after the first copy is gone; a memo keyed by the driver's digest
// alone gave the second the first's cc1plus.
func TestProgNameFollowsTheInstall(t *testing.T) {
	a := fakeCompiler(t)
	m := memo.Dir(t.TempDir())
	parts := matrix.CompilerIdentity{Programs: []string{"cc1plus"}}
	clone := func(name, cc1plus string) string {
		t.Helper()
		dst := filepath.Join(t.TempDir(), name)
		if out, err := exec.Command("cp", "-a", a, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		if err := os.WriteFile(filepath.Join(dst, "libexec", "cc1plus"), []byte(cc1plus), 0o755); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	check := func(home string) {
		t.Helper()
		id, err := identify(filepath.Join(home, "bin", "fakecc"), parts, m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := source.FileDigest(filepath.Join(home, "libexec", "cc1plus"))
		if err != nil {
			t.Fatal(err)
		}
		if got := id.Parts["program cc1plus"]; got != want {
			t.Errorf("%s: cc1plus counted as %s, want its own %s", home, got, want)
		}
	}
	check(a)
	b := clone("b", "#!/bin/sh\n# the second copy's compiler proper\n")
	check(b)
	c := clone("c", "#!/bin/sh\n# the third copy's\n")
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	check(c)
}

// TestClosurePassesOverOtherMachines: as the loader does, a library of the
// right name built for another machine (an arm64 multiarch copy earlier
// on the search path) is passed over for the one the program can load.
func TestClosurePassesOverOtherMachines(t *testing.T) {
	home := fakeCompiler(t)
	if _, err := exec.LookPath("aarch64-linux-gnu-gcc"); err != nil {
		t.Skip("no aarch64-linux-gnu-gcc to make an arm64 library with (scripts/install-deps.sh)")
	}
	arm := filepath.Join(home, "arm")
	if err := os.MkdirAll(arm, 0o755); err != nil {
		t.Fatal(err)
	}
	compile(t, "aarch64-linux-gnu-gcc", "-shared", "-fPIC", "-Wl,-soname,libfakecc.so.1", "-o", filepath.Join(arm, "libfakecc.so.1"),
		cSource(t, "banner.c", `const char *fake_banner(void) { return "arm64"; }`))
	// The driver again, with the arm64 directory first on its RUNPATH.
	prog := filepath.Join(home, "bin", "fakecc2")
	compile(t, "cc", "-o", prog, cSource(t, "driver.c", fakeDriverC), "-L"+filepath.Join(home, "lib"), "-l:libfakecc.so.1",
		"-Wl,--enable-new-dtags,-rpath,$ORIGIN/../arm:$ORIGIN/../lib")
	if out, err := exec.Command(prog, "--version").CombinedOutput(); err != nil || !strings.Contains(string(out), "16.0.6") {
		t.Fatalf("the loader did not pass over the arm64 library itself: %v %s", err, out)
	}
	libs, err := sharedClosure(prog, libraryDirs())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := libs["libfakecc.so.1"], filepath.Join(home, "lib", "libfakecc.so.1"); got != want {
		t.Errorf("libfakecc.so.1 resolved to %q, want the loadable %q", got, want)
	}
	for name, p := range libs {
		if strings.Contains(p, "aarch64") || strings.HasPrefix(p, arm) {
			t.Errorf("%s resolved to %s, an arm64 file", name, p)
		}
	}
}

// TestClosureInheritsRPATH: a library found through the program's DT_RPATH
// finds its own needs there too (the loader searches the RPATH of every
// object up the chain), and one found through DT_RUNPATH does not (the
// program then does not start, and the library is left out).
func TestClosureInheritsRPATH(t *testing.T) {
	needCC(t)
	cc := func(args ...string) { t.Helper(); compile(t, "cc", args...) }
	write := func(name, text string) string { t.Helper(); return cSource(t, name, text) }
	inner := write("inner.c", "int inner(void) { return 7; }\n")
	outer := write("outer.c", "int inner(void);\nint outer(void) { return inner(); }\n")
	main := write("main.c", "int outer(void);\nint main(void) { return outer() == 7 ? 0 : 1; }\n")
	for _, c := range []struct {
		dtags string
		loads bool
	}{{"--disable-new-dtags", true}, {"--enable-new-dtags", false}} {
		home := t.TempDir()
		lib, bin := filepath.Join(home, "lib"), filepath.Join(home, "bin")
		os.MkdirAll(lib, 0o755)
		os.MkdirAll(bin, 0o755)
		cc("-shared", "-fPIC", "-o", filepath.Join(lib, "libinner.so"), inner)
		cc("-shared", "-fPIC", "-o", filepath.Join(lib, "libouter.so"), outer, "-L"+lib, "-linner")
		prog := filepath.Join(bin, "prog")
		cc("-o", prog, main, "-L"+lib, "-louter", "-Wl,-rpath-link,"+lib, "-Wl,"+c.dtags+",-rpath,$ORIGIN/../lib")
		runs := exec.Command(prog).Run() == nil
		if runs != c.loads {
			t.Fatalf("%s: the program runs: %v, want %v (the loader's own answer)", c.dtags, runs, c.loads)
		}
		libs, err := sharedClosure(prog, libraryDirs())
		if err != nil {
			t.Fatal(err)
		}
		if libs["libouter.so"] != filepath.Join(lib, "libouter.so") {
			t.Errorf("%s: libouter.so resolved to %q", c.dtags, libs["libouter.so"])
		}
		if got := libs["libinner.so"]; (got == filepath.Join(lib, "libinner.so")) != c.loads {
			t.Errorf("%s: libinner.so resolved to %q; the loader finds it: %v", c.dtags, got, c.loads)
		}
	}
}

// TestClosureOriginOfASymlinkedLibrary: a library reached through a
// symlink expands $ORIGIN to the directory it was found in, as the loader
// does, not to its target's.
func TestClosureOriginOfASymlinkedLibrary(t *testing.T) {
	needCC(t)
	cc := func(args ...string) { t.Helper(); compile(t, "cc", args...) }
	home := t.TempDir()
	x, y, bin := filepath.Join(home, "X"), filepath.Join(home, "Y"), filepath.Join(home, "bin")
	for _, d := range []string{filepath.Join(x, "inner"), y, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, text string) string { t.Helper(); return cSource(t, name, text) }
	cc("-shared", "-fPIC", "-o", filepath.Join(x, "inner", "libinner.so"), write("inner.c", "int inner(void) { return 7; }\n"))
	cc("-shared", "-fPIC", "-o", filepath.Join(y, "libouter.so"), write("outer.c", "int inner(void);\nint outer(void) { return inner(); }\n"),
		"-L"+filepath.Join(x, "inner"), "-linner", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/inner")
	if err := os.Symlink("../Y/libouter.so", filepath.Join(x, "libouter.so")); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(bin, "prog")
	cc("-o", prog, write("main.c", "int outer(void);\nint main(void) { return outer() == 7 ? 0 : 1; }\n"),
		"-L"+x, "-louter", "-Wl,-rpath-link,"+filepath.Join(x, "inner"), "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../X")
	if out, err := exec.Command(prog).CombinedOutput(); err != nil {
		t.Fatalf("the program does not start, so the loader disagrees with the test's premise: %v %s", err, out)
	}
	libs, err := sharedClosure(prog, libraryDirs())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := libs["libinner.so"], filepath.Join(x, "inner", "libinner.so"); got != want {
		t.Errorf("libinner.so resolved to %q, want %q (through the symlink's $ORIGIN)", got, want)
	}
	if got, want := libs["libouter.so"], filepath.Join(y, "libouter.so"); got != want {
		t.Errorf("libouter.so counted as %q, want the file it links to, %q", got, want)
	}
}
