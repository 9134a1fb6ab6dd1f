package plan

import (
	"bytes"
	"encoding/json"
	"github.com/dorisarm/dorisarm/internal/fault"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/patch"
	"github.com/dorisarm/dorisarm/internal/sample"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

const repo = "../.."

type fixture struct{ *sample.Inputs }

func load(t *testing.T, patchDir string) fixture {
	t.Helper()
	return fixture{sample.Load(t, repo, patchDir, "")}
}

func (f fixture) plan(t *testing.T, target, compiler string) *Plan {
	t.Helper()
	cell, tc := f.Toolchain(t, target, compiler)
	p, err := Make(Inputs{Matrix: f.Matrix, Cell: cell, Recipe: f.Recipe, Tree: f.Tree, Version: sample.Version, Series: f.Series, Toolchain: tc, Lock: f.Lock, SysrootWaiver: "plan unit test"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSameInputsSameBytes(t *testing.T) {
	f := load(t, "")
	for _, target := range f.Matrix.TargetNames() {
		a, _ := f.plan(t, target, "").JSON()
		b, _ := f.plan(t, target, "").JSON()
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two plans from the same inputs differ", target)
		}
		var pl Plan
		json.Unmarshal(a, &pl)
		for _, phase := range pl.Phases {
			for _, fl := range phase {
				if strings.Contains(fl, "/usr/") {
					t.Errorf("%s: flag %s holds an install path", target, fl)
				}
			}
		}
		if bytes.Contains(a, []byte(f.Tree)) || bytes.Contains(a, []byte(os.TempDir())) {
			t.Errorf("%s: plan holds a machine path", target)
		}
	}
}

func keys(p *Plan) map[string]string {
	m := map[string]string{}
	for _, s := range p.Steps {
		m[s.ID] = s.Key
	}
	return m
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, info.Mode())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestChangingOnePatchChangesOnlyItsDependents edits the bitshuffle patch and
// checks exactly the steps downstream of it get new keys.
func TestChangingOnePatchChangesOnlyItsDependents(t *testing.T) {
	base := load(t, "")
	dir := t.TempDir()
	copyDir(t, base.Recipe.Path(base.Recipe.Patches), dir)
	before := base.plan(t, "kunpeng920", "gcc")

	pf := filepath.Join(dir, "bitshuffle", "0001-scalar-bitshuffle.patch")
	data, _ := os.ReadFile(pf)
	data = bytes.Replace(data, []byte("Last-Update: 2026-11-29"), []byte("Last-Update: 2026-11-30"), 1)
	os.WriteFile(pf, data, 0o644)
	after := load(t, dir).plan(t, "kunpeng920", "gcc")

	var changed []string
	kb, ka := keys(before), keys(after)
	for id, k := range kb {
		if ka[id] != k {
			changed = append(changed, id)
		}
	}
	sort.Strings(changed)
	want := []string{"build:be", "build:be:instrument", "collect", "patch:bitshuffle", "pgo:merge", "pgo:train", "scan", "thirdparty:BITSHUFFLE"}
	if strings.Join(changed, " ") != strings.Join(want, " ") {
		t.Errorf("changed keys:\n got %v\nwant %v", changed, want)
	}
}

func TestPatchSelectionPerTarget(t *testing.T) {
	f := load(t, "")
	cases := map[string][]string{
		"kunpeng920":    {"bitshuffle/0001-scalar-bitshuffle", "doris/0001-dynamic-openssl", "doris/0002-bitshuffle-neon-march", "simdprobe/0001-sve-off"},
		"graviton2":     {"doris/0002-bitshuffle-neon-march", "simdprobe/0001-sve-off"},
		"generic-armv8": {"doris/0002-bitshuffle-neon-march", "simdprobe/0001-sve-off"},
		"graviton3":     {"doris/0002-bitshuffle-neon-march", "simdprobe/0002-sve-from-target"}, // has SVE: keeps the SVE kernel, at its -march
		"graviton4":     {"doris/0002-bitshuffle-neon-march", "simdprobe/0002-sve-from-target"},
		"x86_64":        nil, // "!sve" and "+simd" are aarch64 conditions
	}
	for target, want := range cases {
		p := f.plan(t, target, "")
		var got []string
		for _, pt := range p.Patches {
			got = append(got, pt.ID)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: patches %v, want %v", target, got, want)
		}
	}
}

func TestPlanShape(t *testing.T) {
	f := load(t, "")
	p := f.plan(t, "kunpeng920", "clang")
	for _, id := range []string{"patch:doris", "fetch:BITSHUFFLE", "unpack:BITSHUFFLE", "patch:bitshuffle", "thirdparty:BITSHUFFLE",
		"build:be:instrument", "pgo:train", "pgo:merge", "build:be", "build:fe", "collect", "scan"} {
		if p.Step(id) == nil {
			t.Errorf("no step %s", id)
		}
	}
	// Every step comes after what it needs.
	pos := map[string]int{}
	for i, s := range p.Steps {
		pos[s.ID] = i
		for _, n := range s.Needs {
			if _, ok := pos[n]; !ok {
				t.Errorf("%s needs %s, which comes later or not at all", s.ID, n)
			}
		}
	}
	if env := strings.Join(p.Step("thirdparty:SIMDPROBE").Env, " "); env != "SIMDPROBE_ARCH=generic" {
		t.Errorf("kunpeng simdprobe env %q", env)
	}
	if got := p.Step("pgo:merge").Command; len(got) == 0 || got[0] != "llvm-profdata" {
		t.Errorf("clang merge %v", got)
	}
	if f := strings.Join(p.Phases[PhasePGO], " "); !strings.Contains(f, "-fprofile-use="+PROFILE) || !strings.Contains(f, "-flto=thin") {
		t.Errorf("pgo phase flags %s", f)
	}
	if p.Step("fetch:MINILZ").Inputs.Fetch.SHA256 == "" {
		t.Error("fetch has no pinned sha256")
	}
	g3 := f.plan(t, "graviton3", "gcc")
	if env := strings.Join(g3.Step("thirdparty:SIMDPROBE").Env, " "); env != "SIMDPROBE_ARCH=sve" {
		t.Errorf("graviton3 simdprobe env %q", env)
	}
	if g3.Step("pgo:train") != nil {
		t.Error("graviton3 does not use PGO")
	}
}

func TestRequiredPatchMissing(t *testing.T) {
	base := load(t, "")
	dir := t.TempDir()
	copyDir(t, base.Recipe.Path(base.Recipe.Patches), dir)
	os.Remove(filepath.Join(dir, "bitshuffle", "0001-scalar-bitshuffle.patch"))
	f := load(t, dir)
	cell, _ := f.Matrix.Cell("2.1", "kunpeng920")
	tc, err := toolchain.Resolve(f.Matrix, cell, toolchain.Options{Compiler: "gcc"})
	if err != nil {
		t.Skip(err)
	}
	_, err = Make(Inputs{Matrix: f.Matrix, Cell: cell, Recipe: f.Recipe, Tree: f.Tree, Version: "2.1.8", Series: f.Series, Toolchain: tc, Lock: f.Lock, SysrootWaiver: "plan unit test"})
	if err == nil || !strings.Contains(err.Error(), `requires patch "scalar-bitshuffle"`) {
		t.Fatalf("err = %v", err)
	}
	// A version outside the patch's Applies-To drops it too.
	_, err = Make(Inputs{Matrix: f.Matrix, Cell: cell, Recipe: f.Recipe, Tree: f.Tree, Version: "4.1.0", Series: base.Series, Toolchain: tc, Lock: f.Lock, SysrootWaiver: "plan unit test"})
	if err == nil || !strings.Contains(err.Error(), `requires patch "dynamic-openssl"`) {
		t.Fatalf("err = %v", err)
	}
	// A recipe with no patch directory says so, rather than "in  applies".
	_, err = Make(Inputs{Matrix: f.Matrix, Cell: cell, Recipe: f.Recipe, Tree: f.Tree, Version: "2.1.8", Series: &patch.Series{}, Toolchain: tc, Lock: f.Lock, SysrootWaiver: "plan unit test"})
	if err == nil || !strings.Contains(err.Error(), "no patch of that name in recipe "+f.Recipe.Name+"'s patches (it names no patch directory) applies") {
		t.Fatalf("err = %v", err)
	}
}

// TestPGOWithoutTrainingOrProfile: a target that uses PGO, with a recipe
// that has no training workload (real Doris: profiles come from TPC-H on
// the hardware) and no --pgo-profile, plans without PGO and says so
// plainly ("PGO: none (no profile)"), in the cell the record, attestation
// and report carry; with a profile, PGO uses it.
func TestPGOWithoutTrainingOrProfile(t *testing.T) {
	f := load(t, "")
	f.Recipe.PGO.Train = nil
	cell, _ := f.Matrix.Cell("2.1", "kunpeng920")
	tc, err := toolchain.Resolve(f.Matrix, cell, toolchain.Options{Compiler: "gcc"})
	if err != nil {
		t.Skip(err)
	}
	in := Inputs{Matrix: f.Matrix, Cell: cell, Recipe: f.Recipe, Tree: f.Tree, Version: "2.1.8", Series: f.Series, Toolchain: tc, Lock: f.Lock, SysrootWaiver: "plan unit test"}
	p, err := Make(in)
	if err != nil {
		t.Fatalf("no profile: %v", err)
	}
	if p.Cell.PGO || p.Cell.PGONone != PGONoProfile {
		t.Errorf("no profile: cell PGO %v, PGONone %q", p.Cell.PGO, p.Cell.PGONone)
	}
	if _, ok := p.Phases[PhasePGO]; ok || p.Step("pgo:train") != nil || p.Step("pgo:merge") != nil {
		t.Errorf("no profile: PGO steps or phases planned: %v", p.Phases)
	}
	var b strings.Builder
	p.WriteTable(&b)
	if !strings.Contains(b.String(), "pgo       none (no profile)") || !strings.Contains(b.String(), "--pgo-profile FILE") {
		t.Errorf("the plan does not say PGO is off and how to turn it on:\n%s", b.String())
	}
	in.Profile = "sha256:0123"
	p, err = Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Cell.PGO || p.Cell.PGONone != "" || p.Step("pgo:train") != nil || p.Step("build:be").Inputs.Build.Profile != "sha256:0123" {
		t.Errorf("supplied profile not used: %+v", p.Step("build:be"))
	}
}

// A toolchain without a sysroot plans only with a waiver, which the plan
// records and which is part of every compile step's key.
func TestNoSysrootNeedsAWaiver(t *testing.T) {
	f := load(t, "")
	cell, _ := f.Matrix.Cell("2.1", "graviton3")
	tc, err := toolchain.Resolve(f.Matrix, cell, toolchain.Options{})
	if err != nil {
		t.Skip(err)
	}
	in := Inputs{Matrix: f.Matrix, Cell: cell, Recipe: f.Recipe, Tree: f.Tree, Version: "2.1.8", Series: f.Series, Toolchain: tc, Lock: f.Lock}
	if _, err := Make(in); err == nil || !strings.Contains(err.Error(), "--waive-sysroot") {
		t.Fatalf("no sysroot, no waiver: %v", err)
	}
	in.SysrootWaiver = "one reason"
	a, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	in.SysrootWaiver = "another reason"
	b, _ := Make(in)
	if a.Cell.SysrootWaiver != "one reason" || a.Step("build:be").Key == b.Step("build:be").Key || a.Step("fetch:BITSHUFFLE").Key != b.Step("fetch:BITSHUFFLE").Key {
		t.Error("the waiver is not recorded, or not in the compile steps' keys only")
	}
}

// The sysroot's key (the digest of its spec: the image digest, or the
// suite, pinned packages and mirror, and the cap) is part of every compile
// step's key: another sysroot rebuilds, the same one does not; fetching
// does not depend on it. The made tree's path and content are not in the
// plan: the build's sysroot step makes it.
func TestSysrootKeyInKeys(t *testing.T) {
	f := load(t, "")
	cell, _ := f.Matrix.Cell("2.1", "graviton3")
	tc, err := toolchain.Resolve(f.Matrix, cell, toolchain.Options{})
	if err != nil {
		t.Skip(err)
	}
	keys := func(key string) *Plan {
		tc.Sysroot = &toolchain.Sysroot{Name: "debian-11-arm64", Path: "/nonexistent", RunPath: "/nonexistent", Key: key}
		p, err := Make(Inputs{Matrix: f.Matrix, Cell: cell, Recipe: f.Recipe, Tree: f.Tree, Version: "2.1.8", Series: f.Series, Toolchain: tc, Lock: f.Lock})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, a2, b := keys("sha256:aaaa"), keys("sha256:aaaa"), keys("sha256:bbbb")
	for _, s := range a.Steps {
		compiles := s.Kind == KindThirdparty || s.Kind == KindBuild || s.Kind == KindSysroot || s.Kind == KindToolchain
		if a2.Step(s.ID).Key != s.Key {
			t.Errorf("%s: the same sysroot gave another key", s.ID)
		}
		if changed := b.Step(s.ID).Key != s.Key; compiles && !changed {
			t.Errorf("%s: key unchanged with another sysroot", s.ID)
		} else if s.Kind == KindFetch && changed {
			t.Errorf("%s: a fetch's key depends on the sysroot", s.ID)
		}
	}
	if j, _ := a.JSON(); strings.Contains(string(j), "/nonexistent") {
		t.Error("the plan holds the sysroot's machine path")
	}
}

// A patch whose Steps name only the be step is applied to a plan that
// builds the BE and left out of a --packages plan, with a warning, while
// still meeting the target's requirement for it; Steps naming a step the
// recipe lacks is an error naming the patch.
func TestPatchStepsSelect(t *testing.T) {
	base := load(t, "")
	withSteps := func(steps string) string {
		dir := t.TempDir()
		copyDir(t, base.Recipe.Path(base.Recipe.Patches), dir)
		pf := filepath.Join(dir, "doris", "0001-dynamic-openssl.patch")
		b, err := os.ReadFile(pf)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pf, []byte(strings.Replace(string(b), "\nEvidence:", "\nSteps: "+steps+"\nEvidence:", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	f := load(t, withSteps("be"))
	cell, _ := f.Matrix.Cell("2.1", "kunpeng920")
	tc, err := toolchain.Resolve(f.Matrix, cell, toolchain.Options{Compiler: "gcc"})
	if err != nil {
		t.Skip(err)
	}
	in := Inputs{Matrix: f.Matrix, Cell: cell, Recipe: f.Recipe, Tree: f.Tree, Version: "2.1.8", Series: f.Series, Toolchain: tc, Lock: f.Lock, SysrootWaiver: "plan unit test"}
	applied := func(p *Plan) bool {
		return slices.ContainsFunc(p.Patches, func(r PatchRef) bool { return r.ID == "doris/0001-dynamic-openssl" })
	}
	full, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if !applied(full) {
		t.Errorf("a BE plan does not apply the be-step patch: %+v", full.Patches)
	}
	in.Packages = []string{"bitshuffle"}
	pkgs, err := Make(in)
	if err != nil {
		t.Fatalf("--packages plan with the target's required patch left out by Steps: %v", err)
	}
	if applied(pkgs) || !slices.ContainsFunc(pkgs.Warnings, func(w string) bool {
		return strings.Contains(w, "doris/0001-dynamic-openssl is not applied: only the be step uses")
	}) {
		t.Errorf("--packages plan: patches %+v, warnings %q", pkgs.Patches, pkgs.Warnings)
	}
	f = load(t, withSteps("be, nosuch"))
	in.Series, in.Packages = f.Series, nil
	if _, err := Make(in); err == nil || !strings.Contains(err.Error(), `0001-dynamic-openssl.patch: Steps names "nosuch"`) {
		t.Errorf("unknown step: %v", err)
	}
}

// TestDorisFlagCannotRelabel: --doris names the version of a tree that
// declares none or of a development tree; another version than a tree
// declares is bad input (its binaries would say one release, the record,
// images and report another).
func TestDorisFlagCannotRelabel(t *testing.T) {
	f := load(t, "")
	if err := checkDorisFlag(f.Tree, f.Recipe, "2.1.99"); !fault.IsInput(err) || !strings.Contains(err.Error(), "declares Doris 2.1.8") {
		t.Errorf("relabelled: %v", err)
	}
	if err := checkDorisFlag(f.Tree, f.Recipe, "2.1.8"); err != nil {
		t.Errorf("the declared version: %v", err)
	}
	if err := checkDorisFlag(t.TempDir(), f.Recipe, "2.1.99"); err != nil {
		t.Errorf("a tree that declares none: %v", err)
	}
}
