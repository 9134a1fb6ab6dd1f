package sign

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/image"
)

// BuildDigest reads the io.dorisarm.build.digest annotation of d's manifest.
func BuildDigest(ctx context.Context, d name.Digest, opts ...remote.Option) (string, error) {
	desc, err := remote.Get(d, append([]remote.Option{remote.WithContext(ctx)}, opts...)...)
	if err != nil {
		return "", err
	}
	var mf struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(desc.Manifest, &mf); err != nil {
		return "", err
	}
	return mf.Annotations[image.AnnBuild], nil
}

// VerifyAttestationsOf checks every manifest ref covers that was made from a
// build: the three attestations exist, are signed by the key, are about its
// digest, and the scan is clean.
func VerifyAttestationsOf(ctx context.Context, ref name.Reference, trust Trust, opts ...remote.Option) ([]Check, error) {
	ds, err := Digests(ctx, ref, opts...)
	if err != nil {
		return nil, err
	}
	checks, _, err := attestationChecks(ctx, ds, trust, opts...)
	return checks, err
}

// attestationChecks checks the attestations of every build-made manifest
// in ds and returns the statements that verified, by manifest digest.
func attestationChecks(ctx context.Context, ds []name.Digest, trust Trust, opts ...remote.Option) ([]Check, map[string][]Statement, error) {
	var checks []Check
	verified := map[string][]Statement{}
	for _, d := range ds {
		bd, err := BuildDigest(ctx, d, opts...)
		if err != nil {
			return nil, nil, err
		}
		if bd == "" {
			continue // an index, or an image not made from one build (the shared FE)
		}
		sts, attached, verr := verifyAttestations(ctx, d, trust, opts...)
		if verr == nil {
			verified[d.DigestStr()] = sts
		}
		byType := map[string]Statement{}
		for _, st := range sts {
			if st.Subject == d.DigestStr() {
				byType[st.PredicateType] = st
			}
		}
		for _, typ := range []string{PredicateSPDX, PredicateSLSA1, PredicateScan} {
			c := Check{What: fmt.Sprintf("attestation %s of %s", typ, d)}
			switch st, ok := byType[typ]; {
			case verr != nil:
				c.Why = verr.Error()
			case !ok && attached[typ]:
				c.Why = "attached, but its signature does not verify: it was altered or signed with another key"
			case !ok:
				c.Why = "missing (sign it with dorisarm sign --build)"
			case typ == PredicateScan:
				var rep struct {
					Summary struct {
						Clean      bool `json:"clean"`
						Violations int  `json:"violations"`
					} `json:"summary"`
				}
				if err := json.Unmarshal(st.Predicate, &rep); err != nil || !rep.Summary.Clean {
					c.Why = fmt.Sprintf("the scan found %d violation(s) for the image's target", rep.Summary.Violations)
				} else {
					c.OK = true
				}
			default:
				c.OK = true
			}
			checks = append(checks, c)
		}
	}
	return checks, verified, nil
}
