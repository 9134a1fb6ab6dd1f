package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/promote"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// PredicatePromotion is the predicate type of promotion records.
const predicatePromotion = "https://dorisarm.dev/attestations/promotion/v1"

func newPromoteCmd(g *globals) *cobra.Command {
	var tf trustFlags
	var signKey, file, format string
	var yes, insecure, rollback bool
	cmd := &cobra.Command{
		Use:   "promote [SRC DST | --file promotions.yaml]",
		Short: "Promote a verified release image to a release tag, by digest",
		Long: `promote resolves SRC to its digest, verifies it with --key (signatures on every
manifest; SBOM, provenance and a clean scan attestation on every build-made
one), checks the destination tag, and with --yes copies everything by digest
(index, manifests, blobs, cosign signatures and attestations) and writes the
tag last. Without --yes it prints the plan and writes nothing.

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
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			text := format == "text"
			type outcome struct {
				Plans    []*promote.Plan `json:"plans"`
				Promoted bool            `json:"promoted"`
				Refused  string          `json:"refused,omitempty"`
			}
			var res outcome
			emit := func() error {
				if text {
					return nil
				}
				if res.Plans == nil {
					res.Plans = []*promote.Plan{}
				}
				return printJSON(g.stdout, res)
			}
			trust, err := tf.trust()
			if err != nil {
				return err
			}
			var nopts []name.Option
			if insecure {
				nopts = append(nopts, name.Insecure)
			}
			var todo []*promote.Promotion
			switch {
			case file != "" && len(args) == 0:
				ps, err := promote.LoadFile(file, nopts...)
				if err != nil {
					return fault.Input(err)
				}
				todo = ps
			case file == "" && len(args) == 2:
				src, err := name.ParseReference(args[0], nopts...)
				if err != nil {
					return usageErr("%s: %v", args[0], err)
				}
				dst, err := name.NewTag(args[1], nopts...)
				if err != nil {
					return usageErr("%s: %v", args[1], err)
				}
				todo = []*promote.Promotion{{Source: src.String(), Dst: []name.Tag{dst}}}
			default:
				return usageErr("give SRC and DST, or --file promotions.yaml")
			}
			var signer *sign.Signer
			if signKey != "" {
				pw, err := password()
				if err != nil {
					return err
				}
				if signer, err = sign.LoadSigner(signKey, pw, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
					return fault.Input(err)
				}
			}
			o := promote.Options{Trust: trust, Remote: []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}, Rollback: rollback}
			ctx := cmd.Context()
			// Check everything before writing anything.
			var plans []*promote.Plan
			for _, p := range todo {
				src, err := name.ParseReference(p.Source, nopts...)
				if err != nil {
					return usageErr("%s: %v", p.Source, err)
				}
				for _, dst := range p.Dst {
					plan, err := promote.Check(ctx, src, dst, o)
					if plan != nil && text {
						for _, c := range plan.Checks {
							word := "ok  "
							if !c.OK {
								word = "FAIL"
							}
							fmt.Fprintf(g.stdout, "%s  %s\n", g.paint(c.OK, word), c.What)
						}
					}
					if err != nil {
						var ge *promote.GateError
						if errors.As(err, &ge) {
							if plan != nil {
								res.Plans = append(res.Plans, plan)
							}
							res.Refused = fmt.Sprintf("%s -> %s: %v", p.Source, dst, err)
							if err := emit(); err != nil {
								return err
							}
							return fault.Gate(fmt.Errorf("%s -> %s: %v; nothing was promoted", p.Source, dst, err))
						}
						return err
					}
					plans = append(plans, plan)
				}
			}
			res.Plans = plans
			for _, plan := range plans {
				move := "new tag"
				if plan.Replaces != "" {
					move = "moves from " + plan.Replaces
				}
				if plan.RollsBack != "" {
					move = fmt.Sprintf("rolls back from %s (%s)", plan.RollsBack, plan.Replaces)
				}
				if text {
					fmt.Fprintf(g.stdout, "plan  %s -> %s (%s, %d manifests, %d bytes, %d signature/attestation tags, %s)\n", plan.Src, plan.Dst, plan.Version, len(plan.Digests), plan.Bytes, len(plan.Companions), move)
				}
			}
			if !yes {
				if text {
					fmt.Fprintln(g.stdout, "dry run: nothing written; run again with --yes to promote")
				}
				return emit()
			}
			for _, plan := range plans {
				if err := promote.Execute(ctx, plan, o); err != nil {
					return fault.Gate(fmt.Errorf("%s -> %s: %v", plan.Src, plan.Dst, err))
				}
				if text {
					fmt.Fprintf(g.stdout, "promoted %s -> %s\n", plan.Src, plan.Dst)
				}
				if signer != nil {
					rec, _ := json.Marshal(map[string]string{
						"promoter": promoter(), "time": time.Now().UTC().Format(time.RFC3339),
						"source": plan.Src.String(), "destination": plan.Dst.String(), "digest": plan.Src.DigestStr(),
						"replaces": plan.Replaces, "rolls_back_from": plan.RollsBack,
					})
					d := plan.Dst.Context().Digest(plan.Src.DigestStr())
					if err := signer.AttestAdd(ctx, d, predicatePromotion, rec); err != nil {
						return fault.Gate(fmt.Errorf("recording the promotion of %s: %v", d, err))
					}
				}
			}
			res.Promoted = true
			return emit()
		},
	}
	tf.add(cmd)
	cmd.Flags().StringVar(&signKey, "sign-key", "", "cosign private key to sign the promotion record with ($COSIGN_PASSWORD)")
	cmd.Flags().StringVar(&file, "file", "", "promotions file (promotions: [{source: REPO@sha256:..., tags: [REPO:TAG, ...]}]; see the shape above)")
	cmd.Flags().BoolVar(&yes, "yes", false, "promote (without it: print the plan, write nothing)")
	cmd.Flags().BoolVar(&rollback, "rollback", false, "let a floating tag (latest, 2.1) move back to an older, still verified release")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow plain-HTTP registries that are not on loopback")
	formatFlag(cmd, &format, "text", "text or json")
	return cmd
}

// promoter names who promotes: the CI actor, else the local user.
func promoter() string {
	if a := os.Getenv("GITHUB_ACTOR"); a != "" {
		return "github:" + a
	}
	if u, err := user.Current(); err == nil {
		h, _ := os.Hostname()
		return u.Username + "@" + h
	}
	return "unknown"
}
