package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/attest"
	"github.com/dorisarm/dorisarm/internal/promote"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// password reads COSIGN_PASSWORD, which must be set (it may be empty).
func password() ([]byte, error) { return sign.EnvPassword(os.LookupEnv) }

func newKeygenCmd(g *globals) *cobra.Command {
	var out, format string
	cmd := &cobra.Command{
		Use:     "keygen",
		Short:   "Write a cosign-format key pair (cosign.key, encrypted with $COSIGN_PASSWORD, and cosign.pub)",
		Example: "  COSIGN_PASSWORD=... dorisarm keygen --out keys",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kp, err := sign.NewKeyPair(out, password)
			if err != nil {
				return err
			}
			return printAs(g.stdout, format, kp)
		},
	}
	cmd.Flags().StringVar(&out, "out", ".", "directory for cosign.key and cosign.pub")
	formatFlag(cmd, &format, "text or json", "text", "json")
	return cmd
}

func newSignCmd(g *globals) *cobra.Command {
	var format string
	var req attest.Request
	cmd := &cobra.Command{
		Use:   "sign REF...",
		Short: "Sign an image or index by digest (an index and every manifest in it), as cosign does",
		Long: `sign resolves REF to its digest and signs it with a cosign key: for an index,
the index and every platform manifest. Signatures are stored as cosign stores
them (the sha256-<digest>.sig tag), so cosign verify --key accepts them. The
key's password comes from COSIGN_PASSWORD and is never printed.

With --build (the directory publish took the images from), every manifest
made from a build also gets three attestations, signed with the same key and
stored as cosign stores them: an SPDX 2.3 SBOM (Doris, every third-party
package with its checksums, every patch), SLSA provenance v1 (matrix, recipe,
source, patches, compiler, flags, PGO profile) and the scan report of the
build's files for its target (predicate type ` + sign.PredicateScan + `).
A multi-arch index gets the same three, naming each of its platforms. The
shared FE image and its index get the same three about the tree they hold
(io.dorisarm.shared.tree): the builds holding it, its jars, and its scan for
each of those builds' targets.

Every signature and attestation is written in two formats unless
--signature-format says one: as a Sigstore bundle stored as an OCI 1.1
referrer of the manifest (cosign v3's default format; v2.6's
--new-bundle-format), and in the legacy sha256-<digest>.sig/.att tags that
cosign v2 reads. Registries without the referrers API get the tag fallback
(sha256-<digest>). With --key and --rekor-url, every signature and
attestation is also logged in that Rekor log, so that cosign verifies them
without --insecure-ignore-tlog.

--keyless signs with a short-lived Fulcio certificate for the CI's OIDC
identity instead of a key, every signature and attestation logged in Rekor
(stored as the cosign CLI stores them). It needs the network and an OIDC token: GitHub
Actions with "permissions: id-token: write" provides one; elsewhere pass
--identity-token or $SIGSTORE_ID_TOKEN. Verify such releases with
--certificate-identity and --certificate-oidc-issuer.`,
		Example: `  COSIGN_PASSWORD=... dorisarm sign --key keys/cosign.key --build out 127.0.0.1:5000/doris/doris-be:2.1.8
  dorisarm sign --keyless --build out ghcr.io/ORG/doris/doris-be:2.1.8     # in GitHub Actions
  dorisarm sign --key keys/cosign.key --build out 127.0.0.1:5000/doris/doris-be:2.1.8 127.0.0.1:5000/doris/doris-be:2.1.8-kunpeng920`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Refs, req.Password, req.Getenv, req.Matrix, req.RecipeFile = args, password, os.Getenv, g.loadMatrix, g.data.Recipe
			if !req.Keyless {
				// With a key, --rekor-url asks for the transparency log.
				req.KeyRekor, req.Sigstore.RekorURL = req.Sigstore.RekorURL, ""
			}
			done, err := attest.Run(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printAs(g.stdout, format, done)
		},
	}
	cmd.Flags().StringVar(&req.Key, "key", "", "cosign private key (cosign.key)")
	inputFlags(cmd, false, "key")
	cmd.Flags().BoolVar(&req.Keyless, "keyless", false, "sign with a Fulcio certificate for the CI's OIDC identity, logged in Rekor")
	cmd.Flags().StringVar(&req.Sigstore.FulcioURL, "fulcio-url", "", "keyless: Fulcio (default https://fulcio.sigstore.dev)")
	cmd.Flags().StringVar(&req.Sigstore.RekorURL, "rekor-url", "", "keyless: Rekor (default https://rekor.sigstore.dev); with --key: log every signature and attestation there too")
	cmd.Flags().StringVar(&req.Format, "signature-format", "both", "both: Sigstore bundles (OCI referrers, cosign v3's format) and the legacy .sig/.att tags; bundle; or legacy")
	cmd.Flags().StringVar(&req.Sigstore.OIDCIssuer, "oidc-issuer", "", "keyless: OIDC issuer (default https://oauth2.sigstore.dev/auth)")
	cmd.Flags().StringVar(&req.Sigstore.IDToken, "identity-token", "", "keyless: an OIDC token (default $SIGSTORE_ID_TOKEN, or GitHub Actions' own)")
	cmd.Flags().StringVar(&req.BuildDir, "build", "", "attest the images made from the builds in this dorisarm build --out directory")
	formatFlag(cmd, &format, "text or json", "text", "json")
	registryFlags(cmd, &req.Registry)
	return cmd
}

