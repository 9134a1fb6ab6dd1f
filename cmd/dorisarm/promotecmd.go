package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/promote"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

func newPromoteCmd(g *globals) *cobra.Command {
	var tf trustFlags
	var signKey, sigFormat, file, format string
	var yes, rollback bool
	var ro registry.Options
	cmd := &cobra.Command{
		Use:   "promote [SRC DST | --file promotions.yaml]",
		Short: "Promote a verified release image to a release tag, by digest",
		Long: `promote resolves SRC to its digest, verifies it with --key (signatures on every
manifest; SBOM, provenance and a clean scan attestation on every build-made
one), checks the destination tag, and with --yes copies everything by digest
(index, manifests, blobs, cosign signatures and attestations) and writes the
tag last. Without --yes it prints the plan and writes nothing. Signatures
and attestations are read in both formats, Sigstore bundles (OCI 1.1
referrers, cosign v3) first, then the legacy .sig/.att tags, and each form
that verified is copied by digest: bundles as referrers of the copied
manifests (through the referrers API, or its sha256-<digest> tag fallback),
the legacy tags as they were read.

Gates: unsigned, wrongly signed, missing attestations or a scan with
violations refuse; so does a config or layer whose bytes in the registry
do not match its digest (every blob is read). The destination must name
what the signed image is: its repository ends in the image name (doris-be),
and its tag is the image's Doris version, a shorter series of it (2.1) or
latest, followed for a per-target image by -TARGET (2.1.8-kunpeng920); the
image's target and version must be those of its signed provenance and scan
attestation. A release tag (2.1.8, 2.1.8-kunpeng920) that already
points elsewhere refuses; a floating tag (latest, 2.1) never moves back in
version order (unless --rollback, for the way back from a bad release), and
pre-releases never become latest. With --sign-key the
promotion (who, when, source, destination, digest) is attached as a signed
attestation. --file takes reviewed promotions, sources by digest with their
tags, in this shape:

  promotions:
    - source: 127.0.0.1:5000/staging/doris-be@sha256:<64 hex digits>
      tags:
        - 127.0.0.1:5000/release/doris-be:2.1.8
        - 127.0.0.1:5000/release/doris-be:2.1`,
		Example: `  dorisarm promote --key keys/cosign.pub 127.0.0.1:5000/staging/doris-be:2.1.8-rc1 127.0.0.1:5000/release/doris-be:2.1.8
  dorisarm promote --key keys/cosign.pub --sign-key keys/cosign.key --yes --file promotions.yaml
  dorisarm promote --key keys/cosign.pub --rollback --yes 127.0.0.1:5000/release/doris-be:2.1.7 127.0.0.1:5000/release/doris-be:2.1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			trust, err := tf.trust(g.stderr)
			if err != nil {
				return err
			}
			todo, err := promote.Promotions(file, args, ro)
			if err != nil {
				return err
			}
			var rec promote.Recorder
			if signKey != "" {
				f, err := sign.ParseFormat(sigFormat)
				if err != nil {
					return fault.Input(err)
				}
				pw, err := password()
				if err != nil {
					return err
				}
				s, err := sign.LoadSigner(signKey, pw, ro.Remote(cmd.Context())...)
				if err != nil {
					return fault.Input(err)
				}
				rec = s.WithFormat(f)
			}
			text := format == "text"
			hooks := promote.Hooks{
				Checked: func(p *promote.Plan, passed bool) {
					if text {
						p.WriteChecks(g.stdout, g.paint, passed)
					}
				},
				Promoted: func(p *promote.Plan) {
					if text {
						fmt.Fprintf(g.stdout, "promoted %s -> %s\n", p.Src, p.Dst)
					}
				},
			}
			o := promote.Options{Trust: trust, Registry: ro, Rollback: rollback}
			out, err := promote.Run(cmd.Context(), todo, o, yes, rec, promote.Promoter(os.Getenv), hooks)
			switch {
			case !text && (err == nil || errors.Is(err, fault.ErrGate)):
				return errors.Join(printJSON(g.stdout, out), err)
			case text && err == nil && !yes:
				fmt.Fprintln(g.stdout, "dry run: nothing written; run again with --yes to promote")
			}
			return err
		},
	}
	tf.add(cmd)
	cmd.Flags().StringVar(&signKey, "sign-key", "", "cosign private key to sign the promotion record with ($COSIGN_PASSWORD)")
	cmd.Flags().StringVar(&sigFormat, "signature-format", "both", "the promotion record's format with --sign-key: both (a Sigstore bundle and the legacy .att tag), bundle or legacy")
	cmd.Flags().StringVar(&file, "file", "", "promotions file (promotions: [{source: REPO@sha256:..., tags: [REPO:TAG, ...]}]; see the shape above)")
	inputFlags(cmd, false, "sign-key", "file")
	cmd.Flags().BoolVar(&yes, "yes", false, "promote (without it: print the plan, write nothing)")
	cmd.Flags().BoolVar(&rollback, "rollback", false, "let a floating tag (latest, 2.1) move back to an older, still verified release")
	registryFlags(cmd, &ro)
	formatFlag(cmd, &format, "text or json", "text", "json")
	return cmd
}
