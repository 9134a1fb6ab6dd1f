package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/source"
)

func newSourcesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sources",
		Short: "List and pin the third-party archives a tree declares",
		Example: `  dorisarm sources list
  dorisarm sources lock --source ~/src/doris --mirror /srv/doris-thirdparty`,
	}
	cmd.AddCommand(newSourcesListCmd(g), newSourcesLockCmd(g))
	return cmd
}

// mirrorFor resolves the mirror: the flag, else the recipe's (relative to the tree).
func mirrorFor(flag, recipeMirror, tree string) string {
	m := flag
	if m == "" {
		m = recipeMirror
	}
	if m == "" || strings.Contains(m, "://") || filepath.IsAbs(m) {
		return m
	}
	if flag != "" {
		return m
	}
	return filepath.Join(tree, m)
}

// allPackages reads the tree's packages for every ISA in the matrix (vars.sh
// differs per machine: vectorscan replaces hyperscan on aarch64).
func allPackages(g *globals, tree string, o *treeOptions) ([]source.Package, *source.Lock, string, string, error) {
	m, err := g.loadMatrix()
	if err != nil {
		return nil, nil, "", "", err
	}
	_, r, err := o.resolve(g)
	if err != nil {
		return nil, nil, "", "", err
	}
	seen := map[string]bool{}
	var pkgs []source.Package
	for _, isa := range slices.Sorted(maps.Keys(m.ISAs)) {
		ps, err := source.ReadPackages(tree, r, isa)
		if err != nil {
			return nil, nil, "", "", fault.Input(err)
		}
		for _, p := range ps {
			if !seen[p.Name] {
				seen[p.Name] = true
				pkgs = append(pkgs, p)
			}
		}
	}
	if funcs, err := source.BuildFunctions(filepath.Join(tree, r.Thirdparty.Build[0])); err == nil {
		source.ResolveBuilds(pkgs, funcs, r, r.Thirdparty.Build[0])
	}
	if len(o.packages) > 0 {
		sel, err := plan.SelectPackages(pkgs, r, o.packages)
		if err != nil {
			return nil, nil, "", "", fault.Input(err)
		}
		var keep []source.Package
		for _, p := range pkgs {
			if sel[p.Entry] {
				keep = append(keep, p)
			}
		}
		pkgs = keep
	}
	lockPath := r.Path(r.Lock)
	lock, err := source.ReadLock(lockPath)
	return pkgs, lock, lockPath, r.Thirdparty.Mirror, fault.Input(err)
}

// sortedKeys are a map's keys in order.
// missingOf are the archives of pkgs the lock lists as missing.
func missingOf(l *source.Lock, pkgs []source.Package) []string {
	want := map[string]bool{}
	for _, p := range pkgs {
		want[p.Name] = true
	}
	var out []string
	for _, m := range l.Missing {
		if want[m] {
			out = append(out, m)
		}
	}
	return out
}

func newSourcesListCmd(g *globals) *cobra.Command {
	o := &treeOptions{}
	var format string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the tree's third-party packages and whether each archive is pinned",
		Example: "  dorisarm sources list\n  dorisarm sources list --source ~/src/doris\n  dorisarm sources list -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			tree, _, err := o.resolve(g)
			if err != nil {
				return err
			}
			pkgs, lock, _, _, err := allPackages(g, tree, o)
			if err != nil {
				return err
			}
			if format == "json" {
				type row struct {
					Entry   string `json:"entry"`
					Version string `json:"version"`
					Archive string `json:"archive"`
					MD5     string `json:"md5"`
					SHA256  string `json:"sha256,omitempty"`
				}
				rows := []row{}
				for _, p := range pkgs {
					rows = append(rows, row{p.Entry, p.Version, p.Name, p.MD5, lock.Archives[p.Name].SHA256})
				}
				return printJSON(g.stdout, rows)
			}
			rows := [][]string{{"ENTRY", "VERSION", "ARCHIVE", "MD5", "SHA256 (lock)"}}
			for _, p := range pkgs {
				pin := "unpinned"
				if e, ok := lock.Archives[p.Name]; ok {
					pin = e.SHA256[:16] + "…"
				}
				rows = append(rows, []string{p.Entry, p.Version, p.Name, p.MD5, pin})
			}
			table(g.stdout, rows)
			return nil
		},
	}
	o.flags(cmd)
	formatFlag(cmd, &format, "table", "table or json")
	return cmd
}

func newSourcesLockCmd(g *globals) *cobra.Command {
	o := &treeOptions{}
	var mirror, format string
	var update bool
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Fetch every archive from a mirror, check it against vars.sh's MD5 and pin its sha256",
		Long: `lock reads the packages the tree declares (for every ISA in the matrix),
fetches each archive from the mirror (a directory, file:// or http(s):// URL laid
out like Doris's REPOSITORY_URL), refuses any whose MD5 differs from vars.sh or
whose sha256 differs from an existing pin, and writes the recipe's lock file.`,
		Example: `  dorisarm sources lock
  dorisarm sources lock --source ~/src/doris --mirror /srv/doris-thirdparty`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			tree, _, err := o.resolve(g)
			if err != nil {
				return err
			}
			pkgs, lock, lockPath, recipeMirror, err := allPackages(g, tree, o)
			if err != nil {
				return err
			}
			if err := datafs.Writable(lockPath, "pass --recipe FILE (the lock is written beside it)"); err != nil {
				return err
			}
			mir := mirrorFor(mirror, recipeMirror, tree)
			if mir == "" {
				return usageErr("no mirror: pass --mirror DIR|URL")
			}
			out, err := source.LockPackages(lock, pkgs, mir, update)
			if err != nil {
				return fault.Gate(fmt.Errorf("nothing written to %s:\n%v", lockPath, err))
			}
			if m := missingOf(out, pkgs); len(m) == len(pkgs) {
				return fault.Gate(fmt.Errorf("nothing written to %s: %s has none of the %d archives (is --mirror right?)", lockPath, mir, len(pkgs)))
			}
			if err := out.Write(lockPath); err != nil {
				return err
			}
			if format == "json" {
				return printJSON(g.stdout, map[string]any{"lock": lockPath, "archives": out.Archives})
			}
			fmt.Fprintf(g.stdout, "pinned %d archives in %s\n", len(pkgs)-len(missingOf(out, pkgs)), lockPath)
			if m := missingOf(out, pkgs); len(m) > 0 {
				fmt.Fprintf(g.stderr, "warning: %d archive(s) are not in %s and stay unpinned (listed under \"missing\" in the lock): %s\n", len(m), mir, strings.Join(m, ", "))
			}
			return nil
		},
	}
	o.flags(cmd)
	formatFlag(cmd, &format, "text", "text or json")
	cmd.Flags().StringVar(&mirror, "mirror", "", "where the archives are (default: the recipe's mirror)")
	cmd.Flags().BoolVar(&update, "update", false, "accept archives whose sha256 changed from the pin")
	cmd.Flags().StringSliceVar(&o.packages, "packages", nil, "only these packages (as vars.sh or build-thirdparty.sh name them) and what they need")
	return cmd
}
