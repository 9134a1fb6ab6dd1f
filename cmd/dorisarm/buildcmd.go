package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/cacheoci"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/textfmt"
)

func defaultCacheDir() string { return build.DefaultCacheDir(os.Getenv) }

func isTerminal(f *os.File) bool { return textfmt.IsTerminal(f, os.Getenv) }

// buildCommand is the build command's flags.
type buildCommand struct {
	o          *planOptions
	opts       build.Options
	allowFile  string
	format     string
	cacheMax   int64
	cacheFrom  string
	cacheTo    string
	cacheTrust cacheTrustFlags
	ro         registry.Options
}

func newBuildCmd(g *globals) *cobra.Command {
	b := &buildCommand{o: &planOptions{}}
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build Doris (or the sample) for targets, cached, smoke-run and scanned",
		Long: `build runs each target's plan: fetch and verify the third-party archives,
unpack, patch, build every package with the target's compiler wrappers, build
BE and FE (twice, with a training run under qemu in between, for PGO targets),
collect the outputs, run the recipe's smoke commands under qemu on the target's
CPU model, scan the result with the target's policy, and only then publish
<out>/<doris>/<target>/ with its build record (dorisarm-build.json).

Every step's result is cached under its plan key: a rebuild with nothing
changed runs no compiler; changing one patch reruns only the steps after it.`,
		Example: `  dorisarm build --target kunpeng920
  dorisarm build --target all --out out
  dorisarm build --target all -o json | jq '.[] | {target, seconds, cache_hits}'
  dorisarm build --source ~/src/doris --mirror /srv/doris-thirdparty --target graviton3 --pgo-profile tpch.profdata
  dorisarm build --source ~/src/doris --mirror /srv/doris-thirdparty --target kunpeng920 --packages snappy,lz4,bzip,bitshuffle
  dorisarm build --source ~/src/doris --mirror /srv/doris-thirdparty --target graviton3 --packages all --keep-going`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return b.run(cmd, g) },
	}
	o := b.o
	o.flags(cmd, "a merged PGO profile collected on real hardware (skips training)")
	cmd.Flags().StringVar(&b.opts.Out, "out", "out", "where builds are published: <out>/<doris>/<target>/")
	cmd.Flags().StringVar(&b.opts.Cache, "cache", defaultCacheDir(), "the step cache and work directories ($DORISARM_CACHE)")
	cmd.Flags().IntVar(&b.opts.Jobs, "jobs", 2, "the build's CPU budget: targets build at once, up to this many, and split it for their steps' parallel jobs (make -j)")
	cmd.Flags().IntVar(&b.opts.PackagesAtOnce, "packages-at-once", 0, "third-party packages built at once in a target (default: --jobs; 1 builds them one after another, as Doris's script does)")
	cmd.Flags().StringVar(&b.opts.CompileCache, "be-compile-cache", "", "ccache directory the BE's compiles share (default: <cache>/compile; off for none): a build killed half-way, another work directory or another cache naming it compiles only what it had not")
	cmd.Flags().StringVar(&b.opts.SharedCompileCache, "be-compile-cache-shared", "", "a directory runners share (NFS, a shared volume): the BE's ccache reads what another runner compiled there and adds what it compiles (ccache's remote storage, laid out as <dir>/compile/<key>; bound it with cache prune --dir DIR)")
	cmd.Flags().StringVar(&b.opts.CompileCacheSize, "be-compile-cache-size", build.DefaultCompileCacheSize, "bound of each compile cache directory, as ccache takes it (20G, 500M)")
	cmd.Flags().StringVar(&b.opts.Mirror, "mirror", "", "third-party archive mirror: DIR, file:// or http(s):// (default: the recipe's)")
	cmd.Flags().StringVar(&b.allowFile, "allow", "", "reviewed scan exceptions")
	inputFlags(cmd, false, "allow")
	cmd.Flags().BoolVar(&b.opts.StrictVersions, "strict-versions", false, "fail a package whose unpacked source declares another version than vars.sh (or the recipe) names for it; a warning in the build record otherwise")
	cmd.Flags().BoolVar(&b.opts.KeepGoing, "keep-going", false, "after a package fails, build every package that does not need it, then report each failure")
	cmd.Flags().BoolVar(&b.opts.NoScan, "no-scan", false, "publish without the scan gate (recorded in the build record)")
	cmd.Flags().BoolVar(&b.opts.RequireTargetFlags, "require-target-flags", false, "the scan gate also fails on third-party packages' objects compiled below the target's -march (lost tuning; the tree's own objects fail it unless --accept-lost-tuning) and on objects with no recorded flags")
	cmd.Flags().StringVar(&b.cacheFrom, "cache-from", "", "a registry repository (REGISTRY/PATH) to restore steps from when the local cache lacks them")
	cmd.Flags().StringVar(&b.cacheTo, "cache-to", "", "a registry repository to offer every step result to (may be the same as --cache-from)")
	b.cacheTrust.add(cmd, true, true)
	registryFlags(cmd, &b.ro)
	cmd.Flags().Int64Var(&b.cacheMax, "cache-max-size", 0, "after building, prune the cache to this many bytes (least recently used first)")
	formatFlag(cmd, &b.format, "text or json (one entry per target; progress stays on stderr)", "text", "json")
	return cmd
}

