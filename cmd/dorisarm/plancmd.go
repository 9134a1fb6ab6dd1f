package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/patch"
	"github.com/dorisarm/dorisarm/internal/pgo"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/source"
	"github.com/dorisarm/dorisarm/internal/toolchain"
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
		tree = filepath.Join(g.repoDir(), "examples", "minidoris")
		if rf == "" {
			rf = filepath.Join(g.repoDir(), "recipes", "minidoris.yaml")
		}
	}
	if rf == "" {
		rf = filepath.Join(g.repoDir(), "recipes", "doris.yaml")
	}
	if st, err := os.Stat(tree); err != nil || !st.IsDir() {
		return "", nil, usageErr("--source %s: not a directory", tree)
	}
	r, err = recipe.Load(rf)
	return tree, r, badInput(err)
}

func (o *treeOptions) version(tree string, r *recipe.Recipe) (string, error) {
	if o.doris != "" {
		return o.doris, nil
	}
	v, err := source.ReadVersion(tree, r)
	return v, badInput(err)
}

// targetList expands "a,b" or "all".
func targetList(m *matrix.Matrix, spec string) ([]string, error) {
	if spec == "" {
		return nil, usageErr("--target is required (a target name, a comma-separated list, or all; see dorisarm matrix)")
	}
	if spec == "all" {
		return m.TargetNames(), nil
	}
	var out []string
	for _, t := range strings.Split(spec, ",") {
		t = strings.TrimSpace(t)
		if _, err := m.Target(t); err != nil {
			return nil, badInput(err)
		}
		out = append(out, t)
	}
	return out, nil
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

// planned is a plan with what building it takes.
type planned struct {
	plan   *plan.Plan
	tc     *toolchain.Toolchain
	m      *matrix.Matrix
	recipe *recipe.Recipe
	tree   string
	series *patch.Series
	lock   *source.Lock
}

// makePlans plans every requested target.
func makePlans(g *globals, o *planOptions) ([]*plan.Plan, error) {
	ps, err := makePlanned(g, o)
	if err != nil {
		return nil, err
	}
	var out []*plan.Plan
	for _, p := range ps {
		out = append(out, p.plan)
	}
	return out, nil
}

// makePlanned plans every requested target and keeps the inputs.
func makePlanned(g *globals, o *planOptions) ([]planned, error) {
	m, err := g.loadMatrix()
	if err != nil {
		return nil, err
	}
	targets, err := targetList(m, o.targets)
	if err != nil {
		return nil, err
	}
	tree, r, err := o.tree.resolve(g)
	if err != nil {
		return nil, err
	}
	ver, err := o.tree.version(tree, r)
	if err != nil {
		return nil, err
	}
	series, err := m.SeriesFor(ver)
	if err != nil {
		return nil, badInput(err)
	}
	ps, err := patch.LoadSeries(r.Path(r.Patches))
	if err != nil {
		return nil, badInput(err)
	}
	if err := ps.CheckTargets(m); err != nil {
		return nil, badInput(err)
	}
	lock, err := source.ReadLock(r.Path(r.Lock))
	if err != nil {
		return nil, badInput(err)
	}
	profile := ""
	if o.pgoProfile != "" {
		if st, err := os.Stat(o.pgoProfile); err == nil && st.IsDir() {
			profile, err = source.TreeDigest(o.pgoProfile, nil)
		} else {
			profile, err = source.FileDigest(o.pgoProfile)
		}
		if err != nil {
			return nil, usageErr("--pgo-profile: %v", err)
		}
	}
	var plans []planned
	for _, t := range targets {
		cell, err := m.Cell(series.Series, t)
		if err != nil {
			return nil, badInput(err)
		}
		cache := o.sysrootCache
		if cache == "" {
			cache = o.cache
		}
		if cache == "" {
			cache = defaultCacheDir()
		}
		sr, err := sysrootFor(context.Background(), m, cell, cache, o.waiver)
		if err != nil {
			return nil, err
		}
		probes := ""
		if sr != nil {
			probes = filepath.Join(cache, "sysroots", ".probes")
		}
		tc, err := toolchain.Resolve(m, cell, toolchain.Options{Compiler: o.compiler, Sysroot: sr, ProbeCache: probes})
		if err != nil {
			var miss *toolchain.MissingError
			if errors.As(err, &miss) {
				return nil, &exitError{code: exitCheck, err: err}
			}
			return nil, badInput(err)
		}
		if o.pgoProfile != "" && cell.Target.PGO {
			// A profile the compiler cannot read fails the build late, with "bad magic".
			if _, err := pgo.Validate(o.pgoProfile, tc.Compiler.Dialect); err != nil {
				return nil, usageErr("--pgo-profile for %s (%s %s): %v", t, tc.Compiler.Name, tc.Identity.Version, err)
			}
		}
		p, err := plan.Make(plan.Inputs{Matrix: m, Cell: cell, Recipe: r, Tree: tree, Version: ver, Series: ps, Toolchain: tc, Lock: lock, Profile: profile, Packages: o.packages, SysrootWaiver: o.waiver})
		if err != nil {
			return nil, badInput(err)
		}
		plans = append(plans, planned{plan: p, tc: tc, m: m, recipe: r, tree: tree, series: ps, lock: lock})
	}
	return plans, nil
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
  dorisarm plan --source ~/src/doris --target graviton3 --mirror /srv/doris-thirdparty`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(o.format, planFormats...); err != nil {
				return err
			}
			plans, err := makePlans(g, o)
			if err != nil {
				return err
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
