package plan

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/source"
)

// treeFacts completes the packages with what the tree's own scripts say:
// the build function build-thirdparty.sh has for each, and the patches its
// download script applies to each (recipes with thirdparty.patches_from).
func treeFacts(in Inputs, pkgs []source.Package) error {
	r := in.Recipe
	script := r.Thirdparty.Build[0]
	if funcs, err := source.BuildFunctions(filepath.Join(in.Tree, script)); err == nil {
		source.ResolveBuilds(pkgs, funcs, r, script)
	}
	if order, err := source.BuildOrder(filepath.Join(in.Tree, script)); err == nil {
		OrderByScript(pkgs, order)
	}
	if r.Thirdparty.PatchesFrom == "" {
		return nil
	}
	tp, err := source.ReadTreePatchesMemo(in.Tree, r, r.Thirdparty.PatchesFrom, in.Cell.ISA.Name, in.Memo)
	if err != nil {
		return err
	}
	for i := range pkgs {
		if pkgs[i].Source == "" {
			continue
		}
		pkgs[i].Patches = tp.BySource[pkgs[i].Source]
		pkgs[i].Unsupported = tp.Other[pkgs[i].Source]
	}
	return nil
}

// OrderByScript sorts packages (stably) into the order the tree's
// build-thirdparty.sh builds them in when given none (order: its build
// names): a package built alone then comes where the script would build
// it, after what the script builds before it. Packages the order does not
// name (no build of their own, or built only on request) keep their
// vars.sh order after those it names. The plan then also puts every
// package after its recipe deps.
func OrderByScript(pkgs []source.Package, order []string) {
	if len(order) == 0 {
		return
	}
	rank := map[string]int{}
	for i, n := range order {
		if _, seen := rank[n]; !seen {
			rank[n] = i
		}
	}
	pos := func(pk source.Package) int {
		if i, ok := rank[pk.Build]; ok && pk.Build != "" {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(pkgs, func(a, b source.Package) int { return cmp.Compare(pos(a), pos(b)) })
}

// recipeMarked reports whether the recipe says the entry has no build of its own.
func recipeMarked(r *recipe.Recipe, entry string) bool {
	names, ok := r.Thirdparty.BuildNames[entry]
	return ok && len(names) == 0
}

// SelectPackages resolves names (TP_ARCHIVES entries or build-thirdparty.sh
// names, any case) to entries, with everything they depend on.
func SelectPackages(pkgs []source.Package, r *recipe.Recipe, names []string) (map[string]bool, error) {
	byName := map[string]string{}
	for _, pk := range pkgs {
		byName[strings.ToLower(pk.Entry)] = pk.Entry
	}
	for _, pk := range pkgs {
		if pk.Build != "" {
			if _, taken := byName[pk.Build]; !taken {
				byName[pk.Build] = pk.Entry
			}
		}
	}
	sel := map[string]bool{}
	var visit func(entry string)
	visit = func(entry string) {
		if sel[entry] {
			return
		}
		sel[entry] = true
		for _, d := range r.Thirdparty.Deps[entry] {
			if _, ok := findPackage(pkgs, d); ok {
				visit(d)
			}
		}
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		entry, ok := byName[strings.ToLower(n)]
		if !ok {
			var known []string
			for _, pk := range pkgs {
				if pk.Build != "" {
					known = append(known, strings.ToLower(pk.Entry))
				}
			}
			sort.Strings(known)
			return nil, fmt.Errorf("--packages: %q is not a package of this tree's %s (packages with a build: %s)", n, r.Thirdparty.Vars, strings.Join(known, ", "))
		}
		pk, _ := findPackage(pkgs, entry)
		if pk.Build == "" {
			return nil, fmt.Errorf("--packages: %s cannot be built on its own: %s", entry, pk.NoBuild)
		}
		visit(entry)
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("--packages: no package named")
	}
	return sel, nil
}

// SourcesRead are the packages whose sources the selected packages' builds
// read (the recipe's thirdparty.source_reads) that the selection does not
// build: only their sources are made.
func SourcesRead(r *recipe.Recipe, sel map[string]bool) map[string]bool {
	out := map[string]bool{}
	for entry := range sel {
		for _, d := range r.Thirdparty.SourceReads[entry] {
			if !sel[d] {
				out[d] = true
			}
		}
	}
	return out
}

// unpackInputs are what dorisarm's own unpack of a package reads: the
// archive (through its fetch step's key), where it unpacks to and the
// tree's patches for it, by content.
func unpackInputs(pk source.Package, r *recipe.Recipe) *UnpackInputs {
	in := &UnpackInputs{Unpacker: "dorisarm/1", Archive: pk.Name, Source: pk.Source,
		TreePatches: append([]source.DorisPatch(nil), pk.Patches...), Unsupported: append([]string(nil), pk.Unsupported...),
		Package: pk.Entry, Version: pk.Version}
	if len(in.Unsupported) > 0 {
		in.InArchive = append([]string(nil), r.Thirdparty.InArchive[pk.Entry]...)
	}
	if vf := r.Thirdparty.VersionFiles[pk.Entry]; vf != nil {
		in.VersionFrom = &source.VersionFrom{File: vf.File, Match: vf.Match}
	}
	return in
}

// scriptsDigest identifies what third-party steps read of the tree: its
// third-party directory (without sources and installs) and the files the
// recipe says its scripts read from elsewhere.
func scriptsDigest(tree, tpDir string, ignore, reads []string) (string, error) {
	d, err := source.TreeDigest(filepath.Join(tree, tpDir), ignore)
	if err != nil || len(reads) == 0 {
		return d, err
	}
	parts := []string{d}
	for _, rd := range reads {
		fd, err := source.FileDigest(filepath.Join(tree, filepath.FromSlash(rd)))
		if err != nil {
			fd = "absent"
		}
		parts = append(parts, rd+"="+fd)
	}
	return source.StringDigest(strings.Join(parts, "\n")), nil
}
