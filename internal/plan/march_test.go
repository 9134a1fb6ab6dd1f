package plan

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/patch"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// marchPatch is the real BE -march patch and a tree whose
// be/CMakeLists.txt holds what it replaces, shifted by lead lines (as
// branch-3.0 and master of 2024-11 hold it at other lines than 2.1).
func marchTree(t *testing.T, lead int) (*patch.Patch, string, int) {
	t.Helper()
	s, err := patch.LoadSeries(filepath.Join(repo, "patches"))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(s.Patches, func(p *patch.Patch) bool { return p.ID() == "doris/0002-be-march-from-build" })
	if i < 0 {
		t.Fatal("patches/doris/0002-be-march-from-build.patch is gone: the test has nothing to check")
	}
	pt := s.Patches[i]
	fds, err := pt.Files()
	if err != nil || len(fds) != 1 || len(fds[0].Hunks) != 1 {
		t.Fatalf("the BE -march patch's shape changed: %v", err)
	}
	lines := append(make([]string, lead), fds[0].Hunks[0].Old()...)
	at := 0
	for n, l := range lines {
		if strings.Contains(l, "-march=armv8-a+crc") {
			at = n + 1
		}
	}
	tree := t.TempDir()
	os.MkdirAll(filepath.Join(tree, "be", "cmake"), 0o755)
	os.WriteFile(filepath.Join(tree, "be", "CMakeLists.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(tree, "be", "cmake", "thirdparty.cmake"), []byte("# -march=armv8-a in a comment is not a flag\nadd_compile_options(-march=${ARM_MARCH})\n"), 0o644)
	return pt, tree, at
}

// TestFixedMarchFound: a literal -march in the recipe's fixed_march files
// is found at its line unless a selected patch removes that line;
// comments and variables are not literal -march flags.
func TestFixedMarchFound(t *testing.T) {
	pt, tree, at := marchTree(t, 9)
	globs := []string{"be/CMakeLists.txt", "be/cmake/*.cmake"}
	got, err := fixedMarches(tree, globs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].File != "be/CMakeLists.txt" || got[0].Line != at || got[0].Text != "add_compile_options(-march=armv8-a+crc)" {
		t.Errorf("with no patch: %+v, want be/CMakeLists.txt:%d", got, at)
	}
	if got, err := fixedMarches(tree, globs, []*patch.Patch{pt}); err != nil || len(got) != 0 {
		t.Errorf("with the BE -march patch: %+v %v, want nothing", got, err)
	}
	// A link out of the tree is not read.
	os.Remove(filepath.Join(tree, "be", "CMakeLists.txt"))
	outside := filepath.Join(t.TempDir(), "CMakeLists.txt")
	os.WriteFile(outside, []byte("add_compile_options(-march=armv8-a)\n"), 0o644)
	os.Symlink(outside, filepath.Join(tree, "be", "CMakeLists.txt"))
	if got, err := fixedMarches(tree, globs, nil); err != nil || len(got) != 0 {
		t.Errorf("through a link out of the tree: %+v %v", got, err)
	}
}

// TestPlanRefusesFixedMarch: a plan that builds the BE from a tree that
// fixes an -march no selected patch replaces is refused, naming the file
// and line and the ways out; --accept-lost-tuning plans it and records
// the reason and the lines in the cell; a --packages plan compiles no
// BE unit and is not refused.
func TestPlanRefusesFixedMarch(t *testing.T) {
	f := load(t, "")
	f.Recipe.FixedMarch = []string{"be/CMakeLists.txt"}
	tree := t.TempDir()
	if err := os.CopyFS(tree, os.DirFS(f.Tree)); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(tree, "be"), 0o755)
	os.WriteFile(filepath.Join(tree, "be", "CMakeLists.txt"), []byte("project(be)\nadd_compile_options(-march=armv8-a+crc)\n"), 0o644)
	cell, _ := f.Matrix.Cell("2.1", "kunpeng920")
	tc, err := toolchain.Resolve(f.Matrix, cell, toolchain.Options{})
	if err != nil {
		t.Skip(err)
	}
	in := Inputs{Matrix: f.Matrix, Cell: cell, Recipe: f.Recipe, Tree: tree, Version: "2.1.8", Series: f.Series, Toolchain: tc, Lock: f.Lock, SysrootWaiver: "plan unit test"}
	_, err = Make(in)
	if err == nil || !strings.Contains(err.Error(), "be/CMakeLists.txt:2: add_compile_options(-march=armv8-a+crc)") || !strings.Contains(err.Error(), "--accept-lost-tuning") {
		t.Fatalf("plan of a tree that fixes -march: %v", err)
	}
	in.AcceptLostTuning = "no patch for this trunk yet"
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Cell.LostTuning != in.AcceptLostTuning || len(p.Cell.FixedMarch) != 1 || p.Cell.FixedMarch[0].Line != 2 {
		t.Errorf("accepted: cell %q %+v", p.Cell.LostTuning, p.Cell.FixedMarch)
	}
	in.AcceptLostTuning = ""
	in.Packages = []string{"MINILZ"}
	if _, err := Make(in); err != nil {
		t.Errorf("a --packages plan compiles no BE unit: %v", err)
	}
	// A tree whose fixed_march files fix nothing: an acceptance is still
	// recorded (the scan gate fails on the BE's objects below the
	// target's -march wherever it came from, and honours it), with no
	// lines; without one nothing is.
	in.Packages = nil
	os.WriteFile(filepath.Join(tree, "be", "CMakeLists.txt"), []byte("project(be)\nadd_compile_options(-march=${ARM_MARCH})\n"), 0o644)
	if p, err = Make(in); err != nil {
		t.Fatal(err)
	}
	if p.Cell.LostTuning != "" {
		t.Errorf("nothing fixed, nothing accepted: cell %q", p.Cell.LostTuning)
	}
	in.AcceptLostTuning = "an -march set outside the recipe's fixed_march files"
	if p, err = Make(in); err != nil {
		t.Fatal(err)
	}
	if p.Cell.LostTuning != in.AcceptLostTuning || len(p.Cell.FixedMarch) != 0 || !strings.Contains(strings.Join(p.Warnings, "\n"), "the scan gate will only warn") {
		t.Errorf("nothing fixed, accepted: cell %q %+v, warnings %q", p.Cell.LostTuning, p.Cell.FixedMarch, p.Warnings)
	}
}
