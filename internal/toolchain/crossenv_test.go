package toolchain

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// crossEnv writes the compiler home of a cell and returns the environment a
// step gets (as the runner makes it) and the exec shim it runs under.
func crossEnv(t *testing.T, target, compiler string, noPreload bool) (*Toolchain, []string, []string) {
	t.Helper()
	m := repoMatrix(t)
	cell, err := m.Cell("2.1", target)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := Resolve(m, cell, Options{Compiler: compiler, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Skip(err)
	}
	f, err := tc.Flags(FlagOptions{NoLTO: true})
	if err != nil {
		t.Fatal(err)
	}
	w, err := tc.WriteWrappers(filepath.Join(t.TempDir(), "home"), f, "")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), tc.Env(w, f)...)
	env = append(env, "PATH="+filepath.Join(w.Home, "bin")+":"+os.Getenv("PATH"))
	if noPreload {
		w.ExecLib = ""
	}
	shim, err := tc.ExecShim(w, "")
	if err != nil {
		t.Fatal(err)
	}
	want := "preload"
	if noPreload {
		want = "proot"
	}
	if shim.Kind != want {
		t.Fatalf("exec shim %q, want %q", shim.Kind, want)
	}
	return tc, append(env, shim.Env...), shim.Prefix
}

func shell(t *testing.T, dir string, env, shim []string, script string) string {
	t.Helper()
	argv := append(append([]string{}, shim...), "sh", "-ec", script)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

func machineOf(t *testing.T, path string) elf.Machine {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return f.Machine
}

// What a package's native build script sees in a cross build: the target's
// machine from uname, the target's compiler and binutils under their plain
// names, the host's compiler only under its explicit names.
func TestCrossEnvironmentPlainNames(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs real compilers and llvm-objdump (make test runs it)")
	}
	needTool(t, "qemu-aarch64", "proot", "aarch64-linux-gnu-gcc", "clang-16")
	for _, c := range []struct {
		target, compiler string
		proot            bool
	}{{"kunpeng920", "clang", false}, {"graviton3", "gcc", false}, {"graviton3", "gcc", true}} {
		t.Run(fmt.Sprintf("%s/%s/proot=%v", c.target, c.compiler, c.proot), func(t *testing.T) {
			_, env, shim := crossEnv(t, c.target, c.compiler, c.proot)
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "a.c"), []byte("int a(void){return 1;}\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "m.c"), []byte("#include <stdio.h>\nint a(void);\nint main(void){printf(\"%d\\n\", a()); return 0;}\n"), 0o644)
			out := shell(t, dir, env, shim, `
uname -m; uname -p; uname -s; uname -a
gcc -O2 -c a.c -o gcc.o
cc -O2 -c a.c -o cc.o
c++ -x c++ -O2 -c a.c -o cxx.o
ld -r -o merged.o gcc.o
nm --defined-only merged.o | while read -r addr type sym; do echo "$sym ${sym}_x"; done > renames.txt
objcopy --redefine-syms=renames.txt merged.o renamed.o
ar rcs liba.a renamed.o cc.o
ranlib liba.a
readelf -h cxx.o | grep Machine
objdump -d gcc.o > /dev/null
strip -o stripped.o gcc.o
cc m.c a.c -o prog
./prog
$CC_FOR_BUILD m.c a.c -o hostprog
./hostprog
`)
			lines := strings.Split(out, "\n")
			if lines[0] != "aarch64" || lines[1] != "aarch64" || lines[2] != "Linux" || !strings.Contains(lines[3], "aarch64") {
				t.Errorf("uname answers %q", lines[:4])
			}
			if !strings.Contains(out, "AArch64") {
				t.Errorf("readelf did not read the target object: %s", out)
			}
			for _, f := range []string{"gcc.o", "cc.o", "cxx.o", "merged.o", "renamed.o", "stripped.o", "prog"} {
				if m := machineOf(t, filepath.Join(dir, f)); m != elf.EM_AARCH64 {
					t.Errorf("%s is for %v, want AArch64", f, m)
				}
			}
			if m := machineOf(t, filepath.Join(dir, "hostprog")); m != elf.EM_X86_64 {
				t.Errorf("CC_FOR_BUILD made a program for %v, want the host's", m)
			}
			ones := 0
			for _, l := range lines {
				if l == "1" {
					ones++
				}
			}
			if ones != 2 {
				t.Errorf("the target program (under qemu) and the host program did not both run: %s", out)
			}
			if syms, _ := exec.Command("aarch64-linux-gnu-nm", filepath.Join(dir, "liba.a")).Output(); !strings.Contains(string(syms), "a_x") {
				t.Errorf("objcopy --redefine-syms did not rename: %s", syms)
			}
		})
	}
}

