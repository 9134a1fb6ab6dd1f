package plan

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/sample"
	"github.com/dorisarm/dorisarm/internal/source"
)

// TestNotUsed: a package the recipe says the target's machine does not
// use is not built by a plan of the whole tree, and the plan says why and
// at which line of the tree; --packages still builds it, and so does a
// tree that no longer shows it (or has no such file), with a warning.
func TestNotUsed(t *testing.T) {
	f := load(t, "")
	tree := filepath.Join(t.TempDir(), "tree")
	copyDir(t, f.Tree, tree)
	os.WriteFile(filepath.Join(tree, "be", "uses.cmake"), []byte("# which libraries\nif (ARCH_AARCH64)\n  add_thirdparty(other)\nendif()\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(tree, "be", "out.cmake"))
	mk := func(t *testing.T, target string, nu *recipe.NotUsed, packages ...string) (*Plan, error) {
		t.Helper()
		r := *f.Recipe
		r.Thirdparty.NotUsed = map[string]*recipe.NotUsed{"SIMDPROBE": nu}
		cell, tc := f.Toolchain(t, target, "")
		return Make(Inputs{Matrix: f.Matrix, Cell: cell, Recipe: &r, Tree: tree, Version: sample.Version, Series: f.Series,
			Toolchain: tc, Lock: f.Lock, SysrootWaiver: "plan unit test", Packages: packages})
	}
	onARM := func(sb recipe.ShownBy) *recipe.NotUsed {
		return &recipe.NotUsed{ISAs: []string{"aarch64"}, Why: "the BE has its own", ShownBy: sb}
	}
	builds := func(p *Plan) bool { return p.Step("thirdparty:SIMDPROBE") != nil }
	listed := func(p *Plan) bool {
		return slices.ContainsFunc(p.Packages, func(pk source.Package) bool { return pk.Entry == "SIMDPROBE" })
	}
	warned := func(p *Plan, s string) bool {
		return slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, s) })
	}

	// Shown by a line: not built on aarch64, named with the line.
	line := onARM(recipe.ShownBy{File: "be/uses.cmake", Line: `if \(ARCH_AARCH64\)`})
	p, err := mk(t, "graviton3", line)
	if err != nil {
		t.Fatal(err)
	}
	if builds(p) || listed(p) || len(p.NotUsed) != 1 || p.NotUsed[0].Where != "be/uses.cmake:2" || p.NotUsed[0].Why != "the BE has its own" || p.NotUsed[0].Built {
		t.Errorf("graviton3: built %v, listed %v, not used %+v", builds(p), listed(p), p.NotUsed)
	}
	var out strings.Builder
	p.WriteTable(&out)
	if !strings.Contains(out.String(), "not used  SIMDPROBE") || !strings.Contains(out.String(), "(be/uses.cmake:2)") {
		t.Errorf("the printed plan does not say it:\n%s", out.String())
	}
	// Another ISA uses it.
	if p, err := mk(t, "x86_64", line); err != nil || !builds(p) || len(p.NotUsed) != 0 {
		t.Errorf("x86_64: %v %+v", err, p)
	}
	// Asked for by name: built, said so.
	p, err = mk(t, "graviton3", line, "simdprobe")
	if err != nil || !builds(p) || len(p.NotUsed) != 1 || !p.NotUsed[0].Built || !warned(p, "--packages names it") {
		t.Errorf("--packages simdprobe: %v built %v %+v %q", err, builds(p), p.NotUsed, p.Warnings)
	}
	// Shown by the absence of a pattern.
	p, err = mk(t, "graviton3", onARM(recipe.ShownBy{File: "be/uses.cmake", Absent: `simdprobe`}))
	if err != nil || builds(p) || len(p.NotUsed) != 1 || p.NotUsed[0].Where != "be/uses.cmake" {
		t.Errorf("absent: %v built %v %+v", err, builds(p), p.NotUsed)
	}
	// A tree that no longer shows it, or lacks the file: built, with a warning.
	for _, c := range []struct {
		sb   recipe.ShownBy
		warn string
	}{
		{recipe.ShownBy{File: "be/uses.cmake", Line: `ARCH_RISCV`}, "be/uses.cmake (no line matches ARCH_RISCV) no longer shows that"},
		{recipe.ShownBy{File: "be/uses.cmake", Absent: `add_thirdparty\(other\)`}, "be/uses.cmake:3 (matches add_thirdparty\\(other\\)) no longer shows that"},
		{recipe.ShownBy{File: "be/gone.cmake", Line: `x`}, "this tree has no be/gone.cmake to show it"},
	} {
		p, err := mk(t, "graviton3", onARM(c.sb))
		if err != nil || !builds(p) || len(p.NotUsed) != 0 || !warned(p, c.warn) {
			t.Errorf("%+v: %v built %v %+v\n%q", c.sb, err, builds(p), p.NotUsed, p.Warnings)
		}
	}
	// A link out of the tree is not followed.
	if _, err := mk(t, "graviton3", onARM(recipe.ShownBy{File: "be/out.cmake", Line: `root`})); err == nil || !strings.Contains(err.Error(), "not_used.SIMDPROBE") {
		t.Errorf("a link out of the tree: %v", err)
	}
	// An ISA the matrix does not have.
	if _, err := mk(t, "graviton3", &recipe.NotUsed{ISAs: []string{"arm64"}, Why: "w", ShownBy: line.ShownBy}); err == nil || !strings.Contains(err.Error(), `names "arm64", which is not an ISA`) {
		t.Errorf("unknown ISA: %v", err)
	}
}
