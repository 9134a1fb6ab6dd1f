package plan

import (
	"context"
	"strings"
	"testing"
)

// TestRuntimeStepShared plans a recipe that needs GCC 12's C++ library
// for three aarch64 targets of three OSes and for x86_64: each plan has
// the matrix's runtime step before the compiler's check, with one key per
// ISA (the runtime is built against the sysroot capped at its own glibc,
// not the cell's, by GCC whatever the cell's compiler), every C++ compile
// reads its headers and every link its archives, and nothing is
// unbuildable.
func TestRuntimeStepShared(t *testing.T) {
	f := load(t, "")
	r := *f.Recipe
	r.LibstdcxxMin = "12"
	ps, err := ForTargets(context.Background(), Request{Matrix: f.Matrix, Targets: "generic-armv8,kunpeng920,graviton3,x86_64",
		Tree: f.Tree, Recipe: &r, SysrootCache: t.TempDir()})
	if err != nil {
		t.Skip(err) // compilers not installed
	}
	keys := map[string]string{}
	for _, p := range ps {
		pl := p.Plan
		target := pl.Cell.Target
		if pl.Unbuildable != "" {
			t.Errorf("%s: unbuildable: %s", target, pl.Unbuildable)
		}
		rs := pl.Step("runtime:gcc-12")
		if rs == nil || rs.Inputs.Runtime == nil || p.Runtime == nil {
			t.Fatalf("%s: no runtime step", target)
		}
		isa := rs.Inputs.Runtime.Triple
		if k, ok := keys[isa]; ok && k != rs.Key {
			t.Errorf("%s: runtime key %s, another cell of %s has %s", target, rs.Key, isa, k)
		}
		keys[isa] = rs.Key
		if in := rs.Inputs.Runtime; in.Glibc != "2.17" || in.Compiler.Compiler != "gcc" || in.Source.Size == 0 || !strings.HasPrefix(in.ScriptSHA256, "sha256:") {
			t.Errorf("%s: runtime inputs %+v", target, in)
		}
		var tc *Step
		for i := range pl.Steps {
			if pl.Steps[i].Kind == KindToolchain {
				tc = &pl.Steps[i]
			}
		}
		if tc == nil || !strings.Contains(strings.Join(tc.Needs, " "), "runtime:gcc-12") {
			t.Errorf("%s: the compiler's check does not wait for the runtime: %+v", target, tc)
		}
		for _, phase := range []string{PhaseRelease, PhaseThirdparty} {
			fl := strings.Join(pl.Phases[phase], " ")
			if !strings.Contains(fl, "c++:$TOOLCHAIN/cxxrt/include/c++/12") || !strings.Contains(fl, "link:-L$TOOLCHAIN/cxxrt/lib") || !strings.Contains(fl, "c++:-nostdinc++") {
				t.Errorf("%s: %s flags do not use the runtime: %s", target, phase, fl)
			}
		}
	}
	if len(keys) != 2 || keys["aarch64-linux-gnu"] == keys["x86_64-linux-gnu"] {
		t.Errorf("runtime keys per ISA: %v", keys)
	}

	// A recipe the sysroot's own library serves plans no runtime.
	ps, err = ForTargets(context.Background(), Request{Matrix: f.Matrix, Targets: "kunpeng920", Tree: f.Tree, Recipe: f.Recipe, SysrootCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Plan.Step("runtime:gcc-12") != nil || ps[0].Runtime != nil {
		t.Error("a recipe without libstdcxx_min plans a runtime")
	}
}

// TestNoRuntimeNewEnough: a recipe that needs a newer C++ library than
// the sysroot's and its runtime's is unbuildable, and says where to name
// one.
func TestNoRuntimeNewEnough(t *testing.T) {
	f := load(t, "")
	r := *f.Recipe
	r.LibstdcxxMin = "13"
	ps, err := ForTargets(context.Background(), Request{Matrix: f.Matrix, Targets: "graviton3", Tree: f.Tree, Recipe: &r,
		SysrootCache: t.TempDir(), Slice: nil})
	if err != nil {
		t.Skip(err)
	}
	p := ps[0].Plan
	if p.Step("runtime:gcc-12") != nil {
		t.Error("a runtime of GCC 12 planned for a recipe that needs 13")
	}
	if !strings.Contains(p.Unbuildable, "no C++ runtime new enough (sysroots.debian-11-arm64.runtime)") || !strings.Contains(p.Unbuildable, "runtimes in") {
		t.Errorf("unbuildable: %q", p.Unbuildable)
	}
}
