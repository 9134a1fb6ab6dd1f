// Package attest makes the attestations of release images from the builds
// they were made from: for an image, its build's SPDX SBOM, SLSA provenance
// and scan (the build's files scanned again for its target); for a
// multi-arch index, the same three naming every platform made from a build;
// for a shared image (the Java FE) and its index, the same three about the
// tree it holds, scanned for the target of every build holding it. Images
// are matched to builds by their io.dorisarm.build.digest annotation, shared
// ones by their io.dorisarm.shared.tree.
package attest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/promote"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// BuilderID names dorisarm as the builder in provenance.
const BuilderID = "https://github.com/dorisarm/dorisarm"

// Attacher signs and attaches one attestation (sign.Signer, the keyless
// signer).
type Attacher interface {
	Attest(ctx context.Context, d name.Digest, predicateType string, predicate []byte) error
}

// Builds attests the images made from the builds of one build directory.
type Builds struct {
	m          *matrix.Matrix
	recipeFile func(name string) string
	registry   registry.Options
	builds     map[string]image.Build
	scans      map[string][]byte       // scan predicates by build digest and directory
	trees      map[string][]sharedTree // the shared images' trees of each build, by build digest
}

// sharedTree is the tree of a shared image's directory in one build.
type sharedTree struct {
	id, from string
}

// Open reads the builds under dir. recipeFile finds a build's recipe by
// name (for its scan allow file).
func Open(m *matrix.Matrix, dir string, recipeFile func(name string) string, ro registry.Options) (*Builds, error) {
	bs, err := image.FindBuilds(dir)
	if err != nil {
		return nil, err
	}
	a := &Builds{m: m, recipeFile: recipeFile, registry: ro, builds: map[string]image.Build{}, scans: map[string][]byte{}, trees: map[string][]sharedTree{}}
	for _, b := range bs {
		d := b.Record.ContentDigest()
		if other, ok := a.builds[d]; ok {
			return nil, fault.Inputf("%s and %s have the same build digest %s: their images could not be told apart", other.Dir, b.Dir, d)
		}
		a.builds[d] = b
	}
	return a, nil
}

