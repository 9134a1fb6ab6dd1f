package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/recipe"
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

// treePackages are the packages of the tree o names, and its recipe.
func treePackages(g *globals, o *treeOptions) (string, *recipe.Recipe, []source.Package, error) {
	m, err := g.loadMatrix()
	if err != nil {
		return "", nil, nil, err
	}
	tree, r, err := o.resolve(g)
	if err != nil {
		return "", nil, nil, err
	}
	pkgs, err := plan.TreePackages(m, tree, r, o.packages)
	return tree, r, pkgs, err
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
			_, r, pkgs, err := treePackages(g, o)
			if err != nil {
				return err
			}
			lock, err := source.ReadLock(r.Path(r.Lock))
			if err != nil {
				return fault.Input(err)
			}
			return printAs(g.stdout, format, lock.Pins(pkgs))
		},
	}
	o.flags(cmd)
	formatFlag(cmd, &format, "table or json", "table", "json")
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
			tree, r, pkgs, err := treePackages(g, o)
			if err != nil {
				return err
			}
			lockPath := r.Path(r.Lock)
			if err := datafs.Writable(lockPath, "pass --recipe FILE (the lock is written beside it)"); err != nil {
				return err
			}
			lock, err := source.ReadLock(lockPath)
			if err != nil {
				return fault.Input(err)
			}
			mir := source.MirrorFor(mirror, r.Thirdparty.Mirror, tree)
			out, missing, err := source.LockFile(lockPath, lock, pkgs, mir, update)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(g.stdout, map[string]any{"lock": lockPath, "archives": out.Archives})
			}
			fmt.Fprintf(g.stdout, "pinned %d archives in %s\n", len(pkgs)-len(missing), lockPath)
			if len(missing) > 0 {
				fmt.Fprintf(g.stderr, "warning: %d archive(s) are not in %s and stay unpinned (listed under \"missing\" in the lock): %s\n", len(missing), mir, strings.Join(missing, ", "))
			}
			return nil
		},
	}
	o.flags(cmd)
	formatFlag(cmd, &format, "text or json", "text", "json")
	cmd.Flags().StringVar(&mirror, "mirror", "", "where the archives are (default: the recipe's mirror)")
	cmd.Flags().BoolVar(&update, "update", false, "accept archives whose sha256 changed from the pin")
	cmd.Flags().StringSliceVar(&o.packages, "packages", nil, "only these packages (as vars.sh or build-thirdparty.sh name them) and what they need")
	return cmd
}
