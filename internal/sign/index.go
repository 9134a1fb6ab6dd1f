package sign

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/scan"
)

// The attestations of a multi-arch index (doris-be:2.1.8, the tag users
// pull) cover its platform manifests made from builds: the same three
// predicate types as a platform manifest's, in a form that names every
// platform. docs/architecture.md ("Attestations of a multi-arch index")
// describes the shapes.

// BuildTypeIndex is the buildType of a multi-arch index's provenance.
const BuildTypeIndex = "https://dorisarm.dev/buildtypes/doris-index/v1"

// IndexChild is a platform manifest of a multi-arch index made from a build.
type IndexChild struct {
	Digest   string      // sha256:… of the platform manifest
	Platform v1.Platform // as the index lists it
	Record   *build.Record
	Scan     []byte // the scan predicate of the platform manifest (a scan report)
}

// Index is a multi-arch index to attest: its name and version (its title
// and version annotations) and its children made from builds. Images the
// index imports (another project's release) are not ours to attest.
type Index struct {
	Name, Version string
	Children      []IndexChild
}

// children are ix's children by platform, checked to be complete.
func (ix Index) children() ([]IndexChild, error) {
	if len(ix.Children) == 0 {
		return nil, fmt.Errorf("the index %s %s has no platform made from a build: nothing to attest", ix.Name, ix.Version)
	}
	cs := append([]IndexChild{}, ix.Children...)
	seen := map[string]bool{}
	for _, c := range cs {
		if !strings.HasPrefix(c.Digest, "sha256:") || c.Record == nil {
			return nil, fmt.Errorf("the index %s %s: platform %s needs its manifest digest and build record", ix.Name, ix.Version, c.Platform.String())
		}
		if seen[c.Digest] {
			return nil, fmt.Errorf("the index %s %s lists %s twice", ix.Name, ix.Version, c.Digest)
		}
		seen[c.Digest] = true
	}
	sort.Slice(cs, func(i, j int) bool {
		if pi, pj := cs[i].Platform.String(), cs[j].Platform.String(); pi != pj {
			return pi < pj
		}
		return cs[i].Digest < cs[j].Digest
	})
	return cs, nil
}

// indexDep is a platform of the index as its provenance names it: a
// resolved dependency (SLSA v1 ResourceDescriptor) with the build's
// parameters in its annotations.
type indexDep struct {
	Name        string            `json:"name"`
	Digest      map[string]string `json:"digest"`
	Annotations struct {
		Platform           string         `json:"platform"`
		Target             string         `json:"target"`
		Build              string         `json:"build"`
		ExternalParameters map[string]any `json:"externalParameters"`
	} `json:"annotations"`
}

// IndexProvenance is a SLSA provenance v1 predicate for a multi-arch
// index: the index is assembled from one build per platform, each a
// resolved dependency by its manifest digest, with its platform, target,
// build digest and the build's externalParameters.
func IndexProvenance(ix Index, builderID string) ([]byte, error) {
	cs, err := ix.children()
	if err != nil {
		return nil, err
	}
	var deps []indexDep
	var platforms []string
	var started, finished time.Time
	for i, c := range cs {
		rec := c.Record
		var d indexDep
		d.Name = ix.Name + "@" + c.Platform.String()
		d.Digest = map[string]string{"sha256": strings.TrimPrefix(c.Digest, "sha256:")}
		d.Annotations.Platform = c.Platform.String()
		d.Annotations.Target = rec.Cell.Target
		d.Annotations.Build = rec.ContentDigest()
		d.Annotations.ExternalParameters = externalParameters(rec)
		deps = append(deps, d)
		platforms = append(platforms, c.Platform.String())
		start := rec.Finished.Add(-time.Duration(rec.Seconds * float64(time.Second)))
		if i == 0 || start.Before(started) {
			started = start
		}
		if i == 0 || rec.Finished.After(finished) {
			finished = rec.Finished
		}
	}
	pred := map[string]any{
		"buildDefinition": map[string]any{
			"buildType":            BuildTypeIndex,
			"externalParameters":   map[string]any{"image": ix.Name, "doris": ix.Version, "platforms": platforms},
			"resolvedDependencies": deps,
		},
		"runDetails": map[string]any{
			"builder": map[string]string{"id": builderID},
			// The builds' times: the first started, the last finished.
			"metadata": map[string]any{
				"startedOn":  started.UTC().Format(time.RFC3339Nano),
				"finishedOn": finished.UTC().Format(time.RFC3339Nano),
			},
		},
	}
	return json.Marshal(pred)
}

