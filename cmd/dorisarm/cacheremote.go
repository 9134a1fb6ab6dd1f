package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/cacheoci"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

func newCachePushCmd(g *globals, dir *string) *cobra.Command {
	return cacheRepoCmd(g, &cobra.Command{
		Use:   "push --repo REGISTRY/PATH",
		Short: "Upload every local step-cache entry to a registry repository (one OCI artifact per step key)",
		Example: `  dorisarm cache push --cache .cache/demo --repo 127.0.0.1:5000/dorisarm/cache
  dorisarm cache push --repo ghcr.io/ORG/dorisarm-cache -o json`,
	}, false, true, func(ctx context.Context, r *cacheoci.Repo) (cacheoci.Pushed, error) {
		return r.PushAll(ctx, &build.Cache{Dir: *dir})
	})
}

func newCachePullCmd(g *globals, dir *string) *cobra.Command {
	return cacheRepoCmd(g, &cobra.Command{
		Use:   "pull --repo REGISTRY/PATH",
		Short: "Download every step-cache entry of a registry repository that the local cache lacks, checking each",
		Example: `  dorisarm cache pull --cache .cache/ci --repo 127.0.0.1:5000/dorisarm/cache
  dorisarm cache pull --repo ghcr.io/ORG/dorisarm-cache -o json`,
	}, true, false, func(ctx context.Context, r *cacheoci.Repo) (cacheoci.Pulled, error) {
		return r.PullAll(ctx, &build.Cache{Dir: *dir}, func(err error) { fmt.Fprintf(g.stderr, "dorisarm: %v\n", err) })
	})
}

// cacheRepoCmd completes cmd as a command on the cache repository --repo:
// run's summary, unless it is the zero one (nothing done), is printed
// before run's error is returned.
func cacheRepoCmd[S interface {
	comparable
	textWriter
}](g *globals, cmd *cobra.Command, pull, push bool, run func(context.Context, *cacheoci.Repo) (S, error)) *cobra.Command {
	var repo, format string
	var ro registry.Options
	var tf cacheTrustFlags
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		r, err := cacheoci.Open(repo, ro)
		if err != nil {
			return fmt.Errorf("--repo %w", err)
		}
		if r.Trust, err = tf.trust(cmd.Context(), g.stderr, ro, pull, push, cmd.CommandPath()); err != nil {
			return err
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
	tf.add(cmd, pull, push)
	formatFlag(cmd, &format, "text or json", "text", "json")
	return cmd
}

// cacheTrustFlags are whom a shared step cache is trusted from (pulls) and
// how its entries are signed (pushes).
type cacheTrustFlags struct {
	verify        sign.Trust
	signKey       string
	keyless       bool
	sigstore      sign.Keyless
	trustUnsigned bool
}

func (f *cacheTrustFlags) add(cmd *cobra.Command, pull, push bool) {
	if pull {
		cmd.Flags().StringVar(&f.verify.Key, "cache-verify-key", "", "shared cache: the cosign public key its entries must be signed with")
		cmd.Flags().StringVar(&f.verify.Identity, "cache-identity", "", "shared cache, keyless: the signer identity its entries' Fulcio certificates must name (e.g. the main branch's workflow)")
		cmd.Flags().StringVar(&f.verify.IdentityRegexp, "cache-identity-regexp", "", "shared cache, keyless: a regular expression the signer identity must match")
		cmd.Flags().StringVar(&f.verify.Issuer, "cache-issuer", "", "shared cache, keyless: the OIDC issuer (e.g. https://token.actions.githubusercontent.com)")
		cmd.Flags().StringVar(&f.verify.TrustedRoot, "cache-trusted-root", "", "shared cache, keyless: a trusted_root.json instead of Sigstore's")
	}
	if push {
		cmd.Flags().StringVar(&f.signKey, "cache-sign-key", "", "shared cache: sign pushed entries with this cosign private key ($COSIGN_PASSWORD)")
		cmd.Flags().BoolVar(&f.keyless, "cache-keyless", false, "shared cache: sign pushed entries keyless (Fulcio and Rekor, the CI's OIDC identity)")
		cmd.Flags().StringVar(&f.sigstore.FulcioURL, "cache-fulcio-url", "", "shared cache, keyless: Fulcio (default https://fulcio.sigstore.dev)")
		cmd.Flags().StringVar(&f.sigstore.RekorURL, "cache-rekor-url", "", "shared cache, keyless: Rekor (default https://rekor.sigstore.dev)")
	}
	inputFlags(cmd, false, "cache-verify-key", "cache-trusted-root", "cache-sign-key")
	cmd.Flags().BoolVar(&f.trustUnsigned, "cache-trust-unsigned", false, "take (and push) shared cache entries unsigned: anyone who can push to the repository can then put code into your builds")
}

// trust is the cache trust the flags give; pull and push say which
// directions are used, and what each then requires is checked.
func (f *cacheTrustFlags) trust(ctx context.Context, warn io.Writer, ro registry.Options, pull, push bool, flag string) (cacheoci.Trust, error) {
	var t cacheoci.Trust
	t.TrustUnsigned = f.trustUnsigned
	if f.verify != (sign.Trust{}) {
		for _, m := range f.verify.Warnings() {
			fmt.Fprintln(warn, "warning: --cache-"+strings.TrimPrefix(m, "--certificate-"))
		}
		if err := f.verify.Validate(); err != nil {
			return t, fault.Inputf("%s: the shared cache's signer: %v (--cache-verify-key, or --cache-identity and --cache-issuer)", flag, err)
		}
		v := f.verify
		t.Verify = &v
		// The key (or trusted root) now, not at the first step pulled.
		if err := t.LoadVerify(ctx); err != nil {
			return t, fault.Inputf("%s: the shared cache's signer (--cache-verify-key or --cache-trusted-root): %v", flag, err)
		}
	}
	switch {
	case f.signKey != "" && f.keyless:
		return t, fault.Inputf("--cache-sign-key and --cache-keyless: give one")
	case f.signKey != "":
		pw, err := password()
		if err != nil {
			return t, err
		}
		s, err := sign.LoadSigner(f.signKey, pw, ro.Remote(ctx)...)
		if err != nil {
			return t, fault.Input(err)
		}
		t.Signer = s
	case f.keyless:
		s, err := sign.NewKeylessSigner(f.sigstore, os.Getenv, ro.Remote(ctx)...)
		if err != nil {
			return t, fault.Input(err)
		}
		t.Signer = s
	}
	if pull {
		if err := t.CheckPull(flag); err != nil {
			return t, err
		}
	}
	if push {
		if err := t.CheckPush(flag); err != nil {
			return t, err
		}
	}
	return t, nil
}
