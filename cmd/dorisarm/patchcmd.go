package main

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/patch"
)

type patchGlobals struct{ dir string }

func (p *patchGlobals) series(g *globals) (*patch.Series, error) {
	s, _, err := p.load(g)
	return s, err
}

// load reads the series and the matrix it was checked against.
func (p *patchGlobals) load(g *globals) (*patch.Series, *matrix.Matrix, error) {
	m, err := g.loadMatrix()
	if err != nil {
		return nil, nil, err
	}
	s, err := patch.LoadFor(cmp.Or(p.dir, g.data.File("patches")), m)
	return s, m, err
}

func newPatchCmd(g *globals) *cobra.Command {
	pg := &patchGlobals{}
	cmd := &cobra.Command{
		Use:   "patch",
		Short: "List, check, apply, create and refresh patch series",
		Example: `  dorisarm patch list --target kunpeng920
  dorisarm patch check --source thirdparty/src/bitshuffle-0.5.1 --component bitshuffle --version 0.5.1 --target kunpeng920`,
		Long: `Patches live in <patches>/<component>/NNNN-name.patch: a DEP-3 header
(Description, Author, Origin, Forwarded, Last-Update) with dorisarm's fields
Applies-To (component and version constraint), Targets (target names, all,
or CPU-feature selectors such as !sve) and Evidence, then a unified diff
applied with -p1. The component "doris" is the Doris tree itself.`,
	}
	cmd.PersistentFlags().StringVar(&pg.dir, "patches", "", "the patch directory (default: patches/ beside matrix.yaml, else the one built into dorisarm)")
	cmd.AddCommand(newPatchListCmd(g, pg), newPatchCheckCmd(g, pg, false), newPatchCheckCmd(g, pg, true),
		newPatchNewCmd(g, pg), newPatchRefreshCmd(g, pg))
	return cmd
}

