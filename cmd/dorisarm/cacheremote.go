package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/cacheoci"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// remoteCache is a --cache-from/--cache-to value as the build's remote
// cache: a nil interface when s is empty.
func remoteCache(flag, s string, ro registry.Options) (build.RemoteCache, error) {
	if s == "" {
		return nil, nil
	}
	r, err := cacheoci.Open(s, ro)
	if err != nil {
		return nil, fmt.Errorf("%s %w", flag, err)
	}
	return r, nil
}

func newCachePushCmd(g *globals, dir *string) *cobra.Command {
	var repo, format string
	var ro registry.Options
	cmd := &cobra.Command{
		Use:   "push --repo REGISTRY/PATH",
		Short: "Upload every local step-cache entry to a registry repository (one OCI artifact per step key)",
		Example: `  dorisarm cache push --cache .cache/demo --repo 127.0.0.1:5000/dorisarm/cache
  dorisarm cache push --repo ghcr.io/ORG/dorisarm-cache -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := cacheoci.Open(repo, ro)
			if err != nil {
				return fmt.Errorf("--repo %w", err)
			}
			n, bytes, err := r.PushAll(cmd.Context(), &build.Cache{Dir: *dir})
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(g.stdout, map[string]any{"repo": r.Repo.String(), "pushed_entries": n, "bytes": bytes})
			}
			fmt.Fprintf(g.stdout, "pushed %d entries (%d bytes) to %s\n", n, bytes, r.Repo)
			return nil
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the registry repository of the shared cache")
	insecureFlag(cmd, &ro)
	formatFlag(cmd, &format, "text or json", "text", "json")
	return cmd
}

func newCachePullCmd(g *globals, dir *string) *cobra.Command {
	var repo, format string
	var ro registry.Options
	cmd := &cobra.Command{
		Use:   "pull --repo REGISTRY/PATH",
		Short: "Download every step-cache entry of a registry repository that the local cache lacks, checking each",
		Example: `  dorisarm cache pull --cache .cache/ci --repo 127.0.0.1:5000/dorisarm/cache
  dorisarm cache pull --repo ghcr.io/ORG/dorisarm-cache -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := cacheoci.Open(repo, ro)
			if err != nil {
				return fmt.Errorf("--repo %w", err)
			}
			p, err := r.PullAll(cmd.Context(), &build.Cache{Dir: *dir}, func(err error) { fmt.Fprintf(g.stderr, "dorisarm: %v\n", err) })
			if p == (cacheoci.Pulled{}) && err != nil {
				return err
			}
			if format == "json" {
				if jerr := printJSON(g.stdout, map[string]any{"repo": r.Repo.String(), "pulled": p.Pulled, "present": p.Present, "refused": p.Refused}); jerr != nil {
					return jerr
				}
			} else {
				fmt.Fprintf(g.stdout, "pulled %d entries from %s (%d already here, %d refused)\n", p.Pulled, r.Repo, p.Present, p.Refused)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the registry repository of the shared cache")
	insecureFlag(cmd, &ro)
	formatFlag(cmd, &format, "text or json", "text", "json")
	return cmd
}