// An autotools package configures as a cross build for the target (it never
// fails with "cannot run C compiled programs"), and a program it builds and
// runs during the build runs under qemu.
func TestCrossEnvironmentAutotools(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs real compilers and llvm-objdump (make test runs it)")
	}
	needTool(t, "qemu-aarch64", "proot", "aarch64-linux-gnu-gcc", "autoreconf", "automake", "make")
	for _, c := range []struct{ target, compiler string }{{"graviton3", "gcc"}, {"kunpeng920", "clang"}} {
		t.Run(c.target+"/"+c.compiler, func(t *testing.T) {
			_, env, shim := crossEnv(t, c.target, c.compiler, false)
			src := t.TempDir()
			if out, err := exec.Command("cp", "-r", "testdata/autoprobe/.", src).CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			if out, err := exec.Command("sh", "-c", "cd "+src+" && autoreconf -fi").CombinedOutput(); err != nil {
				t.Fatalf("autoreconf: %v\n%s", err, out)
			}
			shell(t, src, env, shim, "./configure --prefix=/opt/x >configure.out 2>&1 || { cat configure.out; exit 1; }; make >/dev/null; make run")
			log, _ := os.ReadFile(filepath.Join(src, "config.log"))
			if !regexp.MustCompile(`checking whether we are cross compiling\n[^\n]*result: yes`).Match(log) || !strings.Contains(string(log), "host='aarch64-unknown-linux-gnu'") {
				t.Errorf("configure did not run as a cross build for aarch64 (config.log)")
			}
			run, _ := os.ReadFile(filepath.Join(src, "run.out"))
			if got := strings.Fields(string(run)); strings.Join(got, " ") != "aarch64 42 aarch64 aarch64" {
				t.Errorf("run.out %q, want the target program's output, uname and host_cpu", got)
			}
			if m := machineOf(t, filepath.Join(src, "autoprobe")); m != elf.EM_AARCH64 {
				t.Errorf("autoprobe is for %v", m)
			}
		})
	}
}

