package build

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/patch"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/scan"
)

// Kunpeng 920's flags as the wrappers pass them, and the -march Doris's
// be/CMakeLists.txt adds after them.
var (
	kunpengMarch = "armv8.2-a+crypto+fp16+dotprod+fp16fml"
	kunpengFlags = []string{"-march=" + kunpengMarch, "-mtune=tsv110"}
	dorisARM     = "-march=armv8-a+crc"
)

// gateObjects compiles, with GCC (whose records name no file), a
// package's archive libpkg.a (pkg.o at Doris's -march, as bitshuffle's
// neon variant was, pkg_ok.o at the target's) and doris_be linked from
// the BE's own object and that archive, the BE's object at the target's
// flags (doris_be_target) and with Doris's -march last (doris_be_lost).
func gateObjects(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "aarch64-linux-gnu-ar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-deps.sh)", tool)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pkg.c"), []byte("int work(int x) { return x * 3 + 1; }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "pkg_ok.c"), []byte("int more(int x) { return x * 5 + 1; }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "be.cc"), []byte("extern \"C\" int work(int);\nextern \"C\" int more(int);\nint main(int argc, char**) { return work(argc) + more(argc); }\n"), 0o644)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	cc := append([]string{"-O2", "-g", "-frecord-gcc-switches"}, kunpengFlags...)
	run(append(append([]string{"aarch64-linux-gnu-gcc"}, cc...), dorisARM, "-c", "pkg.c", "-o", "pkg.o")...)
	run(append(append([]string{"aarch64-linux-gnu-gcc"}, cc...), "-c", "pkg_ok.c", "-o", "pkg_ok.o")...)
	run("aarch64-linux-gnu-ar", "rcs", "libpkg.a", "pkg.o", "pkg_ok.o")
	run(append(append([]string{"aarch64-linux-gnu-g++", "-std=c++17"}, cc...), "-c", "be.cc", "-o", "be_target.o")...)
	run(append(append([]string{"aarch64-linux-gnu-g++", "-std=c++17"}, cc...), dorisARM, "-c", "be.cc", "-o", "be_lost.o")...)
	run("aarch64-linux-gnu-g++", "be_target.o", "libpkg.a", "-o", "doris_be_target")
	run("aarch64-linux-gnu-g++", "be_lost.o", "libpkg.a", "-o", "doris_be_lost")
	return dir
}

// gateRunner is the runner of a kunpeng920 build of the BE after one
// third-party package, PKG, whose install check has run (its flag
// read-back and records are in the work directory, as a package step
// leaves them), at its scan gate with doris_be (from objs) staged as
// be/lib/doris_be.
func gateRunner(t *testing.T, objs, doris, accepted string, pol *scan.Policy) (r *runner, out string, log *bytes.Buffer) {
	t.Helper()
	work, out := t.TempDir(), t.TempDir()
	// Linked against this machine's cross libraries, as the other runner
	// tests build: their glibc needs are waived.
	cell := plan.CellInfo{Doris: "2.1.8", Target: "kunpeng920", March: kunpengMarch, LostTuning: accepted, SysrootWaiver: "unit test of the scan gate"}
	r = &runner{start: time.Now(), work: work, stage: filepath.Join(out, ".staging-test"), opts: Options{Out: out},
		rec: &Record{Cell: cell}, warn: func(string) {},
		in: Input{Plan: &plan.Plan{Cell: cell, Steps: []plan.Step{
			{ID: "thirdparty:PKG", Kind: plan.KindThirdparty},
			{ID: "build:be", Kind: plan.KindBuild},
		}}, Recipe: &recipe.Recipe{Thirdparty: recipe.Thirdparty{Install: "thirdparty/installed"}},
			Series: &patch.Series{Dir: "patches"}, Policy: pol}}
	var warned []string
	r.warn = func(s string) { warned = append(warned, s); r.rec.Warnings = append(r.rec.Warnings, s) }
	// The package's install check, as checkInstalled runs it.
	inst := filepath.Join(r.hostInstallDir(), "lib")
	os.MkdirAll(inst, 0o755)
	b, _ := os.ReadFile(filepath.Join(objs, "libpkg.a"))
	os.WriteFile(filepath.Join(inst, "libpkg.a"), b, 0o644)
	rep, err := scan.Scan(context.Background(), []string{filepath.Join(inst, "libpkg.a")}, pol, scan.Options{Digests: true})
	if err != nil {
		t.Fatal(err)
	}
	log = &bytes.Buffer{}
	if err := r.saveFlags(plan.Step{ID: "thirdparty:PKG"}, rep, log); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(r.stage, "be", "lib"), 0o755)
	b, _ = os.ReadFile(filepath.Join(objs, doris))
	os.WriteFile(filepath.Join(r.stage, "be", "lib", "doris_be"), b, 0o755)
	return r, out, log
}

