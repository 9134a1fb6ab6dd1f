package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/cacheoci"
	"github.com/dorisarm/dorisarm/internal/registry"
)

func newCachePushCmd(g *globals, dir *string) *cobra.Command {
	return cacheRepoCmd(g, &cobra.Command{
		Use:   "push --repo REGISTRY/PATH",
		Short: "Upload every local step-cache entry to a registry repository (one OCI artifact per step key)",
		Example: `  dorisarm cache push --cache .cache/demo --repo 127.0.0.1:5000/dorisarm/cache
  dorisarm cache push --repo ghcr.io/ORG/dorisarm-cache -o json`,
	}, func(ctx context.Context, r *cacheoci.Repo) (cacheoci.Pushed, error) {
		return r.PushAll(ctx, &build.Cache{Dir: *dir})
	})
}

func newCachePullCmd(g *globals, dir *string) *cobra.Command {
	return cacheRepoCmd(g, &cobra.Command{
		Use:   "pull --repo REGISTRY/PATH",
		Short: "Download every step-cache entry of a registry repository that the local cache lacks, checking each",
		Example: `  dorisarm cache pull --cache .cache/ci --repo 127.0.0.1:5000/dorisarm/cache
  dorisarm cache pull --repo ghcr.io/ORG/dorisarm-cache -o json`,
	}, func(ctx context.Context, r *cacheoci.Repo) (cacheoci.Pulled, error) {
		return r.PullAll(ctx, &build.Cache{Dir: *dir}, func(err error) { fmt.Fprintf(g.stderr, "dorisarm: %v\n", err) })
	})
}

// cacheRepoCmd completes cmd as a command on the cache repository --repo:
// run's summary, unless it is the zero one (nothing done), is printed
// before run's error is returned.
func cacheRepoCmd[S interface {
	comparable
	textWriter
}](g *globals, cmd *cobra.Command, run func(context.Context, *cacheoci.Repo) (S, error)) *cobra.Command {
	var repo, format string
	var ro registry.Options
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		r, err := cacheoci.Open(repo, ro)
		if err != nil {
			return fmt.Errorf("--repo %w", err)
		}
		sum, err := run(cmd.Context(), r)
		if sum == *new(S) {
			return err
		}
		if perr := printAs(g.stdout, format, sum); perr != nil {
			return perr
		}
		return err
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the registry repository of the shared cache")
	registryFlags(cmd, &ro)
	formatFlag(cmd, &format, "text or json", "text", "json")
	return cmd
}
