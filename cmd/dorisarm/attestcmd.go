package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/fault"
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
		return nil, fault.Input(err)
	}
	a := &attester{g: g, m: m, builds: map[string]image.Build{}}
	for _, b := range bs {
		d := b.Record.ContentDigest()
		if other, ok := a.builds[d]; ok {
			return nil, fmt.Errorf("%s and %s have the same build digest %s: their images could not be told apart", other.Dir, b.Dir, d)
		}
		a.builds[d] = b
	}
	return a, nil
}

// attest attaches the SBOM, provenance and scan attestations to d when d
// was made from one of the builds; it returns the predicate types attached.
func (a *attester) attest(ctx context.Context, s releaseSigner, d name.Digest) ([]string, error) {
	bd, err := sign.BuildDigest(ctx, d, remote.WithAuthFromKeychain(authn.DefaultKeychain))
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
	rf := a.g.recipeFile(rec.Recipe.Name)
	if r, err := recipe.Load(rf); err == nil && r.ScanAllow != "" {
		if opts.Allow, err = scan.LoadAllow(r.Path(r.ScanAllow)); err != nil {
			return nil, err
		}
	}
	// The build's recorded waivers hold for its attestation as for its gate.
	opts.Allow = append(opts.Allow, build.WaiverExceptions(rec.Cell)...)
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
