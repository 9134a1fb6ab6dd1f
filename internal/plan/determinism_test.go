package plan

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/sample"
)

// TestManyPatchesSameBytes plans a cell with four patches in each of three
// components fifty times: every plan has the same bytes, and each patch
// step lists its patches in series order (component, number), the order
// the runner applies them in, not their name order.
func TestManyPatchesSameBytes(t *testing.T) {
	in := sample.Load(t, repo, sample.ManyPatches(t, repo), "")
	cell, tc := in.NoCompilerToolchain(t, "kunpeng920", "gcc")
	mk := func() *Plan {
		p, err := Make(Inputs{Matrix: in.Matrix, Cell: cell, Recipe: in.Recipe, Tree: in.Tree, Version: sample.Version,
			Series: in.Series, Toolchain: tc, Lock: in.Lock, SysrootWaiver: "determinism test"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := mk()
	want, err := first.JSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"patch:doris", "patch:bitshuffle", "patch:simdprobe"} {
		s := first.Step(id)
		if s == nil {
			t.Fatalf("no step %s", id)
		}
		comp := strings.TrimPrefix(id, "patch:")
		// The series' patches of the component that kunpeng920 selects
		// (simdprobe/0002-sve-from-target is for SVE targets), in series order.
		selected := map[string]bool{}
		for _, pr := range first.Patches {
			selected[pr.ID] = true
		}
		wantIDs := []string{}
		for _, p := range in.Series.Patches {
			if p.Component == comp && selected[p.ID()] {
				wantIDs = append(wantIDs, p.ID())
			}
		}
		if got := s.PatchIDs(); len(got) < 4 || !slices.Equal(got, wantIDs) || !strings.HasSuffix(got[len(got)-1], "/0020-mid") {
			t.Errorf("%s applies %v, want series order %v", id, got, wantIDs)
		}
		if d := s.Describe(); d != "apply "+strings.Join(wantIDs, " ") {
			t.Errorf("%s is described as %q", id, d)
		}
	}
	for i := 1; i < 50; i++ {
		got, err := mk().JSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("plan %d differs from the first", i+1)
		}
	}
}

// TestStepValidate: a step of each kind without what it reads is refused,
// naming the step; the steps Make writes all pass.
func TestStepValidate(t *testing.T) {
	in := sample.Load(t, repo, "", "")
	cell, tc := in.NoCompilerToolchain(t, "kunpeng920", "gcc")
	p, err := Make(Inputs{Matrix: in.Matrix, Cell: cell, Recipe: in.Recipe, Tree: in.Tree, Version: sample.Version,
		Series: in.Series, Toolchain: tc, Lock: in.Lock, SysrootWaiver: "validate test"})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[Kind]bool{}
	for _, s := range p.Steps {
		if err := s.Validate(); err != nil {
			t.Errorf("a planned step: %v", err)
		}
		kinds[s.Kind] = true
		broken := s
		broken.Inputs, broken.Command, broken.Outputs = StepInputs{}, nil, nil
		err := broken.Validate()
		if s.Kind == KindMerge || s.Kind == KindScan {
			continue // they read nothing but their needs
		}
		if err == nil || !strings.Contains(err.Error(), s.ID) {
			t.Errorf("%s without its inputs: %v", s.ID, err)
		}
	}
	if len(kinds) < 9 {
		t.Errorf("the sample's plan has only kinds %v", kinds)
	}
	bad := Step{ID: "x", Kind: "compile"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `unknown kind "compile"`) {
		t.Errorf("unknown kind: %v", err)
	}
}
