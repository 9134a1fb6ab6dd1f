package report

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// Options say where a release's images are and how to check them.
type Options struct {
	// Store holds the images; nil: the report has no image columns.
	Store Store
	// Images are the release's image names (the recipe's images: doris-be, doris-fe).
	Images []string
	// Trust checks signatures and attestations; nil: not checked.
	Trust *sign.Trust
	// Registry reaches the registry (credentials, plain HTTP, transport).
	Registry registry.Options
}

// FromBuilds reports the builds of a build directory and, with o.Store,
// their images.
func FromBuilds(ctx context.Context, from string, recs []*build.Record, o Options) (*Report, error) {
	r := &Report{From: from}
	for _, rec := range recs {
		r.Targets = append(r.Targets, FromRecord(rec))
	}
	r.Sort()
	r.Total()
	if o.Store != nil {
		r.Images = o.Store.String()
		if err := r.attach(ctx, o, r.Doris, nil); err != nil {
			return nil, err
		}
	}
	r.describeTrust(o)
	r.Total()
	return r, nil
}

// FromRegistry reports a release from its images alone: each per-target
// image's annotations and its signed provenance and scan attestations,
// read against the matrix for what the target allows.
func FromRegistry(ctx context.Context, m *matrix.Matrix, version string, o Options) (*Report, error) {
	if o.Trust == nil {
		return nil, fmt.Errorf("a report from a registry reads the images' attestations: give --key cosign.pub, or --certificate-identity and --certificate-oidc-issuer")
	}
	r := &Report{From: o.Store.String(), Images: o.Store.String()}
	mk := func(f *Found, im *Image, sts []sign.Statement) (*Target, error) {
		return targetFromImage(m, version, f, im, sts)
	}
	if err := r.attach(ctx, o, []string{version}, mk); err != nil {
		return nil, err
	}
	if len(r.Targets) == 0 {
		return nil, fmt.Errorf("%s holds no per-target images of Doris %s (tags %s-<target> of %s)", o.Store, version, version, strings.Join(o.Images, ", "))
	}
	r.Sort()
	r.describeTrust(o)
	r.Total()
	return r, nil
}

func (r *Report) describeTrust(o Options) {
	switch {
	case o.Trust == nil:
	case o.Trust.Key != "":
		r.Trust = "cosign public key " + o.Trust.Key
	default:
		id := o.Trust.Identity
		if id == "" {
			id = "~" + o.Trust.IdentityRegexp
		}
		r.Trust = fmt.Sprintf("keyless: identity %s, issuer %s", id, o.Trust.Issuer)
	}
}

// attach finds every image of each version in o.Store and hangs it on its
// target (made by mk when the report has no targets of its own).
func (r *Report) attach(ctx context.Context, o Options, versions []string, mk func(*Found, *Image, []sign.Statement) (*Target, error)) error {
	for _, img := range o.Images {
		tags, err := o.Store.Tags(ctx, img)
		if err != nil {
			return fmt.Errorf("listing %s in %s: %w", img, o.Store, err)
		}
		for _, v := range versions {
			for _, tag := range releaseTags(tags, v) {
				f, err := o.Store.Get(ctx, img, tag)
				if err != nil {
					return fmt.Errorf("reading %s:%s from %s: %w", img, tag, o.Store, err)
				}
				im := &Image{Ref: f.Ref, Digest: f.Digest, Size: f.Size, Platforms: f.Platforms, BuildID: f.Annotations[image.AnnBuild]}
				var sts []sign.Statement
				im.Signature, im.Attestations, sts = o.check(ctx, img, f)
				target := manifestTarget(f.Annotations)
				if target == "" || f.Platforms > 0 {
					r.Shared = append(r.Shared, *im)
					continue
				}
				t := r.target(v, target)
				if t == nil && mk != nil {
					if t, err = mk(f, im, sts); err != nil {
						return fmt.Errorf("%s: %w", f.Ref, err)
					}
					r.Targets = append(r.Targets, *t)
					t = &r.Targets[len(r.Targets)-1]
				}
				switch {
				case t == nil:
					r.Problems = append(r.Problems, fmt.Sprintf("%s is an image for %s, which has no build here", f.Ref, target))
					r.Shared = append(r.Shared, *im)
				case im.BuildID != t.BuildID:
					t.Problems = append(t.Problems, fmt.Sprintf("%s was made from build %s, not from this build (%s): rebuild the images", f.Ref, shortDigest(im.BuildID), shortDigest(t.BuildID)))
					t.Image = im
				default:
					t.Image = im
				}
			}
		}
	}
	for i := range r.Targets {
		if t := &r.Targets[i]; t.Image == nil {
			t.Problems = append(t.Problems, fmt.Sprintf("no image of %s for %s in %s", t.Doris, t.Target, o.Store))
		}
	}
	sort.Slice(r.Shared, func(i, j int) bool { return r.Shared[i].Ref < r.Shared[j].Ref })
	return nil
}

