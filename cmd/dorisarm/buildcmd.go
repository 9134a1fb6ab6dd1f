package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/scan"
)

func defaultCacheDir() string {
	if d := os.Getenv("DORISARM_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dorisarm")
	}
	return ".cache/dorisarm"
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

func newBuildCmd(g *globals) *cobra.Command {
	o := &planOptions{}
	var opts build.Options
	var allowFile string
	var cacheMax int64
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
  dorisarm build --source ~/src/doris --mirror /srv/doris-thirdparty --target graviton3 --pgo-profile tpch.profdata`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if allowFile != "" {
				exc, err := scan.LoadAllow(allowFile)
				if err != nil {
					return badInput(err)
				}
				opts.Allow = exc
			}
			opts.PGOProfile = o.pgoProfile
			ps, err := makePlanned(g, o)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Progress = build.NewProgress(g.stderr, isTerminal(os.Stderr))
			var failed []string
			for _, p := range ps {
				pol, err := scan.PolicyFor(p.m, p.plan.Cell.Target)
				if err != nil {
					return badInput(err)
				}
				rec, err := build.Run(ctx, build.Input{Plan: p.plan, Recipe: p.recipe, Tree: p.tree, Series: p.series, TC: p.tc, Lock: p.lock, Policy: pol}, opts)
				if err != nil {
					if ctx.Err() != nil {
						return &exitError{code: exitCheck, err: fmt.Errorf("interrupted; the cache keeps every finished step, run again to resume")}
					}
					fmt.Fprintln(g.stderr, "dorisarm: "+err.Error())
					failed = append(failed, p.plan.Cell.Target)
					continue
				}
				if rec.UpToDate {
					fmt.Fprintf(g.stdout, "%s  %s  up to date (the published build matches the plan)\n", build.Dir(opts.Out, rec.Cell.Doris, rec.Cell.Target), rec.Cell.Target)
					continue
				}
				fmt.Fprintf(g.stdout, "%s  %s  %s %s  %d steps; cache: %d of %d cacheable steps (%.0f%%); %.1fs\n",
					build.Dir(opts.Out, rec.Cell.Doris, rec.Cell.Target), rec.Cell.Target, rec.Compiler.Name, rec.Compiler.Version,
					len(rec.Steps), len(rec.Cache.Hits), len(rec.Cache.Hits)+len(rec.Cache.Misses), 100*rec.HitRate(), rec.Seconds)
			}
			if cacheMax > 0 {
				c := &build.Cache{Dir: opts.Cache}
				if _, err := c.Prune(cacheMax); err != nil {
					return err
				}
			}
			if len(failed) > 0 {
				return &exitError{code: exitCheck, err: fmt.Errorf("build failed for %s", strings.Join(failed, ", "))}
			}
			return nil
		},
	}
	o.flags(cmd, "a merged PGO profile collected on real hardware (skips training)")
	cmd.Flags().StringVar(&opts.Out, "out", "out", "where builds are published: <out>/<doris>/<target>/")
	cmd.Flags().StringVar(&opts.Cache, "cache", defaultCacheDir(), "the step cache and work directories ($DORISARM_CACHE)")
	cmd.Flags().IntVar(&opts.Jobs, "jobs", 2, "parallel jobs inside a step")
	cmd.Flags().StringVar(&opts.Mirror, "mirror", "", "third-party archive mirror: DIR, file:// or http(s):// (default: the recipe's)")
	cmd.Flags().StringVar(&allowFile, "allow", "", "reviewed scan exceptions")
	cmd.Flags().BoolVar(&opts.NoScan, "no-scan", false, "publish without the scan gate (recorded in the build record)")
	cmd.Flags().Int64Var(&cacheMax, "cache-max-size", 0, "after building, prune the cache to this many bytes (least recently used first)")
	return cmd
}

func newCacheCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cache", Short: "Inspect and prune the step cache"}
	var dir string
	var maxSize int64
	prune := &cobra.Command{
		Use:     "prune",
		Short:   "Remove least recently used cache entries until the cache fits --max-size",
		Example: "  dorisarm cache prune --max-size 20000000000",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &build.Cache{Dir: dir}
			removed, err := c.Prune(maxSize)
			if err != nil {
				return err
			}
			var freed int64
			for _, e := range removed {
				freed += e.Bytes
			}
			left, _ := c.Entries()
			fmt.Fprintf(g.stdout, "removed %d entries (%d bytes); %d left\n", len(removed), freed, len(left))
			return nil
		},
	}
	prune.Flags().Int64Var(&maxSize, "max-size", 10<<30, "bytes the cache may keep")
	cmd.PersistentFlags().StringVar(&dir, "cache", defaultCacheDir(), "the cache directory")
	cmd.AddCommand(prune)
	return cmd
}