// trustFlags are how verify and promote are told whom to trust.
type trustFlags struct{ t sign.Trust }

func (f *trustFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.t.Key, "key", "", "cosign public key (cosign.pub) the release is signed with")
	cmd.Flags().StringVar(&f.t.Identity, "certificate-identity", "", "keyless: the signer's identity in its Fulcio certificate (e.g. the release workflow's URL)")
	cmd.Flags().StringVar(&f.t.IdentityRegexp, "certificate-identity-regexp", "", "keyless: a regular expression the signer's identity must match")
	cmd.Flags().StringVar(&f.t.Issuer, "certificate-oidc-issuer", "", "keyless: the OIDC issuer (e.g. https://token.actions.githubusercontent.com)")
	cmd.Flags().StringVar(&f.t.TrustedRoot, "trusted-root", "", "keyless: a trusted_root.json to trust instead of Sigstore's (from TUF), for a private Sigstore; with --key: require each signature's Rekor entry, checked against its logs")
	inputFlags(cmd, false, "key", "trusted-root")
}

func (f *trustFlags) trust(warn io.Writer) (sign.Trust, error) {
	f.warn(warn)
	return f.t, f.t.Validate()
}

// warn says what in the trust flags is probably not meant.
func (f *trustFlags) warn(w io.Writer) {
	for _, m := range f.t.Warnings() {
		fmt.Fprintln(w, "warning: "+m)
	}
}

// optional is the trust given, or nil when no trust flag was.
func (f *trustFlags) optional(warn io.Writer) (*sign.Trust, error) {
	if f.t == (sign.Trust{}) {
		return nil, nil
	}
	f.warn(warn)
	return &f.t, f.t.Validate()
}

func newVerifyCmd(g *globals) *cobra.Command {
	var tf trustFlags
	var noAttestations bool
	var ro registry.Options
	var format string
	cmd := &cobra.Command{
		Use:   "verify REF",
		Short: "Check the cosign signatures of an image or index and every manifest in it",
		Long: `verify resolves REF to its digest and checks, one line each, that it and (for
an index) every platform manifest carry a signature by --key (or, keyless,
by --certificate-identity from --certificate-oidc-issuer, with its Rekor
entry), and that every
manifest made from a build (io.dorisarm.build.digest), an index of such
manifests, and a shared image (the FE, io.dorisarm.shared.tree) and its
index, carries an SPDX SBOM, a SLSA provenance and a scan attestation
signed by that key about exactly its digest, with a clean scan (an index's
naming exactly its platforms, a shared image's the tree it holds). It reads every config and layer blob and checks
it against its digest, and when REF is a tag, that the tag names what the
image is (image name, Doris version or its series, and the target of a
per-target image, as its signed provenance says). Exit status 1 if any
check fails.`,
		Example: `  dorisarm verify --key keys/cosign.pub 127.0.0.1:5000/doris/doris-be:2.1.8
  dorisarm verify --certificate-identity-regexp '^https://github\.com/ORG/REPO/\.github/workflows/release\.yml@refs/tags/v[0-9.]+$' --certificate-oidc-issuer https://token.actions.githubusercontent.com ghcr.io/ORG/doris/doris-be:2.1.8
  dorisarm verify --key keys/cosign.pub -o json 127.0.0.1:5000/doris/doris-be:2.1.8 | jq '.checks[] | select(.ok | not)'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tf.warn(g.stderr)
			v, err := promote.VerifyRef(cmd.Context(), args[0], tf.t, noAttestations, ro)
			if err != nil {
				return err
			}
			v.Paint = g.paint
			if err := printAs(g.stdout, format, v); err != nil {
				return err
			}
			return v.Err()
		},
	}
	tf.add(cmd)
	registryFlags(cmd, &ro)
	cmd.Flags().BoolVar(&noAttestations, "signatures-only", false, "check signatures only, not the attestations")
	formatFlag(cmd, &format, "text or json", "text", "json")
	return cmd
}
