package patch

// End-to-end tests of the sample's patches: the sample tree is built for real
// targets with the cross compilers and run under qemu, with and without its
// patches, and the binaries are inspected.

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/source"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

const repoRoot = "../.."

type sampleBuild struct {
	t       *testing.T
	tree    string
	tc      *toolchain.Toolchain
	env     []string
	cell    matrix.Cell
	m       *matrix.Matrix
	r       *recipe.Recipe
	pkgs    []source.Package
	applied []string
	tpEnv   []string
	beEnv   []string
}

type sampleOpts struct {
	target, compiler string
	patches          bool     // apply the patches the cell selects
	pins             bool     // set the recipe's per-package environment
	env              []string // more environment (e.g. a fake build-host cpuinfo)
}

func needCross(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"qemu-aarch64", "aarch64-linux-gnu-gcc", "patch", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-deps.sh)", tool)
		}
	}
	if testing.Short() {
		t.Skip("builds the sample; skipped with -short")
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	for _, d := range []string{"output", "be/build", "fe/build", "gensrc/build", "thirdparty/src", "thirdparty/installed"} {
		os.RemoveAll(filepath.Join(dst, d))
	}
}

// prepare copies the sample, applies patches as the plan would, and unpacks.
func prepare(t *testing.T, o sampleOpts) *sampleBuild {
	t.Helper()
	m, err := matrix.Load(filepath.Join(repoRoot, "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := recipe.Load(filepath.Join(repoRoot, "recipes", "minidoris.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cell, err := m.Cell("2.1", o.target)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := toolchain.Resolve(m, cell, toolchain.Options{Compiler: o.compiler})
	if err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	copyTree(t, filepath.Join(repoRoot, "examples", "minidoris"), tree)
	b := &sampleBuild{t: t, tree: tree, tc: tc, cell: cell, m: m, r: r}
	b.pkgs, err = source.ReadPackages(tree, r, cell.ISA.Name)
	if err != nil {
		t.Fatal(err)
	}
	series, err := LoadSeries(r.Path(r.Patches))
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{"doris": "2.1.8"}
	for _, p := range b.pkgs {
		versions[strings.ToLower(p.Entry)] = p.Version
	}
	var selected []*Patch
	if o.patches {
		selected = series.Select(m, cell, versions)
	}
	apply := func(component, root string) {
		var ps []*Patch
		for _, p := range selected {
			if p.Component == component {
				ps = append(ps, p)
				b.applied = append(b.applied, p.ID())
			}
		}
		if len(ps) == 0 {
			return
		}
		res, err := Apply(root, ps, DefaultOptions())
		if err != nil || !res.OK() {
			t.Fatalf("applying %s patches: %v %+v", component, err, res)
		}
	}
	apply("doris", tree)
	b.run("thirdparty/download-thirdparty.sh")
	for _, p := range b.pkgs {
		apply(strings.ToLower(p.Entry), filepath.Join(tree, r.Thirdparty.SrcDir, p.Source))
	}
	// Two compiler homes, as the plan's phases: third-party without LTO, BE with it.
	for _, ph := range []struct {
		name  string
		noLTO bool
	}{{"thirdparty", true}, {"release", false}} {
		f, err := tc.Flags(toolchain.FlagOptions{NoLTO: ph.noLTO})
		if err != nil {
			t.Fatal(err)
		}
		w, err := tc.WriteWrappers(filepath.Join(tree, ".dorisarm-"+ph.name), f, filepath.Join(tree, ".dorisarm-cc.log"))
		if err != nil {
			t.Fatal(err)
		}
		if ph.noLTO {
			b.tpEnv = tc.Env(w, f)
		} else {
			b.beEnv = tc.Env(w, f)
		}
	}
	b.env = append(b.tpEnv, o.env...)
	if o.pins {
		ctx := recipe.Context{Target: cell.Target, CPU: cell.CPU, OS: cell.OS, ISA: cell.ISA, Allowed: cell.Allowed}
		for _, env := range r.Thirdparty.Env {
			for k, v := range env {
				e, err := recipe.Expand(v, ctx)
				if err != nil {
					t.Fatal(err)
				}
				b.env = append(b.env, k+"="+e)
			}
		}
	}
	return b
}

func (b *sampleBuild) run(args ...string) string {
	b.t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = b.tree
	cmd.Env = append(os.Environ(), b.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (b *sampleBuild) buildAll() {
	b.run("thirdparty/build-thirdparty.sh")
	saved := b.env
	b.env = append(append([]string{}, b.beEnv...), b.env[len(b.tpEnv):]...)
	b.run("./build.sh", "--be")
	b.env = saved
}

// emulate runs a binary of the tree under qemu with a CPU model.
func (b *sampleBuild) emulate(model string, env []string, args ...string) (string, error) {
	argv := append(b.tc.EmulatorAs(model), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = b.tree
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func symbolSize(t *testing.T, path, name string) uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name == name && s.Section != elf.SHN_UNDEF {
			return s.Size
		}
	}
	t.Fatalf("%s: no symbol %s", path, name)
	return 0
}

// harness links the tree's libbitshuffle.a into a program that shuffles a
// fixed input with the _neon build and prints the bytes in hex.
func (b *sampleBuild) harness() string {
	b.t.Helper()
	src := filepath.Join(b.tree, "harness.c")
	os.WriteFile(src, []byte(`#include <stdio.h>
#include <stdint.h>
int64_t bshuf_bitshuffle_neon(const void*, void*, size_t, size_t, size_t);
int main(void) {
	uint8_t in[256 * 4], out[256 * 4];
	uint32_t x = 12345;
	for (int i = 0; i < 256 * 4; i++) { x = x * 1103515245u + 12345u; in[i] = (uint8_t)(x >> 24); }
	if (bshuf_bitshuffle_neon(in, out, 256, 4, 0) != 1024) return 1;
	for (int i = 0; i < 1024; i++) printf("%02x", out[i]);
	printf("\n");
	return 0;
}
`), 0o644)
	bin := filepath.Join(b.tree, "harness")
	b.run(filepath.Join(b.tree, ".dorisarm-thirdparty", "bin", map[string]string{"gcc": "gcc", "clang": "clang"}[b.tc.Compiler.Dialect]),
		"-O2", src, filepath.Join(b.tree, "thirdparty/installed/lib/libbitshuffle.a"), "-o", bin)
	out, err := b.emulate(b.cell.Qemu.Name, nil, bin)
	if err != nil {
		b.t.Fatalf("harness: %v %s", err, out)
	}
	return strings.TrimSpace(out)
}

// TestScalarBitshuffleOnSample builds the sample for kunpeng920 (patched) and
// generic-armv8 (NEON kept): the NEON kernel leaves the patched binary, and
// both produce bit-identical output.
func TestScalarBitshuffleOnSample(t *testing.T) {
	needCross(t)
	kp := prepare(t, sampleOpts{target: "kunpeng920", compiler: "gcc", patches: true, pins: true})
	if !contains(kp.applied, "bitshuffle/0001-scalar-bitshuffle") {
		t.Fatalf("kunpeng920 did not select the patch: %v", kp.applied)
	}
	kp.buildAll()
	gen := prepare(t, sampleOpts{target: "generic-armv8", compiler: "gcc", patches: true, pins: true})
	gen.buildAll()

	out, err := kp.emulate(kp.cell.Qemu.Name, nil, "output/be/lib/doris_be", "--self-test")
	if err != nil || !strings.Contains(out, "bitshuffle   ok  kernel=scalar") || !strings.Contains(out, "self-test: ok") {
		t.Errorf("kunpeng920 self-test: %v\n%s", err, out)
	}
	out, err = gen.emulate(gen.cell.Qemu.Name, nil, "output/be/lib/doris_be", "--self-test")
	if err != nil || !strings.Contains(out, "bitshuffle   ok  kernel=neon") {
		t.Errorf("generic-armv8 self-test: %v\n%s", err, out)
	}
	const fn = "bshuf_shuffle_bit_eightelem_NEON_neon"
	if n := symbolSize(t, filepath.Join(gen.tree, "output/be/lib/doris_be"), fn); n < 64 {
		t.Errorf("unpatched %s is only %d bytes; expected the NEON kernel", fn, n)
	}
	if n := symbolSize(t, filepath.Join(kp.tree, "output/be/lib/doris_be"), fn); n > 16 {
		t.Errorf("patched %s is %d bytes; expected the -13 stub", fn, n)
	}
	if a, b := kp.harness(), gen.harness(); a != b || len(a) != 2048 {
		t.Errorf("scalar and NEON outputs differ:\n%s\n%s", a, b)
	}
}

// TestSVEOffOnSample builds simdprobe for kunpeng920 on a pretend SVE build
// host: unpatched and unpinned, SVE leaks in; the sve-off patch or the
// recipe's pin each keep it out. graviton3 keeps its SVE kernel, which runs
// under an SVE model and dies with SIGILL under Kunpeng's model.
func TestSVEOffOnSample(t *testing.T) {
	needCross(t)
	cpuinfo := filepath.Join(t.TempDir(), "cpuinfo")
	os.WriteFile(cpuinfo, []byte("processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve\n"), 0o644)
	sveHost := []string{"CPUINFO=" + cpuinfo}
	hasSVE := func(b *sampleBuild) bool {
		out, err := exec.Command("aarch64-linux-gnu-objdump", "-d", filepath.Join(b.tree, "thirdparty/installed/lib/libsimdprobe.a")).Output()
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Contains(out, []byte("whilelo"))
	}
	cases := []struct {
		name          string
		patches, pins bool
		wantSVE       bool
	}{
		{"unpatched-unpinned", false, false, true},
		{"patch-only", true, false, false},
		{"pin-only", false, true, false},
		{"patch-and-pin", true, true, false},
	}
	for _, c := range cases {
		b := prepare(t, sampleOpts{target: "kunpeng920", compiler: "gcc", patches: c.patches, pins: c.pins, env: sveHost})
		b.run("thirdparty/build-thirdparty.sh", "simdprobe")
		if got := hasSVE(b); got != c.wantSVE {
			t.Errorf("%s: SVE in libsimdprobe.a = %v, want %v (applied %v)", c.name, got, c.wantSVE, b.applied)
		}
	}
	g3 := prepare(t, sampleOpts{target: "graviton3", compiler: "gcc", patches: true, pins: true})
	g3.buildAll()
	if !hasSVE(g3) {
		t.Fatal("graviton3 lost its SVE kernel")
	}
	out, err := g3.emulate(g3.cell.Qemu.Name, nil, "output/be/lib/doris_be", "--self-test")
	if err != nil || !strings.Contains(out, "simdprobe    ok  kernel=sve") {
		t.Errorf("graviton3 under %s: %v\n%s", g3.cell.Qemu.Name, err, out)
	}
	kpModel := "neoverse-n1"
	_, err = g3.emulate(kpModel, nil, "output/be/lib/doris_be", "--self-test")
	if ee, ok := err.(*exec.ExitError); !ok || (ee.ExitCode() != -1 && ee.ExitCode() != 132) {
		t.Errorf("graviton3 BE under %s: err %v, want SIGILL", kpModel, err)
	}
}

// TestDynamicOpenSSLOnSample: the kunpeng920 BE needs libcrypto.so.3, finds it
// beside itself through $ORIGIN, and defines no EVP_ symbols; the static
// generic-armv8 BE is the reverse.
func TestDynamicOpenSSLOnSample(t *testing.T) {
	needCross(t)
	kp := prepare(t, sampleOpts{target: "kunpeng920", compiler: "clang", patches: true, pins: true})
	kp.buildAll()
	st := prepare(t, sampleOpts{target: "generic-armv8", compiler: "clang", patches: true, pins: true})
	st.buildAll()
	inspect := func(b *sampleBuild) (needed []string, runpath []string, evp int) {
		f, err := elf.Open(filepath.Join(b.tree, "output/be/lib/doris_be"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		needed, _ = f.ImportedLibraries()
		runpath, _ = f.DynString(elf.DT_RUNPATH)
		syms, _ := f.Symbols()
		for _, s := range syms {
			if strings.HasPrefix(s.Name, "EVP_") && s.Section != elf.SHN_UNDEF {
				evp++
			}
		}
		return
	}
	needed, runpath, evp := inspect(kp)
	if !contains(needed, "libcrypto.so.3") || !contains(runpath, "$ORIGIN") || evp != 0 {
		t.Errorf("kunpeng920: needed %v, runpath %v, %d EVP_ definitions", needed, runpath, evp)
	}
	if _, err := os.Stat(filepath.Join(kp.tree, "output/be/lib/libcrypto.so.3")); err != nil {
		t.Errorf("libcrypto.so.3 not shipped beside doris_be: %v", err)
	}
	out, err := kp.emulate(kp.cell.Qemu.Name, []string{"LD_DEBUG=libs"}, "output/be/lib/doris_be", "--self-test")
	if err != nil || !strings.Contains(out, "self-test: ok") {
		t.Fatalf("kunpeng920 self-test: %v\n%s", err, out)
	}
	if !strings.Contains(out, filepath.Join(kp.tree, "output/be/lib/libcrypto.so.3")) {
		t.Errorf("the loader did not take libcrypto from beside doris_be:\n%s", lastLines(out, 30))
	}
	needed, _, evp = inspect(st)
	if contains(needed, "libcrypto.so.3") || evp < 50 {
		t.Errorf("generic-armv8 (static policy): needed %v, %d EVP_ definitions", needed, evp)
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

var _ = fmt.Sprint
