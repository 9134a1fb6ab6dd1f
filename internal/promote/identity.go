package promote

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// TitleAnnotation is where images (and dorisarm's indexes) say their name.
const TitleAnnotation = "org.opencontainers.image.title"

// Identity is what a release manifest says it is. Manifest annotations are
// covered by the signature on the manifest's digest; for a manifest made
// from a build they must also agree with the build's signed provenance and
// scan attestation.
type Identity struct {
	Name    string `json:"name"`             // doris-be
	Version string `json:"version"`          // the Doris version: 2.1.8
	Target  string `json:"target,omitempty"` // kunpeng920 for a per-target image; "" for an index or a shared image
	Index   bool   `json:"index,omitempty"`
}

func (id Identity) String() string {
	kind := "image"
	if id.Index {
		kind = "multi-arch index"
	}
	s := fmt.Sprintf("%s %s %s", id.Name, id.Version, kind)
	if id.Target != "" {
		s += " for " + id.Target
	}
	return s
}

// Identify says what the manifest at d is: from its annotations and, for
// an index, its children's. stmts are the verified attestation statements
// by manifest digest (sign.Result.Statements); a build-made manifest whose
// provenance or scan names another target or version than its annotations
// is refused with a *GateError.
func Identify(ctx context.Context, d name.Digest, stmts map[string][]sign.Statement, ro ...remote.Option) (Identity, error) {
	ro = append([]remote.Option{remote.WithContext(ctx)}, ro...)
	desc, err := remote.Get(d, ro...)
	if err != nil {
		return Identity{}, fmt.Errorf("%s: %w", d, err)
	}
	ann := sign.ManifestAnnotations(desc.Manifest)
	id := Identity{Name: ann[TitleAnnotation], Version: ann[VersionAnnotation], Index: desc.MediaType.IsIndex()}
	if !id.Index {
		id.Target = ann[image.AnnTarget]
		if ann[image.AnnShared] != "" {
			// A shared image's attestations name the image and version,
			// as an index's do.
			if err := matchNameAttestations(d.DigestStr(), id, stmts); err != nil {
				return id, err
			}
		}
		if err := matchAttestations(d.DigestStr(), ann, stmts); err != nil {
			return id, err
		}
		return id, nil
	}
	var im v1.IndexManifest
	if err := json.Unmarshal(desc.Manifest, &im); err != nil {
		return id, fmt.Errorf("%s: %w", d, err)
	}
	for _, m := range im.Manifests {
		if m.Annotations[image.AnnImported] != "" {
			continue // an image of the user's (say, an official x86 release): not ours to name
		}
		child, err := Identify(ctx, d.Context().Digest(m.Digest.String()), stmts, ro...)
		if err != nil {
			return id, err
		}
		if child.Index {
			return id, &GateError{Reason: fmt.Sprintf("%s is an index inside the index %s; dorisarm releases are one level deep", m.Digest, d)}
		}
		switch {
		case id.Name == "":
			id.Name = child.Name
		case child.Name != id.Name:
			return id, &GateError{Reason: fmt.Sprintf("the index %s mixes images named %s and %s", d, id.Name, child.Name)}
		}
		if child.Version != id.Version {
			return id, &GateError{Reason: fmt.Sprintf("the index %s is version %q but its child %s is %q", d, id.Version, m.Digest, child.Version)}
		}
	}
	if err := matchNameAttestations(d.DigestStr(), id, stmts); err != nil {
		return id, err
	}
	return id, nil
}

// matchNameAttestations checks an index's or a shared image's name and
// version against its verified provenance and scan statements (an index
// with platforms made from builds, and a shared image, have them; sign
// checks they name exactly those platforms, or the tree the image holds).
func matchNameAttestations(digest string, id Identity, stmts map[string][]sign.Statement) error {
	for _, st := range inOrder(stmts[digest]) {
		var what string
		var p struct {
			Image, Doris string
		}
		switch st.PredicateType {
		case sign.PredicateSLSA1:
			what = "provenance"
			var prov struct {
				BuildDefinition struct {
					ExternalParameters struct {
						Image string `json:"image"`
						Doris string `json:"doris"`
					} `json:"externalParameters"`
				} `json:"buildDefinition"`
			}
			if err := json.Unmarshal(st.Predicate, &prov); err != nil {
				return &GateError{Reason: fmt.Sprintf("the provenance of %s does not parse: %v", digest, err)}
			}
			p.Image, p.Doris = prov.BuildDefinition.ExternalParameters.Image, prov.BuildDefinition.ExternalParameters.Doris
		case sign.PredicateScan:
			what = "scan attestation"
			var sc struct {
				Image string `json:"image"`
				Doris string `json:"doris"`
			}
			if err := json.Unmarshal(st.Predicate, &sc); err != nil {
				return &GateError{Reason: fmt.Sprintf("the scan attestation of %s does not parse: %v", digest, err)}
			}
			p.Image, p.Doris = sc.Image, sc.Doris
		default:
			continue
		}
		if p.Image != id.Name || p.Doris != id.Version {
			return &GateError{Reason: fmt.Sprintf("%s is %s %s, but its signed %s is of %s %s", digest, id.Name, id.Version, what, p.Image, p.Doris)}
		}
	}
	return nil
}

