package sign

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/registry"
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

// attestationChecks checks the attestations of every build-made manifest
// in ds, of every index in ds with platforms made from builds, and of every
// shared image and its index: the three attestations exist, are signed as
// trust says, are about its digest, describe (for an index) exactly its
// platforms or (for a shared image) the tree it holds, and the scan is
// clean. It returns the statements that verified, by manifest digest.
func attestationChecks(ctx context.Context, ds []name.Digest, trust Trust, opts ...remote.Option) ([]Check, map[string][]Statement, error) {
	var checks []Check
	verified := map[string][]Statement{}
	for _, d := range ds {
		attested, platforms, tree, err := attestedManifest(ctx, d, opts...)
		if err != nil {
			return nil, nil, err
		}
		if !attested {
			continue // an image of the user's, or an index of such images
		}
		sts, attached, verr := verifyAttestations(ctx, d, trust, opts...)
		if verr != nil && fault.IsEnv(verr) {
			// Not a failed check: the attestations could not be read.
			return nil, nil, fmt.Errorf("checking the attestations of %s: %w", d, verr)
		}
		byType := map[string][]Statement{}
		for _, st := range sts {
			if st.Subject == d.DigestStr() {
				byType[st.PredicateType] = append(byType[st.PredicateType], st)
			}
		}
		var kept []Statement // what the checks stand on, for Statements
		for _, st := range sts {
			if !replaced[st.PredicateType] {
				kept = append(kept, st)
			}
		}
		for _, typ := range []string{PredicateSPDX, PredicateSLSA1, PredicateScan} {
			c := Check{What: fmt.Sprintf("attestation %s of %s", typ, d)}
			cands := byType[typ]
			switch {
			case verr != nil:
				c.Why = registry.Text(verr)
			case len(cands) == 0 && attached[typ]:
				c.Why = "attached, but its signature does not verify: it was altered or signed with another key"
			case len(cands) == 0:
				c.Why = "missing (sign it with dorisarm sign --build)"
			default:
				chosen, why := chooseStatement(typ, cands, platforms, tree)
				c.OK, c.Why = why == "", why
				for _, st := range chosen {
					c.Formats = append(c.Formats, st.Format)
				}
				kept = append(kept, chosen...) // verified, whatever the policy says of them
			}
			checks = append(checks, c)
		}
		if verr == nil {
			verified[d.DigestStr()] = dedupe(kept)
		}
	}
	return checks, verified, nil
}

// chooseStatement picks, of the verified statements of replaced type typ
// about one manifest, the ones its check stands on, and says what is wrong
// with them ("" when nothing is). The legacy tag holds one of a type (each
// Attest replaces it); bundles are never removed, so there may be several,
// and the newest counts: the latest a transparency log vouches for when
// each carries a log's time (ties, and bundles without one, by the
// referrer's unsigned creation time). Without a log nothing signed says
// which is newest: a registry can then present an older genuine
// attestation in either form, as it can by moving a legacy tag back. Of
// the two forms the later by the log counts; where they cannot be ordered
// so, each must pass the policy and they must say the same.
func chooseStatement(typ string, cands []Statement, platforms map[string]indexEntry, tree string) ([]Statement, string) {
	var perForm []Statement
	var bundle *Statement
	for i, st := range cands {
		switch {
		case st.Format == checkedLegacy:
			perForm = append(perForm, st) // the tag's one
		case bundle == nil || newer(st, *bundle):
			bundle = &cands[i]
		}
	}
	if bundle != nil {
		perForm = append([]Statement{*bundle}, perForm...)
	}
	if len(perForm) == 2 && !perForm[0].Time.IsZero() && !perForm[1].Time.IsZero() && !perForm[0].Time.Equal(perForm[1].Time) {
		if perForm[1].Time.After(perForm[0].Time) {
			perForm = perForm[1:]
		} else {
			perForm = perForm[:1]
		}
	}
	for _, st := range perForm {
		if why := predicateProblem(typ, st, platforms, tree); why != "" {
			if len(perForm) > 1 {
				why = "the " + st.Format + " attestation: " + why
			}
			return perForm, why
		}
	}
	if len(perForm) == 2 && !bytes.Equal(perForm[0].Predicate, perForm[1].Predicate) {
		return perForm, "its Sigstore bundle and its legacy .att tag say different things, and no transparency log's time tells which is newer: attest again (with --rekor-url, and verify with --trusted-root, the log's time decides)"
	}
	return perForm, ""
}

