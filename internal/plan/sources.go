package plan

import (
	"errors"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/source"
)

// TreePackages are the third-party packages a tree declares for every ISA
// of the matrix (vars.sh differs per machine: vectorscan replaces
// hyperscan on aarch64), each once, with the build function that builds
// it; with only, just those packages and what they need.
func TreePackages(m *matrix.Matrix, tree string, r *recipe.Recipe, only []string) ([]source.Package, error) {
	seen := map[string]bool{}
	var pkgs []source.Package
	for _, isa := range slices.Sorted(maps.Keys(m.ISAs)) {
		ps, err := source.ReadPackages(tree, r, isa)
		if err != nil {
			return nil, fault.Input(err)
		}
		for _, p := range ps {
			if !seen[p.Name] {
				seen[p.Name] = true
				pkgs = append(pkgs, p)
			}
		}
	}
	script := filepath.Join(tree, r.Thirdparty.Build[0])
	funcs, err := source.BuildFunctions(script)
	switch {
	case err == nil:
		source.ResolveBuilds(pkgs, funcs, r, r.Thirdparty.Build[0])
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fault.Input(err)
	}
	if len(only) == 0 {
		return pkgs, nil
	}
	sel, err := SelectPackages(pkgs, r, only)
	if err != nil {
		return nil, fault.Input(err)
	}
	reads := SourcesRead(r, sel)
	var keep []source.Package
	for _, p := range pkgs {
		if sel[p.Entry] || reads[p.Entry] {
			keep = append(keep, p)
		}
	}
	return keep, nil
}