func (r *Report) target(v, name string) *Target {
	for i := range r.Targets {
		if r.Targets[i].Doris == v && r.Targets[i].Target == name {
			return &r.Targets[i]
		}
	}
	return nil
}

// check verifies f's signature and, for images made from a build, its
// attestations; it returns the verified statements.
func (o Options) check(ctx context.Context, img string, f *Found) (sig, att Status, sts []sign.Statement) {
	fromBuild := f.Annotations[image.AnnBuild] != ""
	if o.Trust == nil {
		return Status{State: NotChecked, Detail: "give --key or a certificate identity to check"}, Status{State: NotChecked}, nil
	}
	d, ok := o.Store.Digest(img, f.Digest)
	if !ok {
		why := "an OCI layout holds no signatures: publish and sign the release to check them"
		return Status{State: NotChecked, Detail: why}, Status{State: NotChecked, Detail: why}, nil
	}
	res, err := sign.VerifyRelease(ctx, d, *o.Trust, false, o.Registry.Remote(ctx)...)
	if err != nil {
		return Status{State: Failed, Detail: err.Error()}, Status{State: Failed, Detail: err.Error()}, nil
	}
	sig = summarize(res.Signatures, "signature(s)")
	// Images made from a build, indexes of them and shared images (the FE)
	// carry attestations; what carries none (an image of the user's) has
	// no attestation check.
	att = summarize(res.Attestations, "attestation(s): SPDX SBOM, SLSA provenance, scan")
	if att.State == None {
		att.Detail = "not made by dorisarm from a build"
	}
	if fromBuild && att.State == Verified {
		sts = res.Statements[f.Digest]
	}
	return sig, att, sts
}

func summarize(checks []sign.Check, what string) Status {
	n := 0
	var formats []string
	for _, c := range checks {
		if !c.OK {
			return Status{State: Failed, Detail: c.What + ": " + c.Why}
		}
		n++
		for _, f := range c.Formats {
			if !slices.Contains(formats, f) {
				formats = append(formats, f)
			}
		}
	}
	if n == 0 {
		return Status{State: None}
	}
	d := fmt.Sprintf("%d %s", n, what)
	if len(formats) > 0 {
		// Which signature formats were read and verified.
		d += " [" + strings.Join(formats, " and ") + "]"
	}
	return Status{State: Verified, Detail: d}
}