func kunpengPolicy(t *testing.T) *scan.Policy {
	t.Helper()
	m, err := matrix.Load(filepath.Join(repo, "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := scan.PolicyFor(m, "kunpeng920")
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestGateLostTuningInTheBE runs the build's scan gate on a kunpeng920
// doris_be linked from a BE object and a package archive, both compiled
// for real: the BE's own object at Doris's -march fails the gate (a
// failed check, nothing published) with a message naming the object, the
// -march it was compiled at, the target's and the ways out; a package's
// object at that -march alone is a warning; the BE's accepted
// (--accept-lost-tuning) is a warning that the published record says was
// accepted.
func TestGateLostTuningInTheBE(t *testing.T) {
	objs := gateObjects(t)
	pol := kunpengPolicy(t)
	published := func(out string) *Record {
		t.Helper()
		rec, err := ReadRecord(filepath.Join(Dir(out, "2.1.8", "kunpeng920"), RecordFile))
		if err != nil {
			t.Fatalf("nothing published: %v", err)
		}
		return rec
	}

	// The BE's own object below the target's -march: the gate fails.
	r, out, log := gateRunner(t, objs, "doris_be_lost", "", pol)
	err := r.gate(context.Background(), log)
	if !errors.Is(err, ErrGate) {
		t.Fatalf("BE lost tuning: %v, want the gate to fail", err)
	}
	for _, want := range []string{
		"1 object(s) compiled by the tree's own build are below the target's -march=" + kunpengMarch,
		"be/lib/doris_be: -march=armv8-a+crc",
		"(1 of its 3 records compiled by the tree's own build)",
		"patches/doris", "--accept-lost-tuning REASON",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the gate's message lacks %q:\n%v", want, err)
		}
	}
	if _, err := os.Stat(Dir(out, "2.1.8", "kunpeng920")); err == nil {
		t.Error("a build that failed its gate was published")
	}
	if r.rec.Scan == nil || r.rec.Scan.ByKind[scan.KindLostTuning] != 1 || r.rec.Scan.Warned[scan.KindLostTuning] != 1 ||
		r.rec.Scan.Flags.LostBy[scan.OriginTree] != 1 || r.rec.Scan.Flags.LostBy["thirdparty:PKG"] != 1 {
		t.Errorf("the gate's scan: %+v, flags %+v", r.rec.Scan, r.rec.Scan.Flags)
	}

	// Only the package's object below it: a warning, published.
	r, out, log = gateRunner(t, objs, "doris_be_target", "", pol)
	if err := r.gate(context.Background(), log); err != nil {
		t.Fatalf("package lost tuning alone: %v", err)
	}
	rec := published(out)
	if !rec.Scan.Clean || rec.Scan.Warned[scan.KindLostTuning] != 1 || rec.Scan.Flags.LostBy["thirdparty:PKG"] != 1 || rec.Scan.Flags.LostBy[scan.OriginTree] != 0 {
		t.Errorf("package lost tuning alone: %+v, flags %+v", rec.Scan, rec.Scan.Flags)
	}

	// The BE's, accepted: a warning; the record says it was accepted.
	reason := "Doris 3.0 trunk: no -march patch yet"
	r, out, log = gateRunner(t, objs, "doris_be_lost", reason, pol)
	if err := r.gate(context.Background(), log); err != nil {
		t.Fatalf("accepted BE lost tuning: %v", err)
	}
	rec = published(out)
	if rec.Cell.LostTuning != reason || rec.Scan.Flags.LostTuningAccepted != reason || rec.Scan.Flags.LostBy[scan.OriginTree] != 1 || rec.Scan.Warned[scan.KindLostTuning] != 2 {
		t.Errorf("accepted: cell %q, scan %+v, flags %+v", rec.Cell.LostTuning, rec.Scan, rec.Scan.Flags)
	}
	if !strings.Contains(strings.Join(rec.Warnings, "\n"), "lost tuning accepted ("+reason+")") {
		t.Errorf("accepted: warnings %q", rec.Warnings)
	}

	// --require-target-flags: every lost tuning fails, accepted or not.
	r, _, log = gateRunner(t, objs, "doris_be_lost", reason, pol)
	r.opts.RequireTargetFlags = true
	if err := r.gate(context.Background(), log); !errors.Is(err, ErrGate) {
		t.Errorf("--require-target-flags, accepted: %v, want the gate to fail", err)
	}
}

// TestGateRecordsNotKept: a package step restored from a cache entry an
// older dorisarm made kept no records. Its records in doris_be are then
// read from the third-party install before the gate blames the tree's own
// build; with no install to read, the gate fails and says whose records
// were missing. A --packages plan compiles nothing of the tree's own.
func TestGateRecordsNotKept(t *testing.T) {
	objs := gateObjects(t)
	pol := kunpengPolicy(t)
	r, out, log := gateRunner(t, objs, "doris_be_target", "", pol)
	os.Remove(filepath.Join(r.work, flagsDir, "PKG"+recordsSuffix))
	if _, unknown := r.origins(); strings.Join(unknown, " ") != "thirdparty:PKG" {
		t.Errorf("records not kept: unknown %q", unknown)
	}
	if err := r.gate(context.Background(), log); err != nil {
		t.Fatalf("the install tells the package's records: %v", err)
	}
	if !strings.Contains(log.String(), "read them from the third-party install") {
		t.Errorf("log:\n%s", log)
	}
	if rec, err := ReadRecord(filepath.Join(Dir(out, "2.1.8", "kunpeng920"), RecordFile)); err != nil || rec.Scan.Flags.LostBy["thirdparty:PKG"] != 1 {
		t.Errorf("published: %v %+v", err, rec)
	}

	r, _, log = gateRunner(t, objs, "doris_be_target", "", pol)
	os.Remove(filepath.Join(r.work, flagsDir, "PKG"+recordsSuffix))
	os.RemoveAll(r.hostInstallDir())
	err := r.gate(context.Background(), log)
	if !errors.Is(err, ErrGate) || !strings.Contains(err.Error(), "the flag records of thirdparty:PKG were not kept") {
		t.Errorf("no install to read: %v", err)
	}

	r.in.Plan.Steps = []plan.Step{{ID: "thirdparty:PKG", Kind: plan.KindThirdparty}}
	if o, _ := r.origins(); o != nil {
		t.Errorf("a --packages plan: origins %+v", o)
	}
	r.in.Plan.Steps = []plan.Step{{ID: plan.BaseStep, Kind: plan.KindBase}, {ID: "build:be", Kind: plan.KindBuild}}
	if _, unknown := r.origins(); strings.Join(unknown, " ") != plan.BaseStep {
		t.Errorf("a prebuilt base: unknown %q", unknown)
	}
}

// TestLostTuningGateBuild builds the sample for kunpeng920 for real
// (clang: PGO and ThinLTO, so the packages' records reach doris_be
// through bitcode). A tree whose BE compiles end with Doris's
// -march=armv8-a+crc (after the target's flags, as Doris 2.1 and 3.0's
// be/CMakeLists.txt puts it; in build.sh here, which the recipe's
// fixed_march does not name, so the plan's guard does not see it) fails
// the scan gate, a failed check naming doris_be and both -march values,
// and publishes nothing; with --accept-lost-tuning the same build is
// published, the record saying it was accepted. The sample as it is,
// with bitshuffle's neon variant left at Doris's -march (no
// 0002-bitshuffle-neon-march patch), is published with a warning: that
// lost tuning is the package's.
func TestLostTuningGateBuild(t *testing.T) {
	need(t)
	tree := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(repo, "examples/minidoris")+"/.", tree).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	buildSh := filepath.Join(tree, "build.sh")
	b, _ := os.ReadFile(buildSh)
	compile := `-Werror "${ARCH_FLAGS[@]}" ${EXTRA_CXX_FLAGS} \`
	if strings.Count(string(b), compile) != 1 {
		t.Fatalf("the sample's BE compile line changed: %s has no one %q", buildSh, compile)
	}
	os.WriteFile(buildSh, []byte(strings.Replace(string(b), compile, `-Werror "${ARCH_FLAGS[@]}" ${EXTRA_CXX_FLAGS} -march=armv8-a+crc \`, 1)), 0o755)
	out, cache := t.TempDir(), t.TempDir()
	pub := Dir(out, "2.1.8", "kunpeng920")

	_, err := Run(context.Background(), input(t, setup{target: "kunpeng920", compiler: "clang", tree: tree}), Options{Out: out, Cache: cache})
	if !errors.Is(err, ErrGate) || fault.IsInput(err) {
		t.Fatalf("the BE below the target's -march: %v, want a failed gate (exit status 1)", err)
	}
	for _, want := range []string{"compiled by the tree's own build are below the target's -march=" + kunpengMarch, "be/lib/doris_be: -march=armv8-a+crc", "--accept-lost-tuning REASON"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the gate's message lacks %q:\n%v", want, err)
		}
	}
	if _, err := os.Stat(pub); err == nil {
		t.Error("a build that failed its gate was published")
	}

	reason := "testing the gate: a tree whose -march no patch replaces yet"
	if _, err := Run(context.Background(), input(t, setup{target: "kunpeng920", compiler: "clang", tree: tree, accept: reason}), Options{Out: out, Cache: cache}); err != nil {
		t.Fatalf("accepted: %v", err)
	}
	rec, err := ReadRecord(filepath.Join(pub, RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	if f := rec.Scan.Flags; rec.Cell.LostTuning != reason || f == nil || f.LostTuningAccepted != reason || f.LostBy[scan.OriginTree] != 1 || rec.Scan.Warned[scan.KindLostTuning] != 1 {
		t.Errorf("accepted: cell %q, scan %+v, flags %+v", rec.Cell.LostTuning, rec.Scan, f)
	}

	pdir := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(repo, "examples/minidoris/patches")+"/.", pdir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if err := os.Remove(filepath.Join(pdir, "doris", "0002-bitshuffle-neon-march.patch")); err != nil {
		t.Fatal(err)
	}
	out = t.TempDir()
	if _, err := Run(context.Background(), input(t, setup{target: "kunpeng920", compiler: "clang", patches: pdir}), Options{Out: out, Cache: cache}); err != nil {
		t.Fatalf("a package below the target's -march: %v, want a warning", err)
	}
	rec, err = ReadRecord(filepath.Join(Dir(out, "2.1.8", "kunpeng920"), RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	if f := rec.Scan.Flags; f == nil || f.LostBy["thirdparty:BITSHUFFLE"] != 1 || f.LostBy[scan.OriginTree] != 0 || rec.Scan.Warned[scan.KindLostTuning] != 1 || rec.PackageFlags["BITSHUFFLE"].Verdicts["lost"] == 0 {
		t.Errorf("package lost tuning: scan %+v, flags %+v, package flags %+v", rec.Scan, f, rec.PackageFlags["BITSHUFFLE"])
	}
}
