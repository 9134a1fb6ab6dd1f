package toolchain

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
)

func repoMatrix(t *testing.T) *matrix.Matrix {
	t.Helper()
	m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// featureMacros maps the extensions the probe reports to whether a cell enables them.
var probeFeatures = []string{"sve", "sve2", "dotprod", "crc", "lse", "aes", "fp16", "i8mm", "bf16"}

func needTool(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s not installed (run scripts/install-deps.sh)", n)
		}
	}
}

type built struct {
	tc  *Toolchain
	w   *Wrappers
	bin string
	out string // compiler output
}

func buildProbe(t *testing.T, tc *Toolchain, dir string, o FlagOptions, extraEnv ...string) built {
	t.Helper()
	f, err := tc.Flags(o)
	if err != nil {
		t.Fatal(err)
	}
	w, err := tc.WriteWrappers(filepath.Join(dir, "home"), f, filepath.Join(dir, "cc.log"))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs(filepath.Join("testdata", "probe.c"))
	bin := filepath.Join(dir, "probe")
	// Compile and link separately, as real builds do, so link-only flags are exercised.
	var out bytes.Buffer
	for _, args := range [][]string{{"-O2", "-c", src, "-o", filepath.Join(dir, "probe.o")}, {filepath.Join(dir, "probe.o"), "-o", bin}} {
		cmd := exec.Command(w.CC, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), extraEnv...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v\n%s", w.CC, args, err, out.String())
		}
	}
	return built{tc: tc, w: w, bin: bin, out: out.String()}
}

