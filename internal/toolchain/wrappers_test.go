package toolchain

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrappersAddNoUnusedFlag drives the generated wrappers as a -Werror
// configure check does (jemalloc's): every compile, assemble and link mode
// must succeed without the driver reporting an argument unused. A C link
// gets no C++ runtime flag (clang reports -static-libstdc++ unused there),
// a compile no link flag (--ld-path), plain assembly no -frecord-* or
// profile flag, a relocatable or -nostdlib link no runtime flag.
func TestWrappersAddNoUnusedFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the real compilers")
	}
	m := repoMatrix(t)
	for _, c := range []struct{ target, compiler string }{
		// kunpeng920 has every phase (ThinLTO or LTO, PGO instrumentation);
		// x86_64 is the native case.
		{"kunpeng920", "clang"}, {"kunpeng920", "gcc"}, {"x86_64", "clang"}, {"x86_64", "gcc"},
	} {
		t.Run(c.target+"/"+c.compiler, func(t *testing.T) {
			cell, err := m.Cell("2.1", c.target)
			if err != nil {
				t.Fatal(err)
			}
			tc, err := Resolve(m, cell, Options{Compiler: c.compiler, Getenv: func(string) string { return "" }})
			if err != nil {
				t.Skip(err)
			}
			// The build machine's root stands in for a target OS sysroot
			// (Debian's cross compilers find their target libraries under
			// it): what matters here is that the sysroot's runtime flags
			// are on, not which glibc the result needs.
			tc.Sysroot = &Sysroot{Name: "build-machine", Path: "/", RunPath: "/"}
			phases := []FlagOptions{{NoLTO: true}}
			if tc.LTOMode() != "" {
				phases = append(phases, FlagOptions{})
			}
			if cell.Target.PGO {
				phases = append(phases, FlagOptions{Phase: Instrument, ProfileDir: t.TempDir()})
			}
			for _, o := range phases {
				checkNoUnusedFlag(t, tc, o)
			}
			// Again with a C++ runtime: its headers and archives (here
			// GCC 12's own headers, as a built runtime lays them out).
			tc.Runtime = fakeRuntime(t, cell.ISA.Triple)
			for _, o := range phases {
				checkNoUnusedFlag(t, tc, o)
			}
		})
	}
}

