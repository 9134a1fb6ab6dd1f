package main

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/cacheoci"
	"github.com/dorisarm/dorisarm/internal/fault"
)

// cacheRepo turns a --cache-from/--cache-to/--repo value into a registry
// cache repository ("" is none).
func cacheRepo(flag, s string, insecure bool) (*cacheoci.Repo, error) {
	if s == "" {
		return nil, nil
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.NewRepository(s, opts...)
	if err != nil {
		return nil, usageErr("%s %s: want REGISTRY/PATH (a repository, no tag): %v", flag, s, err)
	}
	return &cacheoci.Repo{Repo: r, Opts: []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}}, nil
}

// remoteCache is cacheRepo as the build's remote cache: a nil interface
// when s is empty.
func remoteCache(flag, s string, insecure bool) (build.RemoteCache, error) {
	r, err := cacheRepo(flag, s, insecure)
	if r == nil || err != nil {
		return nil, err
	}
	return r, nil
}

func newCachePushCmd(g *globals, dir *string) *cobra.Command {
	var repo, format string
	var insecure bool
	cmd := &cobra.Command{
		Use:   "push --repo REGISTRY/PATH",
		Short: "Upload every local step-cache entry to a registry repository (one OCI artifact per step key)",
		Example: `  dorisarm cache push --cache .cache/demo --repo 127.0.0.1:5000/dorisarm/cache
  dorisarm cache push --repo ghcr.io/ORG/dorisarm-cache -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			r, err := cacheRepo("--repo", repo, insecure)
			if err != nil {
				return err
			}
			if r == nil {
				return usageErr("--repo is required")
			}
			c := &build.Cache{Dir: *dir}
			ents, err := c.Entries()
			if err != nil {
				return err
			}
			var bytes int64
			for _, e := range ents {
				if err := r.Push(cmd.Context(), c, e.Key); err != nil {
					return fault.Gate(err)
				}
				bytes += e.Bytes
			}
			if format == "json" {
				return printJSON(g.stdout, map[string]any{"repo": r.Repo.String(), "pushed_entries": len(ents), "bytes": bytes})
			}
			fmt.Fprintf(g.stdout, "pushed %d entries (%d bytes) to %s\n", len(ents), bytes, r.Repo)
			return nil
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the registry repository of the shared cache")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow a plain-HTTP registry that is not on loopback")
	formatFlag(cmd, &format, "text", "text or json")
	return cmd
}

func newCachePullCmd(g *globals, dir *string) *cobra.Command {
	var repo, format string
	var insecure bool
	cmd := &cobra.Command{
		Use:   "pull --repo REGISTRY/PATH",
		Short: "Download every step-cache entry of a registry repository that the local cache lacks, checking each",
		Example: `  dorisarm cache pull --cache .cache/ci --repo 127.0.0.1:5000/dorisarm/cache
  dorisarm cache pull --repo ghcr.io/ORG/dorisarm-cache -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			r, err := cacheRepo("--repo", repo, insecure)
			if err != nil {
				return err
			}
			if r == nil {
				return usageErr("--repo is required")
			}
			c := &build.Cache{Dir: *dir}
			if err := c.Init(); err != nil {
				return err
			}
			tags, err := remote.List(r.Repo, append([]remote.Option{remote.WithContext(cmd.Context())}, r.Opts...)...)
			if err != nil {
				return fault.Gate(fmt.Errorf("%s: %w", r.Repo, err))
			}
			pulled, present, refused := 0, 0, 0
			for _, key := range tags {
				if !build.ValidKey(key) {
					continue
				}
				if _, ok := c.Get(key); ok {
					present++
					continue
				}
				ok, err := r.Pull(cmd.Context(), c, key)
				switch {
				case err != nil:
					fmt.Fprintf(g.stderr, "dorisarm: %v\n", err)
					refused++
				case ok:
					pulled++
				}
			}
			if format == "json" {
				if err := printJSON(g.stdout, map[string]any{"repo": r.Repo.String(), "pulled": pulled, "present": present, "refused": refused}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(g.stdout, "pulled %d entries from %s (%d already here, %d refused)\n", pulled, r.Repo, present, refused)
			}
			if refused > 0 {
				return fault.Gate(fmt.Errorf("%d entries of %s were refused", refused, r.Repo))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the registry repository of the shared cache")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow a plain-HTTP registry that is not on loopback")
	formatFlag(cmd, &format, "text", "text or json")
	return cmd
}
