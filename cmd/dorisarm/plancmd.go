package main

import (
	"context"
	"fmt"
	"io"
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
}

// resolve fills in defaults and loads the recipe.
func (o *treeOptions) resolve(g *globals) (tree string, r *recipe.Recipe, err error) {
	tree, rf := o.source, o.recipeFile
	if tree == "" {
		if tree, err = g.data.SampleTree(); err != nil {
			return "", nil, err
		}
		if rf == "" {
			rf = g.data.Recipe("minidoris")
		}
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

type planOptions struct {
	tree       treeOptions
	targets    string
	compiler   string
	pgoProfile string
	packages   []string
	format     string
	waiver     string // --waive-sysroot
	cache      string // where sysroots are kept (build's --cache)
	// sysrootCache overrides cache for sysroots (--sysroot-cache): a
	// machine-wide store that a fresh step cache can share.
	sysrootCache string
}

// flags registers what plan and build share: the tree, the targets, the
// compiler and a PGO profile.
func (o *planOptions) flags(cmd *cobra.Command, profileHelp string) {
	o.tree.flags(cmd)
	cmd.Flags().StringVar(&o.targets, "target", "", "target name, comma-separated names, or all")
	cmd.Flags().StringVar(&o.compiler, "compiler", "", "use this compiler of the target's list instead of the first installed")
	cmd.Flags().StringVar(&o.pgoProfile, "pgo-profile", "", profileHelp)
	cmd.Flags().StringVar(&o.waiver, "waive-sysroot", "", "build without the target OS's sysroot, against this machine's libraries, for this reason (recorded in the build record, its attestation and the report; the glibc gate is waived)")
	cmd.Flags().StringVar(&o.sysrootCache, "sysroot-cache", os.Getenv("DORISARM_SYSROOT_CACHE"), "where target-OS sysroots (and which compilers passed their check) are kept, shared by step caches; default: the cache directory ($DORISARM_SYSROOT_CACHE)")
	cmd.Flags().StringSliceVar(&o.packages, "packages", nil, "only these third-party packages (names as vars.sh or build-thirdparty.sh spell them, any case) and what they need; no BE, no FE")
}

// makePlanned plans every requested target.
func makePlanned(ctx context.Context, g *globals, o *planOptions) ([]plan.Planned, *plan.Request, error) {
	m, err := g.loadMatrix()
	if err != nil {
		return nil, nil, err
	}
	tree, r, err := o.tree.resolve(g)
	if err != nil {
		return nil, nil, err
	}
	cache := o.sysrootCache
	if cache == "" {
		cache = o.cache
	}
	if cache == "" {
		cache = defaultCacheDir()
	}
	req := &plan.Request{Matrix: m, Targets: o.targets, Tree: tree, Recipe: r, Doris: o.tree.doris, Compiler: o.compiler,
		PGOProfile: o.pgoProfile, Packages: o.packages, SysrootWaiver: o.waiver, SysrootCache: cache}
	ps, err := plan.ForTargets(ctx, *req)
	return ps, req, err
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
  dorisarm plan --target all --format json
  dorisarm plan --source ~/src/doris --target graviton3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(o.format, planFormats...); err != nil {
				return err
			}
			ps, _, err := makePlanned(cmd.Context(), g, o)
			if err != nil {
				return err
			}
			var plans []*plan.Plan
			for _, p := range ps {
				plans = append(plans, p.Plan)
			}
			return writePlans(g.stdout, plans, o.format)
		},
	}
	o.flags(cmd, "a merged PGO profile collected on real hardware (skips training)")
	formatFlag(cmd, &o.format, "table", "output format: "+strings.Join(planFormats, " or "))
	return cmd
}

// planFormats are the output formats of plan, each the same bytes for the
// same plans.
var planFormats = []string{"table", "json"}

// writePlans prints plans in format (one of planFormats).
func writePlans(w io.Writer, plans []*plan.Plan, format string) error {
	switch format {
	case "json":
		if len(plans) != 1 {
			return printJSON(w, plans)
		}
		b, err := plans[0].JSON()
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "table":
		for i, p := range plans {
			if i > 0 {
				fmt.Fprintln(w)
			}
			printPlan(w, p)
		}
		return nil
	}
	return usageErr("--output/--format %q: use one of %s", format, strings.Join(planFormats, ", "))
}

func printPlan(w io.Writer, p *plan.Plan) {
	c := p.Cell
	fmt.Fprintf(w, "plan %s/%s  doris %s  cpu %s  os %s (glibc %s, %dK pages)\n", c.Series, c.Target, c.Doris, c.CPU, c.OS, c.Glibc, c.PageSize/1024)
	id := p.Toolchain.Compiler
	fmt.Fprintf(w, "  compiler  %s %s (%s)\n", id.Name, id.Version, id.Banner)
	if sr := c.Sysroot; sr != nil {
		fmt.Fprintf(w, "  sysroot   %s: glibc %s (%s's is %s), %s, %s\n", sr.Name, sr.Glibc, c.OS, c.Glibc, short(sr.Digest), sr.Source)
	} else {
		fmt.Fprintf(w, "  sysroot   none, WAIVED: %s\n", c.SysrootWaiver)
	}
	fmt.Fprintf(w, "  flags     %s\n", strings.Join(p.Phases[plan.PhaseRelease], " "))
	if f, ok := p.Phases[plan.PhaseInstrument]; ok {
		fmt.Fprintf(w, "  pgo-gen   %s\n", strings.Join(f, " "))
	}
	if f, ok := p.Phases[plan.PhasePGO]; ok {
		fmt.Fprintf(w, "  pgo-use   %s\n", strings.Join(f, " "))
	}
	if len(p.Toolchain.Emulator) > 0 {
		fmt.Fprintf(w, "  emulator  %s\n", strings.Join(p.Toolchain.Emulator, " "))
	}
	fmt.Fprintf(w, "  allowed   %s\n", strings.Join(c.Allowed, " "))
	for _, pt := range p.Patches {
		fmt.Fprintf(w, "  patch     %s  %s\n", pt.ID, pt.Why)
	}
	for _, wn := range p.Warnings {
		fmt.Fprintf(w, "  warning   %s\n", wn)
	}
	rows := [][]string{{"  STEP", "KIND", "PHASE", "KEY", "COMMAND"}}
	for _, s := range p.Steps {
		rows = append(rows, []string{"  " + s.ID, string(s.Kind), s.Phase, s.Key[:12], s.Describe()})
	}
	table(w, rows)
	fmt.Fprintf(w, "  %d steps\n", len(p.Steps))
}

func short(s string) string {
	if s == "" {
		return "unpinned"
	}
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