func checkNoUnusedFlag(t *testing.T, tc *Toolchain, o FlagOptions) {
	t.Helper()
	dir := t.TempDir()
	f, err := tc.Flags(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Runtime) == 0 || len(f.CXXRuntime) == 0 {
		t.Fatalf("flags with a sysroot have no runtime flags: %+v", f)
	}
	log := filepath.Join(dir, "cc.log")
	w, err := tc.WriteWrappers(filepath.Join(dir, "home"), f, log)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("h.c", "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n")
	write("h.cc", "#include <iostream>\nint main() { std::cout << \"hello\\n\"; return 0; }\n")
	write("f.c", "int f(void) { return 1; }\n")
	// Plain assembly of f.c as this compiler writes it.
	real := exec.Command(tc.CC, append(append([]string{}, f.Target...), "-S", "f.c", "-o", "f.s")...)
	real.Dir = dir
	if out, err := real.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	steps := []struct {
		cxx  bool
		args []string
	}{
		{false, []string{"-c", "h.c", "-o", "h.o"}},
		{false, []string{"h.o", "-o", "h-c"}},
		{false, []string{"h.c", "-o", "h-c1"}},
		{false, []string{"-fPIC", "-shared", "f.c", "-o", "libf.so"}},
		{false, []string{"-E", "h.c", "-o", "h.i"}},
		{false, []string{"-M", "h.c"}},
		{false, []string{"-S", "h.c", "-o", "h.s"}},
		{false, []string{"-fsyntax-only", "h.c"}},
		{false, []string{"-c", "f.s", "-o", "fs.o"}},
		{false, []string{"-c", "-x", "assembler", "f.s", "-o", "fx.o"}},
		{false, []string{"-r", "fs.o", "-o", "fr.o"}},
		{false, []string{"-nostdlib", "-shared", "fs.o", "-o", "libn.so"}},
		{false, []string{"-print-file-name=libc.so"}},
		{false, []string{"--version"}},
		{false, []string{"-v"}},
		{false, []string{"-dumpmachine"}},
		{true, []string{"-c", "h.cc", "-o", "hx.o"}},
		{true, []string{"hx.o", "-o", "h-cxx"}},
		{true, []string{"h.cc", "-o", "h-cxx1"}},
	}
	if tc.Compiler.Dialect == "clang" {
		steps = append(steps, struct {
			cxx  bool
			args []string
		}{true, []string{"-nostdlib++", "h.o", "-o", "h-nolibcxx"}}) // GCC has no -nostdlib++
	}
	for _, s := range steps {
		drv := w.CC
		if s.cxx {
			drv = w.CXX
		}
		args := append([]string{"-Werror", "-Wunused-command-line-argument"}, s.args...)
		switch {
		case len(s.args) == 1:
			// A query: clang reports even -Werror unused there; its
			// output must still name no unused argument.
			args = s.args
		case tc.Compiler.Dialect != "clang":
			args = append([]string{"-Werror"}, s.args...) // GCC has no such warning; -Werror still holds
		}
		cmd := exec.Command(drv, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "unused") {
			logged, _ := os.ReadFile(log)
			t.Errorf("%s %s (phase %s): %v\n%s\nas run:\n%s", filepath.Base(drv), strings.Join(args, " "), o.Phase, err, out, lastLine(string(logged)))
		}
	}
	// What each link got, as the wrapper ran it.
	logged, _ := os.ReadFile(log)
	for _, line := range strings.Split(strings.TrimSpace(string(logged)), "\n") {
		switch {
		case strings.Contains(line, " -o h-c ") || strings.HasSuffix(line, " -o h-c1 -static-libgcc") || strings.Contains(line, " -o h-c1 "):
			if strings.Contains(line, "-static-libstdc++") {
				t.Errorf("C link got the C++ runtime flag: %s", line)
			}
			if !strings.Contains(line, "-static-libgcc") {
				t.Errorf("C link lost -static-libgcc: %s", line)
			}
		case strings.Contains(line, " -o h-cxx "):
			if !strings.Contains(line, "-static-libstdc++") || !strings.Contains(line, "-static-libgcc") {
				t.Errorf("C++ link lacks the static runtime flags: %s", line)
			}
		case strings.Contains(line, " -c h.c "):
			if strings.Contains(line, "-static-lib") || strings.Contains(line, "--ld-path") {
				t.Errorf("compile got link flags: %s", line)
			}
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestRuntimeFlagsWhereTheyBelong: with a C++ runtime, the C++ driver's
// compiles read its headers first (-nostdinc++ and its include
// directories) and every link its archives (-L); a C compile, an
// assembly and a compile's link-free run get neither.
func TestRuntimeFlagsWhereTheyBelong(t *testing.T) {
	m := repoMatrix(t)
	cell, err := m.Cell("2.1", "graviton3")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// "Compilers" that print the arguments they were given.
	echo := filepath.Join(dir, "echo-args")
	if err := os.WriteFile(echo, []byte("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tc := &Toolchain{Cell: cell, Compiler: m.Compilers["gcc"], CC: echo, CXX: echo, Tools: map[string]string{},
		Sysroot: &Sysroot{Name: "s", Path: "/sysroot"}, Runtime: &Runtime{Name: "gcc-12", Libstdcxx: "12", Path: "/rt"}}
	f, err := tc.Flags(FlagOptions{NoLTO: true})
	if err != nil {
		t.Fatal(err)
	}
	w, err := tc.WriteWrappers(filepath.Join(dir, "home"), f, "")
	if err != nil {
		t.Fatal(err)
	}
	args := func(driver string, a ...string) string {
		b, err := exec.Command(driver, a...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", driver, a, err, b)
		}
		return "\n" + string(b)
	}
	inc := "\n-isystem\n/rt/include/c++/12\n-isystem\n/rt/include/c++/12/aarch64-linux-gnu\n-isystem\n/rt/include/c++/12/backward\n"
	for _, c := range []struct {
		name          string
		got           string
		headers, libs bool
	}{
		{"c++ compile", args(w.CXX, "-c", "x.cc"), true, false},
		{"c++ link", args(w.CXX, "x.o", "-o", "x"), false, true},
		{"c++ compile and link", args(w.CXX, "x.cpp", "-o", "x"), true, true},
		{"c++ from standard input", args(w.CXX, "-E", "-x", "c++", "-"), true, false},
		{"cc compile", args(w.CC, "-c", "x.c"), false, false},
		{"cc link", args(w.CC, "x.o", "-o", "x"), false, true},
		{"c++ assembly", args(w.CXX, "-c", "x.s"), false, false},
		{"c++ question", args(w.CXX, "-dumpmachine"), false, false},
	} {
		if h := strings.Contains(c.got, "\n-nostdinc++\n") && strings.Contains(c.got, inc); h != c.headers {
			t.Errorf("%s: runtime headers %v, want %v:%s", c.name, h, c.headers, c.got)
		}
		if l := strings.Contains(c.got, "\n-L/rt/lib\n"); l != c.libs {
			t.Errorf("%s: runtime archives %v, want %v:%s", c.name, l, c.libs, c.got)
		}
	}
}

// fakeRuntime lays out the installed GCC 12's C++ headers for triple as
// a built runtime has them (include/c++/12 with the triple's directory
// inside), and an empty lib/.
func fakeRuntime(t *testing.T, triple string) *Runtime {
	t.Helper()
	dir := t.TempDir()
	inc := filepath.Join(dir, "include", "c++", "12")
	if err := os.MkdirAll(inc, 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "lib"), 0o755)
	var found bool
	for _, d := range []string{"/usr/" + triple + "/include/c++/12", "/usr/include/c++/12"} {
		es, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range es {
			os.Symlink(filepath.Join(d, e.Name()), filepath.Join(inc, e.Name()))
		}
		found = true
		break
	}
	if _, err := os.Stat(filepath.Join(inc, triple)); err != nil {
		os.Symlink(filepath.Join("/usr/include", triple, "c++", "12"), filepath.Join(inc, triple))
	}
	if !found {
		t.Skipf("no GCC 12 C++ headers for %s installed", triple)
	}
	return &Runtime{Name: "gcc-12", Libstdcxx: "12", Path: dir}
}

// TestProbeKeyNamesTheRuntimeByKey: the sysroot check's verdict is keyed
// before the runtime is made and looked up after: where the runtime is
// does not change the key, which runtime does.
func TestProbeKeyNamesTheRuntimeByKey(t *testing.T) {
	m := repoMatrix(t)
	cell, err := m.Cell("2.1", "generic-armv8")
	if err != nil {
		t.Fatal(err)
	}
	tc := &Toolchain{Cell: cell, Compiler: m.Compilers["gcc"], CC: "/usr/bin/gcc", CXX: "/usr/bin/g++", Tools: map[string]string{},
		Sysroot: &Sysroot{Name: "s", Key: "k"}, Runtime: &Runtime{Name: "gcc-12", Libstdcxx: "12", Key: "r1"}}
	planned, err := tc.ProbeKey()
	if err != nil {
		t.Fatal(err)
	}
	tc.Runtime.Path = "/work/cell/toolchain/cxxrt"
	if made, _ := tc.ProbeKey(); made != planned {
		t.Error("the probe key changed when the runtime was made")
	}
	tc.Runtime.Key = "r2"
	if other, _ := tc.ProbeKey(); other == planned {
		t.Error("another runtime, the same probe key")
	}
}