// provenance is the part of dorisarm's SLSA provenance the report reads.
type provenance struct {
	BuildDefinition struct {
		ExternalParameters struct {
			Target string `json:"target"`
			Doris  string `json:"doris"`
		} `json:"externalParameters"`
		InternalParameters struct {
			Compiler struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"compiler"`
			Flags   map[string]string `json:"flags"`
			PGO     bool              `json:"pgo"`
			PGONone string            `json:"pgoNone"`
			LTO     string            `json:"lto"`
			Build   string            `json:"build"`
			Patches []string          `json:"patches"`
			Sysroot *struct {
				Name, Digest, Glibc string
			} `json:"sysroot"`
			SysrootWaiver string `json:"sysrootWaiver"`
			LostTuning    string `json:"lostTuning"`
		} `json:"internalParameters"`
	} `json:"buildDefinition"`
	RunDetails struct {
		Metadata struct {
			StartedOn  time.Time `json:"startedOn"`
			FinishedOn time.Time `json:"finishedOn"`
		} `json:"metadata"`
		Byproducts []struct {
			Name        string         `json:"name"`
			Annotations map[string]int `json:"annotations"`
		} `json:"byproducts"`
	} `json:"runDetails"`
}

// targetFromImage rebuilds a target's row from its image: the signed
// provenance and scan, and the matrix for what the target allows. An image
// without verified attestations still gets a row, from its annotations,
// with the reason as a problem.
func targetFromImage(m *matrix.Matrix, version string, f *Found, im *Image, sts []sign.Statement) (*Target, error) {
	var prov *provenance
	var rep *scan.Report
	for _, st := range sts {
		if st.Subject != f.Digest {
			continue
		}
		switch st.PredicateType {
		case sign.PredicateSLSA1:
			p, err := decode[provenance](st.Predicate)
			if err != nil {
				return nil, fmt.Errorf("its provenance attestation: %w", err)
			}
			prov = &p
		case sign.PredicateScan:
			s, err := decode[scan.Report](st.Predicate)
			if err != nil {
				return nil, fmt.Errorf("its scan attestation: %w", err)
			}
			rep = &s
		}
	}
	if prov == nil {
		return unattested(m, version, f, im)
	}
	ep, ip := prov.BuildDefinition.ExternalParameters, prov.BuildDefinition.InternalParameters
	cell, err := cellOf(m, ep.Doris, ep.Target)
	if err != nil {
		return nil, err
	}
	t := fromCell(cell)
	t.Compiler, t.CompilerVersion, t.PGO, t.PGONone, t.LTO = ip.Compiler.Name, ip.Compiler.Version, ip.PGO, ip.PGONone, ip.LTO
	t.Patches, t.BuildID = ip.Patches, ip.Build
	t.Sysroot, t.SysrootWaiver, t.LostTuning = "", ip.SysrootWaiver, ip.LostTuning
	if sr := ip.Sysroot; sr != nil {
		t.Sysroot = sysrootText(sr.Name, sr.Glibc, sr.Digest)
	}
	phases := map[string][]string{}
	for ph, fl := range ip.Flags {
		phases[ph] = strings.Fields(fl)
	}
	flags := phases[ReleasePhase(phases)]
	t.Flags, t.Tune = strings.Join(flags, " "), tuneOf(flags)
	md := prov.RunDetails.Metadata
	if !md.StartedOn.IsZero() && !md.FinishedOn.IsZero() {
		t.Seconds = md.FinishedOn.Sub(md.StartedOn).Seconds()
	}
	for _, b := range prov.RunDetails.Byproducts {
		if b.Name == "step-cache" {
			t.CacheHits, t.CacheSteps = b.Annotations["hits"], b.Annotations["hits"]+b.Annotations["misses"]
		}
	}
	var sum *scan.Summary
	if rep != nil {
		sum = &rep.Summary
	}
	t.applyScan(cell, sum)
	return &t, nil
}

// unattested is the row of an image whose attestations did not verify:
// what its annotations claim, which nothing vouches for.
func unattested(m *matrix.Matrix, version string, f *Found, im *Image) (*Target, error) {
	cell, err := cellOf(m, version, manifestTarget(f.Annotations))
	if err != nil {
		return nil, err
	}
	t := fromCell(cell)
	t.PGO, t.PGONone, t.LTO, t.BuildID = f.Annotations[image.AnnPGO] == "true", f.Annotations[image.AnnPGONone], f.Annotations[image.AnnLTO], f.Annotations[image.AnnBuild]
	t.Compiler, t.CompilerVersion, _ = strings.Cut(f.Annotations[image.AnnCompiler], " ")
	why := im.Attestations.Detail
	if why == "" {
		why = im.Attestations.State
	}
	t.Problems = append(t.Problems, "no verified provenance or scan attestation, so the row shows only what the image's annotations claim: "+why)
	t.applyScan(cell, nil)
	return &t, nil
}

// cellOf is what the matrix says of a Doris version and target.
func cellOf(m *matrix.Matrix, version, target string) (plan.CellInfo, error) {
	series, err := m.SeriesFor(version)
	if err != nil {
		return plan.CellInfo{}, err
	}
	c, err := m.Cell(series.Series, target)
	if err != nil {
		return plan.CellInfo{}, err
	}
	return plan.CellInfoOf(c, version), nil
}