// matchAttestations checks a build-made manifest's annotations against its
// verified provenance and scan statements.
func matchAttestations(digest string, ann map[string]string, stmts map[string][]sign.Statement) error {
	if ann[image.AnnBuild] == "" || stmts == nil {
		return nil // not made from a build (a shared image), or not asked to check
	}
	for _, st := range inOrder(stmts[digest]) {
		switch st.PredicateType {
		case sign.PredicateSLSA1:
			var p struct {
				BuildDefinition struct {
					ExternalParameters struct {
						Target string `json:"target"`
						Doris  string `json:"doris"`
					} `json:"externalParameters"`
				} `json:"buildDefinition"`
			}
			if err := json.Unmarshal(st.Predicate, &p); err != nil {
				return &GateError{Reason: fmt.Sprintf("the provenance of %s does not parse: %v", digest, err)}
			}
			ep := p.BuildDefinition.ExternalParameters
			if ep.Target != ann[image.AnnTarget] || ep.Doris != ann[VersionAnnotation] {
				return &GateError{Reason: fmt.Sprintf("%s says it is %s for %q, but its signed provenance is a build of %s for %q",
					digest, ann[VersionAnnotation], ann[image.AnnTarget], ep.Doris, ep.Target)}
			}
		case sign.PredicateScan:
			var r struct {
				Target string `json:"target"`
			}
			if err := json.Unmarshal(st.Predicate, &r); err != nil {
				return &GateError{Reason: fmt.Sprintf("the scan attestation of %s does not parse: %v", digest, err)}
			}
			if r.Target != ann[image.AnnTarget] {
				return &GateError{Reason: fmt.Sprintf("the scan attestation of %s is for target %q, but the image is for %q", digest, r.Target, ann[image.AnnTarget])}
			}
		}
	}
	return nil
}

// inOrder is the provenance statements, then the scan statements: the
// first mismatch reported does not depend on the order the registry lists
// attestations in.
func inOrder(sts []sign.Statement) []sign.Statement {
	var out []sign.Statement
	for _, typ := range []string{sign.PredicateSLSA1, sign.PredicateScan} {
		for _, st := range sts {
			if st.PredicateType == typ {
				out = append(out, st)
			}
		}
	}
	return out
}

// Series are the tags a version may carry: the version itself, each
// shorter prefix at a dot (2.1 and 2 for 2.1.8), and latest.
func Series(version string) []string {
	if version == "" {
		return nil
	}
	out := []string{version}
	for v := version; ; {
		i := strings.LastIndex(v, ".")
		if i <= 0 {
			break
		}
		v = v[:i]
		out = append(out, v)
	}
	return append(out, "latest")
}

// CheckTag refuses a destination tag whose meaning is not what the image
// is: the repository's last path element is the image name; a per-target
// image takes SERIES-TARGET (2.1.8-kunpeng920, 2.1-kunpeng920,
// latest-kunpeng920), an index or shared image SERIES (2.1.8, 2.1, latest).
func CheckTag(dst name.Tag, id Identity) error {
	repo := path.Base(dst.RepositoryStr())
	switch {
	case id.Name == "":
		return &GateError{Reason: fmt.Sprintf("the image does not say its name (%s); only images dorisarm published can be promoted", TitleAnnotation)}
	case id.Version == "":
		return &GateError{Reason: fmt.Sprintf("the image does not say its Doris version (%s)", VersionAnnotation)}
	case repo != id.Name:
		return &GateError{Reason: fmt.Sprintf("%s is a %s repository, but the image is %s", dst.Context(), repo, id)}
	}
	tag := dst.TagStr()
	var want []string
	for _, s := range Series(id.Version) {
		if id.Target != "" {
			s += "-" + id.Target
		}
		if tag == s {
			return nil
		}
		want = append(want, s)
	}
	return &GateError{Reason: fmt.Sprintf("the tag %s does not name the image %s; its tags are %s", tag, id, strings.Join(want, ", "))}
}