// Attest attaches the SBOM, provenance and scan attestations to d when d
// was made from one of the builds, or is a multi-arch index with platforms
// made from them (the index predicates name every such platform); it
// returns the predicate types attached.
func (a *Builds) Attest(ctx context.Context, s Attacher, d name.Digest) ([]string, error) {
	ro := a.registry.Remote(ctx)
	desc, err := remote.Get(d, ro...)
	if err != nil {
		return nil, err
	}
	var sbom, prov, scanPred []byte
	if ann := sign.ManifestAnnotations(desc.Manifest); ann[image.AnnShared] != "" {
		sh, err := a.shared(ctx, ann[promote.TitleAnnotation], ann[promote.VersionAnnotation], ann[image.AnnShared])
		if err != nil {
			return nil, err
		}
		if sbom, err = sign.SharedSBOM(*sh, d.Context().Name()); err != nil {
			return nil, err
		}
		if prov, err = sign.SharedProvenance(*sh, BuilderID); err != nil {
			return nil, err
		}
		if scanPred, err = sign.SharedScan(*sh); err != nil {
			return nil, err
		}
	} else if desc.MediaType.IsIndex() {
		ix, err := a.index(ctx, d, desc, ro)
		if err != nil || ix == nil {
			return nil, err
		}
		if sbom, err = sign.IndexSBOM(*ix, d.Context().Name()); err != nil {
			return nil, err
		}
		if prov, err = sign.IndexProvenance(*ix, BuilderID); err != nil {
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
		if prov, err = sign.Provenance(b.Record, BuilderID); err != nil {
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
func (a *Builds) buildOf(ctx context.Context, d name.Digest, ro []remote.Option) (*image.Build, error) {
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
func (a *Builds) index(ctx context.Context, d name.Digest, desc *remote.Descriptor, ro []remote.Option) (*sign.Index, error) {
	_, im, err := registry.IndexOf(desc)
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
			return nil, fmt.Errorf("its platform %s: %w", cd.DigestStr(), err)
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

// shared is the shared image name version holding tree: the builds whose
// directory for a shared recipe image has that tree, each with the tree's
// scan for its target, and the tree's jars.
func (a *Builds) shared(ctx context.Context, name, version, tree string) (*sign.Shared, error) {
	sh := &sign.Shared{Name: name, Version: version, Tree: tree}
	digests := make([]string, 0, len(a.builds))
	for d := range a.builds {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	for _, d := range digests {
		b := a.builds[d]
		if b.Record.Cell.Doris != version {
			continue
		}
		trees, err := a.sharedTrees(&b)
		if err != nil {
			return nil, err
		}
		for _, t := range trees {
			if t.id != tree {
				continue
			}
			dir := filepath.Join(b.Dir, t.from)
			p, err := a.scanDir(ctx, &b, t.from)
			if err != nil {
				return nil, err
			}
			if sh.From == "" {
				sh.From = t.from
				if sh.Files, err = jars(dir); err != nil {
					return nil, err
				}
			}
			sh.Builds = append(sh.Builds, sign.SharedBuild{Record: b.Record, Scan: p})
			break
		}
	}
	if len(sh.Builds) == 0 {
		return nil, fmt.Errorf("no build in --build holds the tree %s of the shared image %s %s: pass the directory publish took it from", tree, name, version)
	}
	return sh, nil
}

// sharedTrees are the trees of the build's directories that its recipe
// makes shared images of, computed once per build.
func (a *Builds) sharedTrees(b *image.Build) ([]sharedTree, error) {
	d := b.Record.ContentDigest()
	if ts, ok := a.trees[d]; ok {
		return ts, nil
	}
	r, err := recipe.Load(a.recipeFile(b.Record.Recipe.Name))
	if err != nil {
		return nil, fmt.Errorf("%s: the recipe of its build: %w", b.Dir, err)
	}
	ts := []sharedTree{}
	for _, spec := range r.Images {
		if !spec.Shared {
			continue
		}
		id, err := image.TreeID(filepath.Join(b.Dir, spec.From))
		if err != nil {
			continue // this build has no such directory: it holds no such image
		}
		ts = append(ts, sharedTree{id: id.String(), from: spec.From})
	}
	a.trees[d] = ts
	return ts, nil
}

// jars are the .jar files under dir with their SHA-256, for a shared
// image's SBOM; a link named .jar is not listed (regular files only).
func jars(dir string) ([]sign.SharedFile, error) {
	files, err := build.DigestTree(dir)
	var out []sign.SharedFile
	for _, f := range files {
		if f.Type == "" && strings.HasSuffix(f.Path, ".jar") {
			out = append(out, sign.SharedFile{Path: f.Path, SHA256: f.SHA256})
		}
	}
	return out, err
}

// scan is the scan predicate of a build: its files scanned for its target
// with the recipe's allow file and the build's recorded waivers, made once
// per build (an index and its platform manifests share it).
func (a *Builds) scan(ctx context.Context, b *image.Build) ([]byte, error) {
	return a.scanDir(ctx, b, "")
}

// scanDir is the scan predicate of the build's directory sub ("" for all
// of it), as scan says.
func (a *Builds) scanDir(ctx context.Context, b *image.Build, sub string) ([]byte, error) {
	rec := b.Record
	key := rec.ContentDigest() + " " + sub
	if p, ok := a.scans[key]; ok {
		return p, nil
	}
	pol, err := scan.PolicyFor(a.m, rec.Cell.Target)
	if err != nil {
		return nil, err
	}
	opts := scan.DefaultOptions()
	// The recipe's allow file, as the build's gate had it: a recipe that
	// does not load is an error, not a scan without its exceptions.
	r, err := recipe.Load(a.recipeFile(rec.Recipe.Name))
	if err != nil {
		return nil, fmt.Errorf("%s: the recipe of its build: %w", b.Dir, err)
	}
	if r.ScanAllow != "" {
		if opts.Allow, err = scan.LoadAllow(r.Path(r.ScanAllow)); err != nil {
			return nil, err
		}
	}
	// The build's recorded waivers hold for its attestation as for its gate.
	opts.Allow = append(opts.Allow, build.WaiverExceptions(rec.Cell)...)
	rep, err := scan.Scan(ctx, []string{filepath.Join(b.Dir, sub)}, pol, opts)
	if err != nil {
		return nil, err
	}
	p, err := json.Marshal(rep)
	if err != nil {
		return nil, err
	}
	a.scans[key] = p
	return p, nil
}

// Signer signs a reference (an index and every manifest in it) and attests
// digests: sign.Signer, the keyless signer.
type Signer interface {
	Sign(ctx context.Context, ref name.Reference) ([]name.Digest, error)
	Attacher
}

// Signed is what SignAll did for one digest.
type Signed struct {
	Digest       string   `json:"digest"`
	Attestations []string `json:"attestations"`
}

// SignAll signs every ref and, with builds, attests each digest it signed
// once (an index and a per-target tag share a manifest). Failures are
// failed gates: the input was checked before.
func SignAll(ctx context.Context, s Signer, refs []name.Reference, builds *Builds) (Done, error) {
	var ds []name.Digest
	for _, ref := range refs {
		got, err := s.Sign(ctx, ref)
		if err != nil {
			return nil, fault.Gate(err)
		}
		ds = append(ds, got...)
	}
	done := Done{}
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.String()] {
			continue
		}
		seen[d.String()] = true
		sd := Signed{Digest: d.String(), Attestations: []string{}}
		if builds != nil {
			kinds, err := builds.Attest(ctx, s, d)
			if err != nil {
				return nil, fault.Gatef("attesting %s: %w", d, err)
			}
			sd.Attestations = append(sd.Attestations, kinds...)
		}
		done = append(done, sd)
	}
	return done, nil
}