// IndexSBOM is an SPDX 2.3 document for a multi-arch index: for each
// platform, a CONTAINER package (the platform manifest: its digest as
// SHA256 checksum, a pkg:oci purl with its architecture) that CONTAINS
// that build's Doris, third-party packages and patches, every comment
// starting with the platform and target.
func IndexSBOM(ix Index, imageRef string) ([]byte, error) {
	cs, err := ix.children()
	if err != nil {
		return nil, err
	}
	noa := noAssertion
	var pkgs []spdxPackage
	var rels []spdxRel
	var finished time.Time
	ns := sha256.New()
	used := map[string]bool{}
	for _, c := range cs {
		rec := c.Record
		hexd := strings.TrimPrefix(c.Digest, "sha256:")
		fmt.Fprintln(ns, c.Digest)
		if rec.Finished.After(finished) {
			finished = rec.Finished
		}
		// IDs per target, kept apart should two platforms share one.
		key := spdxID(rec.Cell.Target)
		for n := 2; used[key]; n++ {
			key = fmt.Sprintf("%s-%d", spdxID(rec.Cell.Target), n)
		}
		used[key] = true
		note := fmt.Sprintf("platform %s (target %s): ", c.Platform.String(), rec.Cell.Target)
		purl := fmt.Sprintf("pkg:oci/%s@%s?arch=%s", url.PathEscape(ix.Name), url.QueryEscape(c.Digest), url.QueryEscape(c.Platform.Architecture))
		if c.Platform.Variant != "" {
			purl += "&variant=" + url.QueryEscape(c.Platform.Variant)
		}
		img := spdxPackage{SPDXID: "SPDXRef-Image-" + key, Name: ix.Name, Version: ix.Version, Download: noa, PrimaryPurpose: "CONTAINER",
			LicenseConcluded: noa, LicenseDeclared: noa, CopyrightText: noa,
			Checksums:    []spdxChecksum{{"SHA256", hexd}},
			ExternalRefs: []spdxExternalRef{{"PACKAGE-MANAGER", "purl", purl}},
			Comment:      note + "the platform manifest " + c.Digest + ", made from build " + rec.ContentDigest()}
		bp, br, root := buildPackages(rec, key+"-", note)
		pkgs = append(append(pkgs, img), bp...)
		rels = append(rels, spdxRel{"SPDXRef-DOCUMENT", "DESCRIBES", img.SPDXID}, spdxRel{img.SPDXID, "CONTAINS", root})
		rels = append(rels, br...)
	}
	return spdxDocument(imageRef, "https://dorisarm.dev/spdx/index/"+hex.EncodeToString(ns.Sum(nil)), finished, pkgs, rels)
}

// indexScan is the scan predicate of a multi-arch index.
type indexScan struct {
	Image     string              `json:"image"`
	Doris     string              `json:"doris"`
	Platforms []indexScanPlatform `json:"platforms"`
	Summary   struct {
		Clean      bool `json:"clean"`
		Violations int  `json:"violations"`
		Platforms  int  `json:"platforms"`
	} `json:"summary"`
}

// indexScanPlatform is one platform's scan result: its target, its scan
// summary and the findings that fail it (none when clean), as the platform
// manifest's own scan attestation has them in full.
type indexScanPlatform struct {
	Platform   string         `json:"platform"`
	Digest     string         `json:"digest"`
	Target     string         `json:"target"`
	Build      string         `json:"build"`
	Summary    scan.Summary   `json:"summary"`
	Violations []scan.Finding `json:"violations"`
}

// IndexScan is the scan predicate of a multi-arch index
// (PredicateScan): each platform's scan result, and clean only when every
// platform's is.
func IndexScan(ix Index) ([]byte, error) {
	cs, err := ix.children()
	if err != nil {
		return nil, err
	}
	out := indexScan{Image: ix.Name, Doris: ix.Version, Platforms: []indexScanPlatform{}}
	out.Summary.Clean = true
	for _, c := range cs {
		var rep scan.Report
		if err := json.Unmarshal(c.Scan, &rep); err != nil {
			return nil, fmt.Errorf("the scan report of %s (%s) does not parse: %w", c.Digest, c.Platform.String(), err)
		}
		p := indexScanPlatform{Platform: c.Platform.String(), Digest: c.Digest, Target: rep.Target, Build: c.Record.ContentDigest(),
			Summary: rep.Summary, Violations: []scan.Finding{}}
		for _, f := range rep.Findings {
			if f.Violation() {
				p.Violations = append(p.Violations, f)
			}
		}
		out.Platforms = append(out.Platforms, p)
		out.Summary.Clean = out.Summary.Clean && rep.Summary.Clean
		out.Summary.Violations += rep.Summary.Violations
	}
	out.Summary.Platforms = len(out.Platforms)
	return json.Marshal(out)
}

