// Package sample loads the bundled sample (matrix.yaml, recipes/minidoris.yaml,
// its patches, lock and tree) for tests of the packages that plan and build
// it, so that each of them sets up the same inputs the same way.
package sample

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/patch"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/source"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// Series is the sample's Doris series and Version the tree's version.
const (
	Series  = "2.1"
	Version = "2.1.8"
)

// Inputs is what a plan of the sample is made from.
type Inputs struct {
	Matrix *matrix.Matrix
	Recipe *recipe.Recipe
	Tree   string
	Series *patch.Series
	Lock   *source.Lock
}

// Load reads the sample below the repository root repo. patchDir replaces
// the recipe's patch directory when not empty; tree the sample tree.
func Load(t testing.TB, repo, patchDir, tree string) *Inputs {
	t.Helper()
	m, err := matrix.Load(filepath.Join(repo, "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := recipe.Load(filepath.Join(repo, "recipes", "minidoris.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if patchDir == "" {
		patchDir = r.Path(r.Patches)
	}
	if tree == "" {
		tree = filepath.Join(repo, "examples", "minidoris")
	}
	s, err := patch.LoadSeries(patchDir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := source.ReadLock(r.Path(r.Lock))
	if err != nil {
		t.Fatal(err)
	}
	return &Inputs{Matrix: m, Recipe: r, Tree: tree, Series: s, Lock: l}
}

// Toolchain resolves target's cell and compiler (the first installed one of
// the target's list when compiler is empty); it skips the test when the
// compiler is not installed.
func (in *Inputs) Toolchain(t testing.TB, target, compiler string) (matrix.Cell, *toolchain.Toolchain) {
	t.Helper()
	cell, err := in.Matrix.Cell(Series, target)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := toolchain.Resolve(in.Matrix, cell, toolchain.Options{Compiler: compiler})
	if err != nil {
		t.Skipf("compiler not installed: %v", err)
	}
	return cell, tc
}

// NoCompilerToolchain is target's cell with a toolchain that names the
// target's compiler (or compiler) but points at no installed one: its
// identity is made up and nothing is probed. Plans made with it are real
// plans of the sample; builds with it run only with an Options.Exec that
// does not start the compiler. It builds natively (no emulator shim), for
// tests that need neither a compiler nor qemu.
func (in *Inputs) NoCompilerToolchain(t testing.TB, target, compiler string) (matrix.Cell, *toolchain.Toolchain) {
	t.Helper()
	cell, err := in.Matrix.Cell(Series, target)
	if err != nil {
		t.Fatal(err)
	}
	if compiler == "" {
		compiler = cell.Target.Compilers[0]
	}
	cc, ok := in.Matrix.Compilers[compiler]
	if !ok {
		t.Fatalf("matrix has no compiler %q", compiler)
	}
	// Never run, and the same for every call: plans made with it are equal.
	home := "/nonexistent/dorisarm-no-compiler"
	tc := &toolchain.Toolchain{
		Cell: cell, Compiler: cc, Home: home, CC: filepath.Join(home, "bin", cc.CC), CXX: filepath.Join(home, "bin", cc.CXX),
		Host: in.Matrix.ISAs[toolchain.HostISA()], Tools: map[string]string{},
		Identity: toolchain.Identity{Name: cc.Name, Dialect: cc.Dialect, Path: filepath.Join(home, "bin", cc.CC), Version: "0.0.0-none",
			Banner: "no compiler (sample.NoCompilerToolchain)", Digest: "none", Tools: map[string]string{}},
	}
	return cell, tc
}

// ManyPatches writes a copy of the sample's patch series with three more
// patches in each component, numbered so that their number order (the
// order they apply in) differs from their name order, and returns its
// directory. The added patches differ from the original only in their
// description, so a plan selects them for the same cells.
func ManyPatches(t testing.TB, repo string) string {
	t.Helper()
	src := filepath.Join(repo, "examples", "minidoris", "patches")
	dir := t.TempDir()
	comps, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, comp := range comps {
		if !comp.IsDir() {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(src, comp.Name(), "*.patch"))
		if len(files) == 0 {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, comp.Name()), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, comp.Name(), filepath.Base(f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		first, _ := os.ReadFile(files[0])
		for _, name := range []string{"0012-zeta", "0013-alpha", "0020-mid"} {
			data := strings.Replace(string(first), "Description: ", "Description: ("+name+") ", 1)
			if err := os.WriteFile(filepath.Join(dir, comp.Name(), name+".patch"), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}