func newPatchListCmd(g *globals, pg *patchGlobals) *cobra.Command {
	var doris, target, format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the patches, what they apply to and why",
		Example: `  dorisarm patch list
  dorisarm patch list --doris 2.1.8 --target kunpeng920
  dorisarm patch list --patches examples/minidoris/patches -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, m, err := pg.load(g)
			if err != nil {
				return err
			}
			ps, err := s.Query(m, patch.Query{Doris: doris, Target: target})
			if err != nil {
				return err
			}
			rows := patch.RowsOf(ps)
			if err := printAs(g.stdout, format, rows); err != nil || format == "json" {
				return err
			}
			fmt.Fprintf(g.stdout, "%d patches in %s\n", len(rows), s.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&doris, "doris", "", "only patches for this Doris version")
	cmd.Flags().StringVar(&target, "target", "", "only patches selected for this target")
	formatFlag(cmd, &format, "table or json", "table", "json")
	return cmd
}

func newPatchCheckCmd(g *globals, pg *patchGlobals, apply bool) *cobra.Command {
	var source, component, ver, target, format string
	use, short := "check", "Dry-run a component's patches against a source tree (exit 1 if any hunk fails)"
	if apply {
		use, short = "apply", "Apply a component's patches to a source tree, all or nothing"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Example: fmt.Sprintf(`  dorisarm patch %s --source thirdparty/src/bitshuffle-0.5.1 --component bitshuffle --version 0.5.1 --target kunpeng920
  dorisarm patch %s --source ~/src/doris --component doris --version 2.1.8`, use, use),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, m, err := pg.load(g)
			if err != nil {
				return err
			}
			res, err := s.ApplyTo(m, patch.Query{Component: component, Version: ver, Target: target}, source, !apply)
			switch {
			case res == nil && err == nil:
				fmt.Fprintf(g.stdout, "no patches in %s apply to %s %s%s\n", s.Dir, component, ver, forTarget(target))
			case res != nil && format == "json":
				return errors.Join(printJSON(g.stdout, res), err)
			case res != nil:
				res.WriteText(g.stdout, g.paint)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "the component's source tree")
	cmd.Flags().StringVar(&component, "component", "", "the component (directory name under the patch dir)")
	cmd.Flags().StringVar(&ver, "version", "", "the component's version")
	cmd.Flags().StringVar(&target, "target", "", "only patches selected for this target")
	formatFlag(cmd, &format, "table or json", "table", "json")
	return cmd
}

func forTarget(t string) string {
	if t == "" {
		return ""
	}
	return " for target " + t
}

func newPatchNewCmd(g *globals, pg *patchGlobals) *cobra.Command {
	var h patch.Header
	var n patch.NewPatch
	var format string
	cmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Write a new patch from the edits in a source tree",
		Long: `new diffs a source tree against where it came from — its git HEAD when it is
a git checkout, otherwise its pristine archive (found beside it, as Doris keeps
thirdparty/src/<pkg>.tar.gz next to thirdparty/src/<pkg>/, or given with
--pristine) — and writes <patches>/<component>/NNNN-NAME.patch with the
header filled in. Edit Description and Evidence before committing.`,
		Example: `  dorisarm patch new scalar-bitshuffle --component bitshuffle --version 0.5.1 \
      --source thirdparty/src/bitshuffle-0.5.1 --targets kunpeng920`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := pg.series(g)
			if err != nil {
				return err
			}
			n.Name, n.Header = args[0], h
			c, err := s.Create(n)
			if err != nil {
				return err
			}
			if h.Description == "" || h.Evidence == "" {
				fmt.Fprintln(g.stderr, "note: fill in Description and Evidence (the TODO lines) before committing")
			}
			return printAs(g.stdout, format, c)
		},
	}
	formatFlag(cmd, &format, "text or json", "text", "json")
	cmd.Flags().StringVar(&n.Source, "source", "", "the edited source tree")
	cmd.Flags().StringVar(&n.Component, "component", "", "the component the patch is for")
	cmd.Flags().StringVar(&n.Version, "version", "", "the component version the patch is written against (Applies-To: C = V)")
	cmd.Flags().StringVar(&n.Pristine, "pristine", "", "the unedited source: a directory or a .tar.gz")
	inputFlags(cmd, true, "pristine")
	cmd.Flags().StringVar(&n.Targets, "targets", "", "Targets: target names, all, or selectors like !sve")
	cmd.Flags().StringVar(&h.Description, "description", "", "Description (first line: summary)")
	cmd.Flags().StringVar(&h.Evidence, "evidence", "", "Evidence: the measurement or bug behind it")
	cmd.Flags().StringVar(&h.Author, "author", "", "Author (default: git user.name <user.email>)")
	cmd.Flags().StringSliceVar(&n.Ignore, "ignore", nil, "more file name globs to leave out of the diff")
	return cmd
}

func newPatchRefreshCmd(g *globals, pg *patchGlobals) *cobra.Command {
	var source, format string
	cmd := &cobra.Command{
		Use:   "refresh NAME",
		Short: "Re-anchor a patch that applies with offset or fuzz to a new upstream version",
		Long: `refresh applies the patch to --source in memory (offset and fuzz allowed),
then rewrites its diff with fresh context lines and line numbers, keeping its
header. A patch that applies cleanly is left as it is; one that fails is not
touched and the failing hunks are shown.`,
		Example: "  dorisarm patch refresh scalar-bitshuffle --source thirdparty/src/bitshuffle-0.5.2",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if source == "" {
				return usageErr("--source is required")
			}
			s, err := pg.series(g)
			if err != nil {
				return err
			}
			r, err := s.RefreshFile(args[0], source)
			if r.Result == nil {
				return err
			}
			if format == "json" {
				return errors.Join(printJSON(g.stdout, r), err)
			}
			r.Result.WriteText(g.stdout, g.paint)
			switch {
			case r.Refreshed:
				fmt.Fprintf(g.stdout, "refreshed %s\n", r.Patch)
			case err == nil:
				fmt.Fprintf(g.stdout, "%s already applies cleanly; left as it is\n", r.Patch)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "the new upstream source tree")
	formatFlag(cmd, &format, "table or json", "table", "json")
	return cmd
}
