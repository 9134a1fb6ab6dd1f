package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/sign"
)

const builderID = "https://github.com/dorisarm/dorisarm"

// attester makes the attestations of the images made from the builds in a
// build directory, found by their io.dorisarm.build.digest annotation.
type attester struct {
	g      *globals
	m      *matrix.Matrix
	builds map[string]image.Build
}

func newAttester(g *globals, dir string) (*attester, error) {
	m, err := g.loadMatrix()
	if err != nil {
		return nil, err
	}
	bs, err := image.FindBuilds(dir)
	if err != nil {
		return nil, badInput(err)
	}
	a := &attester{g: g, m: m, builds: map[string]image.Build{}}
	for _, b := range bs {
		a.builds[b.Record.ContentDigest()] = b
	}
	return a, nil
}

// buildDigest reads the io.dorisarm.build.digest annotation of d's manifest.
func buildDigest(ctx context.Context, d name.Digest) (string, error) {
	desc, err := remote.Get(d, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
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

// attest attaches the SBOM, provenance and scan attestations to d when d
// was made from one of the builds; it returns the predicate types attached.
func (a *attester) attest(ctx context.Context, s *sign.Signer, d name.Digest) ([]string, error) {
	bd, err := buildDigest(ctx, d)
	if err != nil || bd == "" {
		return nil, err
	}
	b, ok := a.builds[bd]
	if !ok {
		return nil, fmt.Errorf("its build (%s) is not in --build; pass the directory publish took it from", bd)
	}
	rec := b.Record
	sbom, err := sign.SBOM(rec, d.Context().Name())
	if err != nil {
		return nil, err
	}
	prov, err := sign.Provenance(rec, builderID)
	if err != nil {
		return nil, err
	}
	pol, err := scan.PolicyFor(a.m, rec.Cell.Target)
	if err != nil {
		return nil, err
	}
	opts := scan.DefaultOptions()
	rf := filepath.Join(a.g.repoDir(), "recipes", rec.Recipe.Name+".yaml")
	if r, err := recipe.Load(rf); err == nil && r.ScanAllow != "" {
		if opts.Allow, err = scan.LoadAllow(r.Path(r.ScanAllow)); err != nil {
			return nil, err
		}
	}
	rep, err := scan.Scan(ctx, []string{b.Dir}, pol, opts)
	if err != nil {
		return nil, err
	}
	scanPred, err := json.Marshal(rep)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, p := range []struct {
		typ  string
		pred []byte
	}{{sign.PredicateSPDX, sbom}, {sign.PredicateSLSA1, prov}, {sign.PredicateScan, scanPred}} {
		if err := s.Attest(ctx, d, p.typ, p.pred); err != nil {
			return nil, err
		}
		done = append(done, p.typ)
	}
	return done, nil
}

// verifyAttestations checks every manifest ref covers that was made from a
// build: the three attestations exist, are signed by the key, are about its
// digest, and the scan is clean.
func verifyAttestations(ctx context.Context, ref name.Reference, pub string) ([]sign.Check, error) {
	ds, err := sign.Digests(ctx, ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return nil, err
	}
	var checks []sign.Check
	for _, d := range ds {
		bd, err := buildDigest(ctx, d)
		if err != nil {
			return nil, err
		}
		if bd == "" {
			continue // an index, or an image not made from one build (the shared FE)
		}
		sts, verr := sign.VerifyAttestations(ctx, d, pub, remote.WithAuthFromKeychain(authn.DefaultKeychain))
		byType := map[string]sign.Statement{}
		for _, st := range sts {
			if st.Subject == d.DigestStr() {
				byType[st.PredicateType] = st
			}
		}
		for _, typ := range []string{sign.PredicateSPDX, sign.PredicateSLSA1, sign.PredicateScan} {
			c := sign.Check{What: fmt.Sprintf("attestation %s of %s", typ, d)}
			switch st, ok := byType[typ]; {
			case verr != nil:
				c.Why = verr.Error()
			case !ok:
				c.Why = "missing (sign it with dorisarm sign --build)"
			case typ == sign.PredicateScan:
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
	return checks, nil
}
