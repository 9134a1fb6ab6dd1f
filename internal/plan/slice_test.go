package plan

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/patch"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/sample"
	"github.com/dorisarm/dorisarm/internal/source"
)

// corpusMake plans the real Doris 2.1.7 tree (../shared/corpus) with the
// stock recipe for target, limited to packages and sliced when asked;
// skipped where the corpus is absent.
func corpusMake(t *testing.T, target string, packages []string, sl *Slice) (*Plan, error) {
	t.Helper()
	return Make(corpusInputs(t, target, packages, sl))
}

// corpusInputs are corpusMake's plan inputs, for tests that change some.
func corpusInputs(t *testing.T, target string, packages []string, sl *Slice) Inputs {
	t.Helper()
	tree := corpusTree(t)
	in := sample.Load(t, repo, "", "")
	r, err := recipe.Load(filepath.Join(repo, "recipes", "doris.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	series, err := patch.LoadSeries(r.Path(r.Patches))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := source.ReadLock(r.Path(r.Lock))
	if err != nil {
		t.Fatal(err)
	}
	cell, tc := in.NoCompilerToolchain(t, target, "clang")
	return Inputs{Matrix: in.Matrix, Cell: cell, Recipe: r, Tree: tree, Version: "2.1.7", Series: series,
		Toolchain: tc, Lock: lock, SysrootWaiver: "corpus plan test", Packages: packages, Slice: sl}
}

// slicePlan plans a BE slice of the corpus tree.
func slicePlan(t *testing.T, target string, sl *Slice, packages ...string) (*Plan, error) {
	t.Helper()
	return corpusMake(t, target, packages, sl)
}

func TestBESlicePlan(t *testing.T) {
	obj := "src/util/CMakeFiles/Util.dir/bitmap.cpp.o"
	// kunpeng920 is a PGO + ThinLTO target: a slice has neither, and needs no profile.
	p, err := slicePlan(t, "kunpeng920", &Slice{Targets: []string{obj}}, "gflags")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	want := []string{"thirdparty:GFLAGS", "build:be", "build:be:targets", "collect", "scan"}
	for _, w := range want {
		if !slices.Contains(ids, w) {
			t.Errorf("no step %s in %v", w, ids)
		}
	}
	for _, id := range ids {
		if strings.HasPrefix(id, "build:fe") || strings.HasPrefix(id, "pgo:") {
			t.Errorf("a slice plans %s", id)
		}
	}
	be := p.Step("build:be")
	if be.Phase != PhaseSlice || !slices.Contains(be.Env, "OUTPUT_BE_BINARY=0") || !slices.Contains(be.Needs, "thirdparty:GFLAGS") {
		t.Errorf("configure step: %+v", be)
	}
	tg := p.Step("build:be:targets")
	if tg.Phase != PhaseSlice || tg.Command[len(tg.Command)-1] != obj || !slices.Contains(tg.Needs, "build:be") {
		t.Errorf("targets step: %+v", tg)
	}
	if c := p.Step("collect"); c.Inputs.Collect.Slice != "be/build_Release" || !slices.Contains(c.Needs, "build:be:targets") {
		t.Errorf("collect: %+v", c.Inputs.Collect)
	}
	for _, f := range p.Phases[PhaseSlice] {
		if strings.Contains(f, "lto") || strings.Contains(f, "profile") {
			t.Errorf("slice flags carry %s: %v", f, p.Phases[PhaseSlice])
		}
	}
	if !slices.Contains(p.Phases[PhaseSlice], "-march=armv8.2-a+crypto+fp16+dotprod+fp16fml") {
		t.Errorf("slice flags lack the target's: %v", p.Phases[PhaseSlice])
	}
	if p.Slice == nil || p.Slice.ConfigureOnly || p.Slice.Dir != "be/build_Release" {
		t.Errorf("plan slice: %+v", p.Slice)
	}

	// Configure only: no targets step; the same configure key (the targets
	// are not an input of the configure).
	c, err := slicePlan(t, "kunpeng920", &Slice{}, "gflags")
	if err != nil {
		t.Fatal(err)
	}
	if c.Step("build:be:targets") != nil || !c.Slice.ConfigureOnly || c.Step("build:be").Key != be.Key {
		t.Errorf("configure only: %+v, key %s vs %s", c.Slice, c.Step("build:be").Key, be.Key)
	}
	// A full BE step and a slice's configure never share a cache entry.
	full, err := slicePlan(t, "graviton3", nil)
	if err != nil {
		t.Fatal(err)
	}
	sl, err := slicePlan(t, "graviton3", &Slice{})
	if err != nil {
		t.Fatal(err)
	}
	if full.Step("build:be") == nil || full.Step("build:be").Key == sl.Step("build:be").Key {
		t.Errorf("full and slice BE steps share a key")
	}

	for _, bad := range []string{"-t", "../x", "/abs/x.o", ""} {
		if _, err := slicePlan(t, "graviton3", &Slice{Targets: []string{bad}}); err == nil || !strings.Contains(err.Error(), "--be-targets") {
			t.Errorf("target %q: %v", bad, err)
		}
	}
}