func run(t *testing.T, tc *Toolchain, bin string, env ...string) (string, error) {
	t.Helper()
	argv := append(tc.Emulator(), bin)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestProbeEveryTargetAndCompiler compiles and links the probe for every
// target × compiler this machine has, runs it under qemu on the target's CPU
// model, and checks the compiler saw exactly the features the matrix enables.
func TestProbeEveryTargetAndCompiler(t *testing.T) {
	m := repoMatrix(t)
	for _, tn := range m.TargetNames() {
		cell, err := m.Cell("2.1", tn)
		if err != nil {
			t.Fatal(err)
		}
		for _, cn := range cell.Target.Compilers {
			t.Run(tn+"/"+cn, func(t *testing.T) {
				tc, err := Resolve(m, cell, Options{Compiler: cn})
				var miss *MissingError
				if errors.As(err, &miss) {
					if cn == "bisheng-clang" {
						t.Skip("BiSheng is not installed here; its clang code path is tested with clang-16 in TestBiShengHome")
					}
					t.Fatalf("compiler the machine should have is missing: %v", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				if tc.Cross {
					needTool(t, tc.Cell.ISA.Qemu)
				}
				dir := t.TempDir()
				b := buildProbe(t, tc, dir, FlagOptions{})
				out, err := run(t, tc, b.bin)
				if err != nil {
					t.Fatalf("probe failed under %v: %v\n%s", tc.Emulator(), err, out)
				}
				if !strings.Contains(out, "arch "+cell.ISA.Name) {
					t.Errorf("probe says %q, want arch %s", out, cell.ISA.Name)
				}
				enabled := map[string]bool{}
				for _, e := range cell.Enabled {
					enabled[e] = true
				}
				for _, feat := range probeFeatures {
					got := strings.Contains(out, "feature "+feat+"\n")
					if cell.ISA.Name != "aarch64" {
						continue
					}
					if got != enabled[feat] {
						t.Errorf("feature %s: compiler defined it = %v, matrix enables it = %v (flags %v)", feat, got, enabled[feat], tc.TargetFlags())
					}
				}
				// The flags are recorded in the binary so the scanner can read them back.
				ef, err := elf.Open(b.bin)
				if err != nil {
					t.Fatal(err)
				}
				defer ef.Close()
				if want := map[string]elf.Machine{"aarch64": elf.EM_AARCH64, "x86_64": elf.EM_X86_64}[cell.ISA.Name]; ef.Machine != want {
					t.Errorf("machine %v, want %v", ef.Machine, want)
				}
				sec := ef.Section(".GCC.command.line")
				if sec == nil {
					t.Fatalf("no .GCC.command.line section: flags not recorded")
				}
				data, _ := sec.Data()
				if !bytes.Contains(data, []byte("-march="+cell.Target.March)) {
					t.Errorf("recorded switches lack -march=%s: %q", cell.Target.March, data)
				}
				// Every invocation is logged.
				log, err := os.ReadFile(b.w.Log)
				if err != nil || strings.Count(string(log), "\n") != 2 {
					t.Errorf("wrapper log: %v\n%s", err, log)
				}
			})
		}
	}
}

// TestSVEBinaryNeedsSVEModel proves the qemu models in the matrix mean what we
// think: a graviton3 binary whose compiler emitted SVE runs under the target's
// model and dies with SIGILL under Kunpeng's model.
func TestSVEBinaryNeedsSVEModel(t *testing.T) {
	m := repoMatrix(t)
	needTool(t, "qemu-aarch64")
	cell, _ := m.Cell("2.1", "graviton3")
	tc, err := Resolve(m, cell, Options{Compiler: "gcc"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "sve.c")
	os.WriteFile(src, []byte("#include <arm_sve.h>\nint main(void){ return (int)svcntb() == 0; }\n"), 0o644)
	f, _ := tc.Flags(FlagOptions{})
	w, err := tc.WriteWrappers(filepath.Join(dir, "home"), f, "")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(w.CC, "-O2", src, "-o", filepath.Join(dir, "sve")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := run(t, tc, filepath.Join(dir, "sve")); err != nil {
		t.Fatalf("SVE binary failed under the graviton3 model: %v\n%s", err, out)
	}
	kp, _ := m.Cell("2.1", "kunpeng920")
	argv := append(tc.EmulatorAs(kp.Qemu.Name), filepath.Join(dir, "sve"))
	err = exec.Command(argv[0], argv[1:]...).Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 && ee.ExitCode() != 132 {
		t.Fatalf("SVE binary under %s: err = %v, want death by SIGILL", kp.Qemu.Name, err)
	}
}

func TestGraviton4GCC12DropsUnknownMtune(t *testing.T) {
	m := repoMatrix(t)
	cell, _ := m.Cell("2.1", "graviton4")
	tc, err := Resolve(m, cell, Options{Compiler: "gcc"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(tc.Identity.Version, "12.") {
		if len(tc.Notes) == 0 || !strings.Contains(tc.Notes[0], "-mtune=neoverse-v2 dropped") {
			t.Errorf("notes = %v", tc.Notes)
		}
		for _, f := range tc.TargetFlags() {
			if strings.HasPrefix(f, "-mtune=") {
				t.Errorf("gcc 12 got %s", f)
			}
		}
	}
	tcc, err := Resolve(m, cell, Options{Compiler: "clang"})
	if err != nil {
		t.Fatal(err)
	}
	if !contains(tcc.TargetFlags(), "-mtune=neoverse-v2") {
		t.Errorf("clang-16 flags %v lack -mtune=neoverse-v2", tcc.TargetFlags())
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestPGOAndThinLTO runs the two-phase PGO build of the kunpeng920 target with
// both compilers under qemu, then the optimized ThinLTO (clang) or -flto=auto
// (gcc) build, and checks the profile was found and used.
func TestPGOAndThinLTO(t *testing.T) {
	m := repoMatrix(t)
	needTool(t, "qemu-aarch64")
	cell, _ := m.Cell("2.1", "kunpeng920")
	for _, cn := range []string{"clang", "gcc"} {
		t.Run(cn, func(t *testing.T) {
			tc, err := Resolve(m, cell, Options{Compiler: cn})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			prof := filepath.Join(dir, "profile")
			os.MkdirAll(prof, 0o755)
			gen := buildProbe(t, tc, dir, FlagOptions{Phase: Instrument, ProfileDir: prof})
			env := []string{"LLVM_PROFILE_FILE=" + filepath.Join(prof, "%p.profraw")}
			if out, err := run(t, tc, gen.bin, env...); err != nil {
				t.Fatalf("training run: %v\n%s", err, out)
			}
			o := FlagOptions{Phase: Release, ProfileDir: prof, LTOCache: filepath.Join(dir, "lto-cache")}
			if cn == "clang" {
				raws, _ := filepath.Glob(filepath.Join(prof, "*.profraw"))
				if len(raws) == 0 {
					t.Fatal("training wrote no .profraw")
				}
				o.Profile = filepath.Join(dir, "merged.profdata")
				args := append([]string{"merge", "-o", o.Profile}, raws...)
				if out, err := exec.Command(tc.Tools["profdata"], args...).CombinedOutput(); err != nil {
					t.Fatalf("merge: %v\n%s", err, out)
				}
				show, _ := exec.Command(tc.Tools["profdata"], "show", "--all-functions", o.Profile).CombinedOutput()
				if !strings.Contains(string(show), "hot") {
					t.Errorf("profile has no counts for hot():\n%s", show)
				}
			} else {
				// GCC names the .gcda after the object's absolute path under the profile
				// directory, so both phases must build in the same directory.
				var gcdas []string
				filepath.Walk(prof, func(p string, _ os.FileInfo, _ error) error {
					if strings.HasSuffix(p, ".gcda") {
						gcdas = append(gcdas, p)
					}
					return nil
				})
				if len(gcdas) == 0 {
					t.Fatal("training wrote no .gcda")
				}
			}
			rel := buildProbe(t, tc, dir, o)
			if strings.Contains(rel.out, "profile count data file not found") || strings.Contains(rel.out, "no profile data") {
				t.Errorf("optimized build did not find the profile:\n%s", rel.out)
			}
			f, _ := tc.Flags(o)
			if cn == "clang" && !contains(f.LTO, "-flto=thin") || cn == "gcc" && !contains(f.LTO, "-flto=auto") {
				t.Errorf("%s LTO flags %v", cn, f.LTO)
			}
			if out, err := run(t, tc, rel.bin); err != nil {
				t.Fatalf("optimized run: %v\n%s", err, out)
			}
			if cn == "clang" {
				if ents, _ := os.ReadDir(o.LTOCache); len(ents) == 0 {
					t.Error("ThinLTO cache directory stayed empty")
				}
			}
		})
	}
}

// TestBiShengHome resolves bisheng-clang from a home directory (BISHENG_HOME)
// laid out like a BiSheng installation, backed by clang-16, and builds with it.
func TestBiShengHome(t *testing.T) {
	m := repoMatrix(t)
	needTool(t, "clang-16", "qemu-aarch64")
	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	os.MkdirAll(bin, 0o755)
	for name, real := range map[string]string{"clang": "clang-16", "clang++": "clang++-16", "llvm-ar": "llvm-ar-16", "llvm-nm": "llvm-nm-16",
		"llvm-objcopy": "llvm-objcopy-16", "llvm-strip": "llvm-strip-16", "ld.lld": "ld.lld-16", "llvm-ranlib": "llvm-ranlib-16", "llvm-profdata": "llvm-profdata-16",
		"llvm-objdump": "llvm-objdump-16", "llvm-readelf": "llvm-readelf-16"} {
		p, err := exec.LookPath(real)
		if err != nil {
			t.Skip(err)
		}
		os.Symlink(p, filepath.Join(bin, name))
	}
	cell, _ := m.Cell("2.1", "kunpeng920")
	env := map[string]string{"BISHENG_HOME": home}
	tc, err := Resolve(m, cell, Options{Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if tc.Compiler.Name != "bisheng-clang" || tc.CC != filepath.Join(bin, "clang") {
		t.Fatalf("resolved %s at %s, want bisheng-clang from BISHENG_HOME", tc.Compiler.Name, tc.CC)
	}
	if !contains(tc.TargetFlags(), "-mtune=tsv110") || !contains(tc.TargetFlags(), "--target=aarch64-linux-gnu") {
		t.Errorf("flags %v", tc.TargetFlags())
	}
	b := buildProbe(t, tc, t.TempDir(), FlagOptions{})
	if out, err := run(t, tc, b.bin); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Without BISHENG_HOME, kunpeng920 falls back to the next compiler of
	// its list and says why bisheng was skipped.
	tc2, err := Resolve(m, cell, Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if want := cell.Target.Compilers[1]; tc2.Compiler.Name != want {
		t.Errorf("fallback picked %s, want %s (next in the target's list)", tc2.Compiler.Name, want)
	}
	if len(tc2.Notes) == 0 || !strings.Contains(strings.Join(tc2.Notes, " "), "bisheng-clang") {
		t.Errorf("no note says why bisheng-clang was skipped: %v", tc2.Notes)
	}
}

func TestMissingCompilerSaysWhatToInstall(t *testing.T) {
	m := repoMatrix(t)
	cell, _ := m.Cell("2.1", "kunpeng920")
	_, err := Resolve(m, cell, Options{Compiler: "bisheng-clang", Getenv: func(k string) string {
		if k == "BISHENG_HOME" {
			return "/nonexistent/bisheng"
		}
		return ""
	}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/bisheng/bin/clang not found") || !strings.Contains(err.Error(), "set BISHENG_HOME") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Resolve(m, cell, Options{Compiler: "icc"}); err == nil || !strings.Contains(err.Error(), "does not list compiler") {
		t.Fatalf("err = %v", err)
	}
}

// TestCMakeToolchainFile configures and builds a CMake project for kunpeng920
// through the generated toolchain file and checks what CMake and the ELF say.
func TestCMakeToolchainFile(t *testing.T) {
	m := repoMatrix(t)
	needTool(t, "cmake", "qemu-aarch64")
	cell, _ := m.Cell("2.1", "kunpeng920")
	tc, err := Resolve(m, cell, Options{Compiler: "gcc"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f, _ := tc.Flags(FlagOptions{})
	w, err := tc.WriteWrappers(filepath.Join(dir, "home"), f, filepath.Join(dir, "cc.log"))
	if err != nil {
		t.Fatal(err)
	}
	tcFile := filepath.Join(dir, "toolchain.cmake")
	os.WriteFile(tcFile, []byte(tc.CMakeToolchainFile(w, map[string]string{"BUILD_SVE": "OFF", "TARGET": "TSV110"})), 0o644)
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	probe, _ := os.ReadFile(filepath.Join("testdata", "probe.c"))
	os.WriteFile(filepath.Join(src, "probe.c"), probe, 0o644)
	// A project with a host-tuning option defaulting to ON, like vectorscan's BUILD_SVE.
	os.WriteFile(filepath.Join(src, "CMakeLists.txt"), []byte("cmake_minimum_required(VERSION 3.16)\nproject(p C)\noption(BUILD_SVE \"\" ON)\n"+
		"message(STATUS \"processor=${CMAKE_SYSTEM_PROCESSOR} sve=${BUILD_SVE} target=${TARGET}\")\nadd_executable(probe probe.c)\n"), 0o644)
	// The toolchain file reaches CMake through the environment, as it does
	// inside Doris's build-thirdparty.sh, which passes no toolchain flag.
	conf := exec.Command("cmake", "-S", src, "-B", filepath.Join(dir, "b"))
	conf.Env = append(os.Environ(), "CMAKE_TOOLCHAIN_FILE="+tcFile)
	out, err := conf.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "processor=aarch64 sve=OFF target=TSV110") {
		t.Errorf("cmake did not see aarch64 with the pins:\n%s", out)
	}
	if strings.Contains(string(out), "dorisarm:") {
		t.Errorf("a C project's own configure is warned about:\n%s", out)
	}
	if out, err := exec.Command("cmake", "--build", filepath.Join(dir, "b")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	bin := filepath.Join(dir, "b", "probe")
	if out, err := run(t, tc, bin); err != nil || !strings.Contains(out, "feature dotprod") {
		t.Fatalf("cmake-built probe: %v\n%s", err, out)
	}
}