// The exec shim never lets the build machine run what is meant for the
// target: a script whose "#!" interpreter is a target program runs under
// the emulator from bash, dash, make and env (their fallback on a failed
// exec runs the script with a host shell); a target program started after
// env -i runs under the emulator; an emulator command of many words is
// passed whole.
func TestExecShimFollowsShebangs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a cross compiler and qemu (make test runs it)")
	}
	needTool(t, "qemu-aarch64", "aarch64-linux-gnu-gcc", "make", "dash", "bash")
	_, env, shim := crossEnv(t, "graviton3", "gcc", false)
	dir := t.TempDir()
	// A target "interpreter" that prints its arguments and one variable the
	// emulator sets (-E, the last words of a long emulator command).
	os.WriteFile(filepath.Join(dir, "interp.c"), []byte(`#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
	printf("target-interp");
	for (int i = 1; i < argc; i++) printf(" %s", argv[i]);
	const char *v = getenv("DORISARM_LAST");
	printf(" last=%s\n", v ? v : "unset");
	return 0;
}
`), 0o644)
	shell(t, dir, env, shim, "cc -O1 interp.c -o interp")
	os.WriteFile(filepath.Join(dir, "s.sh"), []byte("#!"+filepath.Join(dir, "interp")+" -x\necho HOST-RAN-THE-SCRIPT\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "Makefile"), []byte("all:\n\t./s.sh from-make\n"), 0o644)
	// More than 16 words of emulator command: a few -E settings at the end.
	for i, kv := range env {
		if strings.HasPrefix(kv, "DORISARM_EXEC_EMULATOR=") {
			for j := 0; j < 10; j++ {
				kv += fmt.Sprintf(" -E DORISARM_W%d=%d", j, j)
			}
			env[i] = kv + " -E DORISARM_LAST=seen"
		}
	}
	out := shell(t, dir, env, shim, `
bash -c './s.sh from-bash'
dash -c './s.sh from-dash'
make -s
env ./s.sh from-env
env -i ./interp after-env-i
`)
	if strings.Contains(out, "HOST-RAN-THE-SCRIPT") {
		t.Errorf("a host shell ran the target-interpreted script:\n%s", out)
	}
	for _, want := range []string{
		"target-interp -x ./s.sh from-bash last=seen",
		"target-interp -x ./s.sh from-dash last=seen",
		"target-interp -x ./s.sh from-make last=seen",
		"target-interp -x ./s.sh from-env last=seen",
		"target-interp after-env-i last=seen",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestExecShim(t *testing.T) {
	m := repoMatrix(t)
	cell, _ := m.Cell("2.1", "graviton3")
	tc := &Toolchain{Cell: cell, Cross: true}
	dir := t.TempDir()
	lib := filepath.Join(dir, "dorisarm-exec.so")
	os.WriteFile(lib, nil, 0o644)
	w := &Wrappers{ExecLib: lib}
	// binfmt_misc hands qemu-aarch64 the target's programs: nothing to add.
	os.WriteFile(filepath.Join(dir, "qemu-aarch64"), []byte("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n"), 0o644)
	if s, err := tc.ExecShim(w, dir); err != nil || s.Kind != "binfmt_misc" || s.Prefix != nil {
		t.Errorf("with binfmt_misc: %+v %v", s, err)
	}
	os.WriteFile(filepath.Join(dir, "qemu-aarch64"), []byte("disabled\n"), 0o644)
	if _, err := exec.LookPath("qemu-aarch64"); err != nil {
		t.Skip("qemu-aarch64 not installed")
	}
	s, err := tc.ExecShim(w, dir)
	if err != nil || s.Kind != "preload" || !strings.Contains(strings.Join(s.Env, " "), "LD_PRELOAD="+lib) || !strings.Contains(strings.Join(s.Env, " "), "-cpu "+cell.Qemu.Name) {
		t.Errorf("with the exec shim: %+v %v", s, err)
	}
	if _, err := exec.LookPath("proot"); err == nil {
		s, err := tc.ExecShim(&Wrappers{}, dir)
		if err != nil || s.Kind != "proot" || len(s.Prefix) != 3 || !strings.Contains(s.Prefix[2], "-cpu "+cell.Qemu.Name) {
			t.Errorf("without the exec shim: %+v %v", s, err)
		}
	}
	old := lookPath
	lookPath = func(n string) (string, error) {
		if n == "proot" {
			return "", os.ErrNotExist
		}
		return old(n)
	}
	defer func() { lookPath = old }()
	if _, err := tc.ExecShim(&Wrappers{}, dir); err == nil || !strings.Contains(err.Error(), "apt-get install proot") {
		t.Errorf("neither shim: %v", err)
	}
	tc.Cross = false
	if s, err := tc.ExecShim(w, dir); err != nil || s.Kind != "" || s.Env != nil {
		t.Errorf("native: %+v %v", s, err)
	}
}

// Writing a home again, for another dialect, never writes through what the
// first write left: a gcc home links bin/as to the real assembler, a clang
// home writes a script named as.
func TestRewrittenHomeNeverWritesThroughLinks(t *testing.T) {
	m := repoMatrix(t)
	cell, _ := m.Cell("2.1", "kunpeng920")
	dir := t.TempDir()
	fakeAs := filepath.Join(dir, "real-as")
	os.WriteFile(fakeAs, []byte("#!/bin/sh\necho the real assembler\n"), 0o755)
	gcc := &Toolchain{Cell: cell, Compiler: m.Compilers["gcc"], CC: "/bin/true", CXX: "/bin/true", Tools: map[string]string{"as": fakeAs}, Host: m.ISAs[HostISA()]}
	clang := &Toolchain{Cell: cell, Compiler: m.Compilers["clang"], CC: "/bin/true", CXX: "/bin/true", Tools: map[string]string{}, Host: m.ISAs[HostISA()]}
	home := filepath.Join(dir, "home")
	for _, tc := range []*Toolchain{gcc, clang, gcc} {
		tc.Cross = true
		if _, err := tc.WriteWrappers(home, Flags{}, ""); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(fakeAs); string(b) != "#!/bin/sh\necho the real assembler\n" {
			t.Fatalf("the %s home wrote through bin/as into the real tool: %q", tc.Compiler.Name, b)
		}
	}
	if target, err := os.Readlink(filepath.Join(home, "bin", "as")); err != nil || target != fakeAs {
		t.Errorf("bin/as after the last (gcc) write: %q %v", target, err)
	}
}
