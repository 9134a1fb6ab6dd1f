// Package promote copies a verified release image from one repository to
// another by digest: the gates run on the digest the source tag named at
// verification, everything is copied by digest (manifests, blobs, cosign
// signatures and attestations), and the destination tag is written last.
package promote

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/hashicorp/go-version"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// VersionAnnotation is where images say which Doris version they hold.
const VersionAnnotation = "org.opencontainers.image.version"

// Plan is a checked promotion: what will be copied where.
type Plan struct {
	Src     name.Digest   `json:"source"`
	Dst     name.Tag      `json:"destination"`
	Version string        `json:"version"`
	Digests []name.Digest `json:"digests"` // the manifest and, for an index, its children
	// Companions are the cosign signature and attestation manifests to
	// copy: the ones verification read, by digest.
	Companions []Companion  `json:"companions"`
	Checks     []sign.Check `json:"checks"`
	// Bytes is the size of everything copied: manifests, configs, layers.
	Bytes int64 `json:"bytes"`
	// Replaces is the digest the destination tag points to now, if any.
	Replaces string `json:"replaces,omitempty"`
	// Before is what the destination tag pointed to when checked ("" when
	// it did not exist): the tag is written only if it still does.
	Before   string `json:"before,omitempty"`
	Floating bool   `json:"floating"`
	// Identity is what the signed image is, which the destination names.
	Identity Identity `json:"identity"`
	// RollsBack is the newer version a roll-back moves the floating tag away from.
	RollsBack string `json:"rolls_back_from,omitempty"`
}

// Companion is a signature or attestation manifest as verification read
// it: its tag beside the image (the legacy format), or the manifest it
// refers to (a Sigstore bundle, an OCI 1.1 referrer), and the digest of the
// bytes read.
type Companion struct {
	Tag        string `json:"tag,omitempty"`
	ReferrerOf string `json:"referrer_of,omitempty"`
	Digest     string `json:"digest"`
}

// Options are how a promotion is checked and run.
type Options struct {
	Trust    sign.Trust // what the release must be signed with
	Registry registry.Options
	// Rollback lets a floating tag (latest, 2.1) move back to an older
	// version: the way back from a bad release. Every signature and
	// attestation gate still holds, and release tags stay immutable.
	Rollback bool
}

// GateError is a promotion refused by a gate.
type GateError struct{ Reason string }

func (e *GateError) Error() string { return "promotion refused: " + e.Reason }

// Is makes a refusal a failed gate (fault.ErrGate).
func (e *GateError) Is(target error) bool { return target == fault.ErrGate }