// indexEntry is a platform manifest of an index made from a build: its
// platform in the index, its target and build digest (the manifest's
// signed annotations).
type indexEntry struct{ Platform, Target, Build string }

func (e indexEntry) String() string {
	return e.Platform + " for " + e.Target + " from build " + e.Build
}

// checkIndexPredicate says why the predicate of an index attestation does
// not describe the index's platform manifests made from builds (want, by
// digest) or, for the scan, why it is not clean; "" when it does.
func checkIndexPredicate(typ string, pred []byte, want map[string]indexEntry) string {
	got := map[string]indexEntry{}
	var dups []string
	add := func(d string, e indexEntry) {
		if _, ok := got[d]; ok {
			dups = append(dups, d)
		}
		got[d] = e
	}
	digestsOnly := false
	var dirty []string
	switch typ {
	case PredicateSLSA1:
		var p struct {
			BuildDefinition struct {
				BuildType            string     `json:"buildType"`
				ResolvedDependencies []indexDep `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
		}
		if err := json.Unmarshal(pred, &p); err != nil {
			return "the provenance does not parse: " + err.Error()
		}
		if p.BuildDefinition.BuildType != BuildTypeIndex {
			return fmt.Sprintf("the provenance is of build type %q, not a multi-arch index's (%s)", p.BuildDefinition.BuildType, BuildTypeIndex)
		}
		for _, d := range p.BuildDefinition.ResolvedDependencies {
			add("sha256:"+d.Digest["sha256"], indexEntry{d.Annotations.Platform, d.Annotations.Target, d.Annotations.Build})
		}
	case PredicateSPDX:
		var doc struct {
			Packages []spdxPackage `json:"packages"`
		}
		if err := json.Unmarshal(pred, &doc); err != nil {
			return "the SBOM does not parse: " + err.Error()
		}
		digestsOnly = true // the SBOM names platform manifests by digest (checksum)
		for _, p := range doc.Packages {
			if p.PrimaryPurpose != "CONTAINER" {
				continue
			}
			for _, c := range p.Checksums {
				if c.Algorithm == "SHA256" {
					add("sha256:"+c.Value, indexEntry{})
				}
			}
		}
	case PredicateScan:
		var s indexScan
		if err := json.Unmarshal(pred, &s); err != nil {
			return "the scan attestation does not parse: " + err.Error()
		}
		for _, p := range s.Platforms {
			add(p.Digest, indexEntry{p.Platform, p.Target, p.Build})
			if !p.Summary.Clean {
				dirty = append(dirty, fmt.Sprintf("%d violation(s) on %s for %s", p.Summary.Violations, p.Platform, p.Target))
			}
		}
		if !s.Summary.Clean && len(dirty) == 0 {
			dirty = append(dirty, fmt.Sprintf("%d violation(s)", s.Summary.Violations))
		}
	default:
		return ""
	}
	var why []string
	for _, d := range dups {
		why = append(why, "names "+d+" twice")
	}
	for _, d := range sortedKeys(want) {
		g, ok := got[d]
		switch {
		case !ok:
			why = append(why, fmt.Sprintf("does not name %s (%s)", d, want[d]))
		case !digestsOnly && g != want[d]:
			why = append(why, fmt.Sprintf("says %s is %s, but it is %s", d, g, want[d]))
		}
	}
	for _, d := range sortedKeys(got) {
		if _, ok := want[d]; !ok {
			why = append(why, fmt.Sprintf("names %s, which is not a platform of the index made from a build", d))
		}
	}
	if len(why) > 0 {
		return "it does not describe the index's platforms: it " + strings.Join(why, "; it ")
	}
	if len(dirty) > 0 {
		return "the scan found " + strings.Join(dirty, ", ")
	}
	return ""
}

func sortedKeys(m map[string]indexEntry) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