// check refuses flag values no build can use, before anything runs.
func (b *buildCommand) check() error {
	if b.cacheMax < 0 {
		return usageErr("--cache-max-size %d: give the bytes the cache may keep after the build", b.cacheMax)
	}
	if b.opts.Jobs < 1 {
		return usageErr("--jobs %d: give the build's CPU budget, 1 or more (nproc says how many CPUs this machine has)", b.opts.Jobs)
	}
	if b.opts.PackagesAtOnce < 0 {
		return usageErr("--packages-at-once %d: give how many packages may build at once, 1 or more (0: as many as --jobs)", b.opts.PackagesAtOnce)
	}
	if err := build.CheckCompileCacheSize(b.opts.CompileCacheSize); b.opts.CompileCacheSize != "" && err != nil {
		return err
	}
	if b.opts.SharedCompileCache != "" && b.opts.CompileCache == build.CompileCacheOff {
		return usageErr("--be-compile-cache-shared with --be-compile-cache off: the shared cache is ccache's remote storage, which needs the compile cache on")
	}
	if strings.Contains(b.opts.CompileCache, "://") {
		return usageErr("--be-compile-cache %s: give a directory (or off); a build step has no network, so ccache's HTTP or Redis storage cannot be reached from it: share a directory among runners (NFS) with --be-compile-cache-shared DIR", b.opts.CompileCache)
	}
	return nil
}

// run plans the targets, builds them (RunAll), prunes the cache and says
// what came of each.
func (b *buildCommand) run(cmd *cobra.Command, g *globals) error {
	if err := b.check(); err != nil {
		return err
	}
	o := b.o
	tree, err := o.tree.dir(g)
	if err != nil {
		return err
	}
	// Before anything is planned: planning fills the cache (sysroots).
	if err := build.CheckDirs(tree, b.opts.Out, b.opts.Cache); err != nil {
		return fault.Input(err)
	}
	ct, err := b.cacheTrust.trust(cmd.Context(), g.stderr, b.ro, b.cacheFrom != "", b.cacheTo != "", "build --cache-from/--cache-to")
	if err != nil {
		return err
	}
	if b.opts.CacheFrom, err = cacheoci.Remote("--cache-from", b.cacheFrom, b.ro, ct); err != nil {
		return err
	}
	if b.opts.CacheTo, err = cacheoci.Remote("--cache-to", b.cacheTo, b.ro, ct); err != nil {
		return err
	}
	if b.allowFile != "" {
		if b.opts.Allow, err = scan.LoadAllow(b.allowFile); err != nil {
			return fault.Input(err)
		}
	}
	b.opts.PGOProfile = o.req.PGOProfile
	b.opts.ThirdpartyBase = o.req.ThirdpartyBase
	o.req.Registry = b.ro
	o.cache = b.opts.Cache
	ps, req, err := makePlanned(cmd.Context(), g, o)
	if err != nil {
		return err
	}
	ins, err := build.Inputs(req, ps)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b.opts.Progress = build.NewProgress(g.stderr, isTerminal(os.Stderr))
	b.opts.Progress.Width = func() int { return textfmt.TerminalWidth(os.Stderr, os.Getenv) }
	forced := o.req.Compiler
	report := func(o build.Outcome) {
		switch {
		case o.State == "failed" && o.Rejected != "" && forced == "":
			// said below, when it is planned again
		case o.State == "failed":
			fmt.Fprintln(g.stderr, "dorisarm: "+o.Error)
		case b.format == "text":
			fmt.Fprintln(g.stdout, o.String())
		}
	}
	b.opts.Pulls = &build.Pulls{} // shared with the attempts below
	if forced == "" {
		// A compiler the toolchain step rejected (it cannot link
		// for the target OS's sysroot; the verdict is remembered,
		// so the plan skips it now) is replaced by the target's
		// next one, at once, while the other targets build.
		b.opts.Replan = replanner(g, o)
	}
	outs, err := build.RunAll(ctx, ins, b.opts, report)
	outs, err = sayRejected(ctx, g, outs, err, forced)
	if b.cacheMax > 0 && ctx.Err() == nil {
		if _, perr := (&build.Cache{Dir: b.opts.Cache}).Prune(b.cacheMax); perr != nil {
			return errors.Join(err, perr)
		}
	}
	if b.format == "json" {
		return errors.Join(printJSON(g.stdout, outs), err)
	}
	return err
}

func newCacheCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cache", Short: "Inspect and prune the step cache", Example: "  dorisarm cache prune --max-size 20000000000"}
	var dir, format string
	var maxSize int64
	prune := &cobra.Command{
		Use:     "prune",
		Short:   "Remove least recently used cache entries until the cache fits --max-size",
		Example: "  dorisarm cache prune --max-size 20000000000\n  dorisarm cache prune --cache .cache/demo --max-size 0 -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := (&build.Cache{Dir: dir}).PruneTo(maxSize)
			if err != nil {
				return err
			}
			return printAs(g.stdout, format, p)
		},
	}
	prune.Flags().Int64Var(&maxSize, "max-size", 10<<30, "bytes the cache may keep")
	formatFlag(prune, &format, "text or json", "text", "json")
	cmd.PersistentFlags().StringVar(&dir, "cache", defaultCacheDir(), "the cache directory")
	cmd.AddCommand(prune, newCachePushCmd(g, &dir), newCachePullCmd(g, &dir))
	return cmd
}

// replanner plans a target again after its compiler was rejected,
// saying so; the plan must take another compiler than those tried.
func replanner(g *globals, o *planOptions) func(context.Context, build.Outcome, []string) (*build.Input, error) {
	var mu sync.Mutex // one plan at a time: they share the sysroot cache and stderr
	return func(ctx context.Context, out build.Outcome, tried []string) (*build.Input, error) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(g.stderr, "dorisarm: %s: %s cannot build for its sysroot; planning it again with its next compiler:\n  %s\n",
			out.Target, out.Rejected, strings.ReplaceAll(out.Error, "\n", "\n  "))
		retry := *o
		retry.req.Targets = out.Target
		ps, req, err := makePlanned(ctx, g, &retry)
		if err != nil {
			return nil, err
		}
		if tc := ps[0].Toolchain; slices.Contains(tried, tc.Compiler.Name) {
			return nil, fmt.Errorf("the plan took %s again, which this build found unable to build for the sysroot", tc.Compiler.Name)
		}
		ins, err := build.Inputs(req, ps)
		if err != nil {
			return nil, err
		}
		return &ins[0], nil
	}
}

// sayRejected prints the rejections no other compiler replaced (--compiler
// forced one, or none was left) and sums the outcomes up.
func sayRejected(ctx context.Context, g *globals, outs []build.Outcome, err error, forced string) ([]build.Outcome, error) {
	if forced != "" {
		return outs, err // each said as it ended
	}
	for _, out := range outs {
		if out.State == "failed" && out.Rejected != "" {
			fmt.Fprintln(g.stderr, "dorisarm: "+out.Error)
		}
	}
	if ctx.Err() != nil {
		return outs, fault.Gatef("interrupted; the cache keeps every finished step, run again to resume")
	}
	return outs, build.Failed(outs)
}
