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
	"github.com/dorisarm/dorisarm/internal/promote"
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
	scans  map[string][]byte // scan predicates by build digest
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
	a := &attester{g: g, m: m, builds: map[string]image.Build{}, scans: map[string][]byte{}}
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
// was made from one of the builds, or is a multi-arch index with platforms
// made from them (the index predicates name every such platform); it
// returns the predicate types attached.
func (a *attester) attest(ctx context.Context, s releaseSigner, d name.Digest) ([]string, error) {
	ro := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	desc, err := remote.Get(d, ro...)
	if err != nil {
		return nil, err
	}
	var sbom, prov, scanPred []byte
	if desc.MediaType.IsIndex() {
		ix, err := a.index(ctx, d, desc, ro)
		if err != nil || ix == nil {
			return nil, err
		}
		if sbom, err = sign.IndexSBOM(*ix, d.Context().Name()); err != nil {
			return nil, err
		}
		if prov, err = sign.IndexProvenance(*ix, builderID); err != nil {
			return nil, err
		}
		if scanPred, err = sign.IndexScan(*ix); err != nil {
			return nil, err
		}
	} else {
		b, err := a.buildOf(ctx, d, ro)
		if err != nil || b == nil {
			return nil, err
		}
		if sbom, err = sign.SBOM(b.Record, d.Context().Name()); err != nil {
			return nil, err
		}
		if prov, err = sign.Provenance(b.Record, builderID); err != nil {
			return nil, err
		}
		if scanPred, err = a.scan(ctx, b); err != nil {
			return nil, err
		}
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

// buildOf is the build the image at d was made from, nil when it was not
// made from one build (the shared FE).
func (a *attester) buildOf(ctx context.Context, d name.Digest, ro []remote.Option) (*image.Build, error) {
	bd, err := sign.BuildDigest(ctx, d, ro...)
	if err != nil || bd == "" {
		return nil, err
	}
	b, ok := a.builds[bd]
	if !ok {
		return nil, fmt.Errorf("its build (%s) is not in --build; pass the directory publish took it from", bd)
	}
	return &b, nil
}

// index is what the index at d holds from the builds: nil when none of its
// platforms was made from one (the shared FE's index). Imported platforms
// (an official x86 release) are not ours to attest.
func (a *attester) index(ctx context.Context, d name.Digest, desc *remote.Descriptor, ro []remote.Option) (*sign.Index, error) {
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	ix := &sign.Index{Name: im.Annotations[promote.TitleAnnotation], Version: im.Annotations[promote.VersionAnnotation]}
	for _, m := range im.Manifests {
		if m.Annotations[image.AnnImported] != "" || m.MediaType.IsIndex() {
			continue
		}
		cd := d.Context().Digest(m.Digest.String())
		b, err := a.buildOf(ctx, cd, ro)
		if err != nil {
			return nil, fmt.Errorf("its platform %s: %v", cd.DigestStr(), err)
		}
		if b == nil {
			continue
		}
		scanPred, err := a.scan(ctx, b)
		if err != nil {
			return nil, err
		}
		c := sign.IndexChild{Digest: m.Digest.String(), Record: b.Record, Scan: scanPred}
		if m.Platform != nil {
			c.Platform = *m.Platform
		}
		ix.Children = append(ix.Children, c)
	}
	if len(ix.Children) == 0 {
		return nil, nil
	}
	return ix, nil
}

// scan is the scan predicate of a build: its files scanned for its target
// with the recipe's allow file and the build's recorded waivers, made once
// per build (an index and its platform manifests share it).
func (a *attester) scan(ctx context.Context, b *image.Build) ([]byte, error) {
	rec := b.Record
	if p, ok := a.scans[rec.ContentDigest()]; ok {
		return p, nil
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
	p, err := json.Marshal(rep)
	if err != nil {
		return nil, err
	}
	a.scans[rec.ContentDigest()] = p
	return p, nil
}
