package main

import (
	"cmp"
	"context"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/recipe"
)

// treeOptions pick a source tree and its recipe.
type treeOptions struct {
	source     string
	recipeFile string
	doris      string
	packages   []string // sources lock --packages
}

func (o *treeOptions) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.source, "source", "", "the Doris source tree (default: the bundled sample examples/minidoris)")
	cmd.Flags().StringVar(&o.recipeFile, "recipe", "", "the recipe (default: recipes/minidoris.yaml for the sample, recipes/doris.yaml otherwise)")
	cmd.Flags().StringVar(&o.doris, "doris", "", "the Doris version (default: the version the tree declares)")
	inputFlags(cmd, false, "recipe")
}

// dir is --source, else the bundled sample.
func (o *treeOptions) dir(g *globals) (string, error) {
	if o.source != "" {
		return o.source, nil
	}
	return g.data.SampleTree()
}

// resolve fills in defaults and loads the recipe.
func (o *treeOptions) resolve(g *globals) (tree string, r *recipe.Recipe, err error) {
	rf := o.recipeFile
	if tree, err = o.dir(g); err != nil {
		return "", nil, err
	}
	if rf == "" && o.source == "" {
		rf = g.data.Recipe("minidoris")
	}
	if rf == "" {
		rf = g.data.Recipe("doris")
	}
	if st, err := os.Stat(tree); err != nil || !st.IsDir() {
		return "", nil, usageErr("--source %s: not a directory", tree)
	}
	r, err = recipe.Load(rf)
	return tree, r, err
}

// planOptions are plan's and build's flags: the request's fields, and
// where sysroots are kept.
type planOptions struct {
	tree   treeOptions
	req    plan.Request
	format string
	// cache is build's --cache; sysrootCache (--sysroot-cache) overrides it
	// for sysroots: a machine-wide store a fresh step cache can share.
	cache, sysrootCache string
	// beConfigureOnly and beTargets ask for a BE slice.
	beConfigureOnly bool
	beTargets       []string
}

// flags registers what plan and build share: the tree, the targets, the
// compiler and a PGO profile.
func (o *planOptions) flags(cmd *cobra.Command, profileHelp string) {
	o.tree.flags(cmd)
	cmd.Flags().StringVar(&o.req.Targets, "target", "", "target name, comma-separated names, or all")
	cmd.Flags().StringVar(&o.req.Compiler, "compiler", "", "use this compiler of the target's list instead of the first installed")
	cmd.Flags().StringVar(&o.req.PGOProfile, "pgo-profile", "", profileHelp)
	cmd.Flags().StringVar(&o.req.AcceptLostTuning, "accept-lost-tuning", "", "build a BE whose tree fixes an -march that no patch replaces (Doris 3.0's be/CMakeLists.txt), for this reason: its objects are then not at the target's -march, and the build's scan gate warns of them instead of failing (recorded in the build record, its attestation and the report)")
	cmd.Flags().StringVar(&o.req.SysrootWaiver, "waive-sysroot", "", "build without the target OS's sysroot, against this machine's libraries, for this reason (recorded in the build record, its attestation and the report; the glibc gate is waived)")
	cmd.Flags().StringVar(&o.sysrootCache, "sysroot-cache", os.Getenv("DORISARM_SYSROOT_CACHE"), "where target-OS sysroots (and which compilers passed their check) are kept, shared by step caches; default: the cache directory ($DORISARM_SYSROOT_CACHE)")
	cmd.Flags().StringSliceVar(&o.req.Packages, "packages", nil, "only these third-party packages (names as vars.sh or build-thirdparty.sh spell them, any case) and what they need; no BE, no FE")
	cmd.Flags().BoolVar(&o.beConfigureOnly, "be-configure-only", false, "build the third-party packages (all, or --packages), then configure the BE and stop: the output is CMake's compile_commands.json; no FE, no PGO, no LTO")
	cmd.Flags().StringVar(&o.req.ThirdpartyBase, "thirdparty-base", "", "start from this prebuilt third-party install (a directory holding include/ and lib/, e.g. Doris's prebuilt thirdparty unpacked): it is copied into thirdparty/installed before any package builds, the packages built go over it, and its digest keys every step after it")
	cmd.Flags().StringSliceVar(&o.beTargets, "be-targets", nil, "configure the BE, then build only these targets of its CMake build directory (library names, or object files such as src/util/CMakeFiles/Util.dir/bitmap.cpp.o); the output is their objects and archives")
	inputFlags(cmd, true, "pgo-profile") // GCC's is a directory
}

// slice turns --be-configure-only and --be-targets into the request's slice.
func (o *planOptions) slice() error {
	switch {
	case o.beConfigureOnly && len(o.beTargets) > 0:
		return usageErr("--be-configure-only and --be-targets: give one (--be-targets configures first)")
	case o.beConfigureOnly:
		o.req.Slice = &plan.Slice{}
	case len(o.beTargets) > 0:
		o.req.Slice = &plan.Slice{Targets: o.beTargets}
	}
	return nil
}

// makePlanned plans every requested target.
func makePlanned(ctx context.Context, g *globals, o *planOptions) ([]plan.Planned, *plan.Request, error) {
	if err := o.slice(); err != nil {
		return nil, nil, err
	}
	m, err := g.loadMatrix()
	if err != nil {
		return nil, nil, err
	}
	tree, r, err := o.tree.resolve(g)
	if err != nil {
		return nil, nil, err
	}
	req := o.req
	req.Matrix, req.Tree, req.Recipe, req.Doris = m, tree, r, o.tree.doris
	req.SysrootCache = cmp.Or(o.sysrootCache, o.cache, defaultCacheDir())
	ps, err := plan.ForTargets(ctx, req)
	return ps, &req, err
}

func newPlanCmd(g *globals) *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Print the ordered build steps of a cell, with their cache keys",
		Long: `plan resolves a cell (the tree's Doris version × a target), picks the first
installed compiler the target lists, selects the patches that apply, reads the
third-party packages from the tree's thirdparty/vars.sh, and prints every step
with a content-addressed cache key. The same inputs give the same bytes.`,
		Example: `  dorisarm plan --target kunpeng920
  dorisarm plan --target all -o json
  dorisarm plan --source ~/src/doris --target graviton3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, _, err := makePlanned(cmd.Context(), g, o)
			if err != nil {
				return err
			}
			var plans []*plan.Plan
			for _, p := range ps {
				plans = append(plans, p.Plan)
			}
			return plan.Write(g.stdout, plans, o.format)
		},
	}
	o.flags(cmd, "a merged PGO profile collected on real hardware (skips training)")
	formatFlag(cmd, &o.format, "output format: "+strings.Join(plan.Formats, " or "), plan.Formats...)
	return cmd
}
