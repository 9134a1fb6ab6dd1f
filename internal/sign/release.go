package sign

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
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
		if verr == nil {
			verified[d.DigestStr()] = dedupe(sts)
		}
		// Of each predicate type, the newest that verified in each form:
		// every one of them must pass the policy (a bundle and a legacy tag
		// that say different things fail, whichever is right).
		newest := map[string]map[string]Statement{}
		for _, st := range sts {
			if st.Subject != d.DigestStr() {
				continue
			}
			if newest[st.PredicateType] == nil {
				newest[st.PredicateType] = map[string]Statement{}
			}
			newest[st.PredicateType][st.Format] = st
		}
		for _, typ := range []string{PredicateSPDX, PredicateSLSA1, PredicateScan} {
			c := Check{What: fmt.Sprintf("attestation %s of %s", typ, d)}
			forms := newest[typ]
			unverified := ""
			for _, f := range []string{checkedBundle, checkedLegacy} {
				if _, ok := forms[f]; attached[typ][f] && !ok && unverified == "" {
					unverified = f
				}
			}
			switch {
			case verr != nil:
				c.Why = verr.Error()
			case len(forms) == 0 && unverified != "":
				c.Why = "attached, but its signature does not verify: it was altered or signed with another key"
			case len(forms) == 0:
				c.Why = "missing (sign it with dorisarm sign --build)"
			case unverified != "":
				// One form verifies, the other holds only an attestation
				// that does not: someone altered or replaced it.
				c.Why = "the " + unverified + " attestation is attached, but its signature does not verify: it was altered or signed with another key"
			default:
				c.OK = true
				for _, f := range []string{checkedBundle, checkedLegacy} {
					st, ok := forms[f]
					if !ok {
						continue
					}
					c.Formats = append(c.Formats, f)
					if why := predicateProblem(typ, st, platforms, tree); why != "" && c.OK {
						c.OK, c.Why = false, why
						if len(forms) > 1 {
							c.Why = "the " + f + " attestation: " + why
						}
					}
				}
			}
			checks = append(checks, c)
		}
	}
	return checks, verified, nil
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