// newer reports whether bundle statement a is newer than b: by the log's
// time where both have one, else (and on a tie) by the referrers' creation.
func newer(a, b Statement) bool {
	if !a.Time.IsZero() && !b.Time.IsZero() && !a.Time.Equal(b.Time) {
		return a.Time.After(b.Time)
	}
	return !a.created.Before(b.created)
}

// predicateProblem is what is wrong with st, a verified statement of type
// typ about a manifest ("" when nothing is): about a shared image or its
// index (tree), the tree it holds scanned clean for every target; about a
// multi-arch index (platforms), exactly its platforms made from builds and
// a clean scan; about an image, a clean scan.
func predicateProblem(typ string, st Statement, platforms map[string]indexEntry, tree string) string {
	switch {
	case tree != "":
		return checkSharedPredicate(typ, st.Predicate, tree)
	case platforms != nil:
		return checkIndexPredicate(typ, st.Predicate, platforms)
	case typ == PredicateScan:
		var rep struct {
			Summary struct {
				Clean      bool `json:"clean"`
				Violations int  `json:"violations"`
			} `json:"summary"`
		}
		if err := json.Unmarshal(st.Predicate, &rep); err != nil || !rep.Summary.Clean {
			return fmt.Sprintf("the scan found %d violation(s) for the image's target", rep.Summary.Violations)
		}
	}
	return ""
}

// attestedManifest says whether the manifest at d must carry attestations:
// an image made from a build (io.dorisarm.build.digest); an index with
// platforms made from builds, returned by digest (nil for an image); a
// shared image or its index (io.dorisarm.shared.tree), with the tree it
// holds. Imported platforms (io.dorisarm.imported-from) are not the
// release's.
func attestedManifest(ctx context.Context, d name.Digest, opts ...remote.Option) (bool, map[string]indexEntry, string, error) {
	ro := append([]remote.Option{remote.WithContext(ctx)}, opts...)
	desc, err := remote.Get(d, ro...)
	if err != nil {
		return false, nil, "", err
	}
	ann := ManifestAnnotations(desc.Manifest)
	if tree := ann[image.AnnShared]; tree != "" {
		return true, nil, tree, nil
	}
	if !desc.MediaType.IsIndex() {
		return ann[image.AnnBuild] != "", nil, "", nil
	}
	var im v1.IndexManifest
	if err := json.Unmarshal(desc.Manifest, &im); err != nil {
		return false, nil, "", fmt.Errorf("%s: %w", d, err)
	}
	platforms := map[string]indexEntry{}
	for _, m := range im.Manifests {
		if m.Annotations[image.AnnImported] != "" || m.MediaType.IsIndex() {
			continue
		}
		child, err := remote.Get(d.Context().Digest(m.Digest.String()), ro...)
		if err != nil {
			return false, nil, "", err
		}
		ann := ManifestAnnotations(child.Manifest)
		if ann[image.AnnBuild] == "" {
			continue
		}
		e := indexEntry{Target: ann[image.AnnTarget], Build: ann[image.AnnBuild]}
		if m.Platform != nil {
			e.Platform = m.Platform.String()
		}
		platforms[m.Digest.String()] = e
	}
	if len(platforms) == 0 {
		return false, nil, "", nil
	}
	return true, platforms, "", nil
}

// ManifestAnnotations are the top-level annotations of an image manifest or
// an index (nil when it does not parse).
func ManifestAnnotations(manifest []byte) map[string]string {
	var mf struct {
		Annotations map[string]string `json:"annotations"`
	}
	if json.Unmarshal(manifest, &mf) != nil {
		return nil
	}
	return mf.Annotations
}