// Check resolves src to a digest, verifies it (signatures, attestations,
// clean scans) and applies the tag gates for dst. Nothing is written.
func Check(ctx context.Context, src name.Reference, dst name.Tag, o Options) (*Plan, error) {
	ro := o.Registry.Remote(ctx)
	desc, err := remote.Get(src, ro...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	p := &Plan{Src: src.Context().Digest(desc.Digest.String()), Dst: dst}
	p.Version = annotation(desc.Manifest, VersionAnnotation)

	// Verify the digest, never the tag: a tag moved meanwhile changes
	// nothing. Every blob is read and checked against its digest. The
	// signature and attestation manifests are read by tag (that is where
	// cosign keeps them): the digests of the ones read are recorded, and
	// those are what is copied.
	var mu sync.Mutex
	read := map[string]string{}
	changed := ""
	vctx := sign.WithCompanions(ctx, func(t name.Tag, h v1.Hash) {
		mu.Lock()
		defer mu.Unlock()
		if d, ok := read[t.TagStr()]; ok && d != h.String() {
			changed = t.TagStr()
		}
		read[t.TagStr()] = h.String()
	})
	// The Sigstore bundles that verified, by the manifest they are about.
	referrers := map[string][]string{}
	vctx = sign.WithReferrers(vctx, func(subject name.Digest, h v1.Hash) {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(referrers[subject.DigestStr()], h.String()) {
			referrers[subject.DigestStr()] = append(referrers[subject.DigestStr()], h.String())
		}
	})
	res, err := sign.VerifyRelease(vctx, p.Src, o.Trust, false, o.Registry.Remote(vctx)...)
	if err != nil {
		return nil, err
	}
	if changed != "" {
		return p, &GateError{Reason: fmt.Sprintf("%s changed while it was being verified (read twice, two digests); promote again once nothing is writing to %s", changed, src.Context())}
	}
	p.Digests, p.Checks = res.Digests, res.Checks()
	for _, c := range p.Checks {
		if !c.OK {
			return p, &GateError{Reason: fmt.Sprintf("%s: %s", c.What, c.Why)}
		}
	}
	for _, d := range p.Digests {
		n, err := manifestSize(d, ro)
		if err != nil {
			return nil, err
		}
		p.Bytes += n
	}
	p.Bytes += res.Bytes

	// The destination must name what the signed image is.
	id, err := Identify(ctx, p.Src, res.Statements, o.Registry.Remote(ctx)...)
	tagCheck := sign.Check{What: fmt.Sprintf("%s names what the image is", dst)}
	if err == nil {
		err = CheckTag(dst, id)
		tagCheck.What = fmt.Sprintf("%s names the image (%s)", dst, id)
	}
	p.Identity = id
	var ge *GateError
	switch {
	case errors.As(err, &ge):
		tagCheck.Why = ge.Reason
		p.Checks = append(p.Checks, tagCheck)
		return p, err
	case err != nil:
		return nil, err
	}
	tagCheck.OK = true
	p.Checks = append(p.Checks, tagCheck)
	for _, d := range p.Digests {
		hex := strings.ReplaceAll(d.DigestStr(), ":", "-")
		for _, suffix := range []string{".sig", ".att"} {
			if h, ok := read[hex+suffix]; ok {
				p.Companions = append(p.Companions, Companion{Tag: hex + suffix, Digest: h})
			}
		}
		for _, h := range referrers[d.DigestStr()] {
			p.Companions = append(p.Companions, Companion{ReferrerOf: d.DigestStr(), Digest: h})
		}
	}

	// Tag gates.
	p.Floating = floating(dst.TagStr(), id)
	cur, err := remote.Get(dst, ro...)
	if err == nil {
		p.Before = cur.Digest.String()
	}
	switch {
	case err != nil && !registry.NotFound(err):
		return nil, fmt.Errorf("%s: %w", dst, err)
	case err == nil && cur.Digest.String() != p.Src.DigestStr():
		p.Replaces = cur.Digest.String()
		if !p.Floating {
			return p, &GateError{Reason: fmt.Sprintf("%s already points to %s; release tags are immutable (promote to a new tag)", dst, cur.Digest)}
		}
		old := annotation(cur.Manifest, VersionAnnotation)
		if older(p.Version, old) {
			if !o.Rollback {
				return p, &GateError{Reason: fmt.Sprintf("%s would move backwards from %s to %s (a deliberate roll-back takes --rollback)", dst, old, p.Version)}
			}
			p.RollsBack = old
		}
	}
	if dst.TagStr() == "latest" || strings.HasPrefix(dst.TagStr(), "latest-") {
		v, err := version.NewVersion(p.Version)
		if err != nil {
			return p, &GateError{Reason: fmt.Sprintf("latest needs a version; %s has %q in %s", p.Src, p.Version, VersionAnnotation)}
		}
		if v.Prerelease() != "" {
			return p, &GateError{Reason: fmt.Sprintf("%s is a pre-release; pre-releases never become latest", p.Version)}
		}
	}
	return p, nil
}

// Execute copies everything by digest, then the signature and attestation
// tags, then writes the destination tag: on any failure the destination
// tag is as it was.
func Execute(ctx context.Context, p *Plan, o Options) error {
	ro := o.Registry.Remote(ctx)
	desc, err := remote.Get(p.Src, ro...)
	if err != nil {
		return err
	}
	dstDigest := p.Dst.Context().Digest(p.Src.DigestStr())
	var tg remote.Taggable
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(dstDigest, idx, ro...); err != nil {
			return fmt.Errorf("copying %s (the destination tag was not moved): %w", p.Src, err)
		}
		tg = idx
	} else {
		img, err := desc.Image()
		if err != nil {
			return err
		}
		if err := remote.Write(dstDigest, img, ro...); err != nil {
			return fmt.Errorf("copying %s (the destination tag was not moved): %w", p.Src, err)
		}
		tg = img
	}
	for _, c := range p.Companions {
		// By digest: the bytes verification read, whatever the tag holds now.
		img, err := remote.Image(p.Src.Context().Digest(c.Digest), ro...)
		if err != nil {
			return fmt.Errorf("%s (%s, verified): %w", c.name(), c.Digest, err)
		}
		// A referrer is written by digest: the registry lists it among the
		// referrers of its subject (or, without the referrers API,
		// go-containerregistry adds it to the sha256-<hex> fallback tag).
		var to name.Reference = p.Dst.Context().Digest(c.Digest)
		if c.Tag != "" {
			to = p.Dst.Context().Tag(c.Tag)
		}
		if err := remote.Write(to, img, ro...); err != nil {
			return fmt.Errorf("copying %s (the destination tag was not moved): %w", c.name(), err)
		}
	}
	// The copy can take minutes: the tag is read again just before it is
	// written, and left alone if someone else moved it meanwhile. (Registries
	// have no compare-and-swap, so this narrows the window to one round
	// trip; it cannot close it.)
	now := ""
	cur, err := remote.Get(p.Dst, ro...)
	switch {
	case err == nil:
		now = cur.Digest.String()
	case !registry.NotFound(err):
		return fmt.Errorf("%s (the destination tag was not moved): %w", p.Dst, err)
	}
	if now != p.Before {
		was := p.Before
		if was == "" {
			was = "nothing"
		}
		return &GateError{Reason: fmt.Sprintf("%s changed while the release was copied (it pointed to %s, now to %s); it was not moved: check who else writes it, then promote again", p.Dst, was, now)}
	}
	return remote.Tag(p.Dst, tg, ro...)
}

// name is how messages name c.
func (c Companion) name() string {
	if c.Tag != "" {
		return c.Tag
	}
	return "the Sigstore bundle " + c.Digest + " of " + c.ReferrerOf
}

// floating reports whether tag (one CheckTag accepted for id) may move
// between releases: latest, or a shorter series (2.1 for 2.1.8), with the
// target for a per-target image. The full version (2.1.8, 2.1.8-kunpeng920)
// is a release tag, immutable.
func floating(tag string, id Identity) bool {
	release := id.Version
	if id.Target != "" {
		release += "-" + id.Target
	}
	return tag != release
}

// older reports whether version a sorts before b (go-version semantics).
func older(a, b string) bool {
	va, err1 := version.NewVersion(a)
	vb, err2 := version.NewVersion(b)
	return err1 == nil && err2 == nil && va.LessThan(vb)
}

func annotation(manifest []byte, key string) string { return sign.ManifestAnnotations(manifest)[key] }

// manifestSize is the bytes of the manifest at d (its blobs are counted
// as they are checked).
func manifestSize(d name.Digest, ro []remote.Option) (int64, error) {
	desc, err := remote.Get(d, ro...)
	if err != nil {
		return 0, err
	}
	return int64(len(desc.Manifest)), nil
}
