package sign

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/scan"
)

// A shared image (the Java FE: one image for every target) and its index
// are attested like a build's image, about the tree they hold: the builds
// whose directory has exactly that tree (image.TreeID, the image's
// io.dorisarm.shared.tree annotation), scanned for each of their targets.
// docs/architecture.md ("Attestations of a shared image") describes the
// shapes.

// BuildTypeShared is the buildType of a shared image's provenance.
const BuildTypeShared = "https://dorisarm.dev/buildtypes/shared-image/v1"

// SharedBuild is one build holding a shared image's tree, with the scan
// predicate (a scan report) of that tree for the build's target.
type SharedBuild struct {
	Record *build.Record
	Scan   []byte
}

// SharedFile is a file of a shared image's tree an SBOM lists (its jars).
type SharedFile struct {
	Path   string // relative to the tree
	SHA256 string // hex
}

// Shared is a shared image or index to attest: its name and version, the
// tree it holds (sha256:…, its annotation) and the directory of the builds
// it comes from (the recipe image's from:), the builds holding that tree,
// and the tree's jars.
type Shared struct {
	Name, Version, Tree, From string
	Builds                    []SharedBuild
	Files                     []SharedFile
}

func (s Shared) builds() ([]SharedBuild, error) {
	if !strings.HasPrefix(s.Tree, "sha256:") {
		return nil, fmt.Errorf("the shared image %s %s names no tree digest", s.Name, s.Version)
	}
	if len(s.Builds) == 0 {
		return nil, fmt.Errorf("the shared image %s %s: no build holds its tree %s: pass the build directory publish took it from", s.Name, s.Version, s.Tree)
	}
	bs := append([]SharedBuild{}, s.Builds...)
	for _, b := range bs {
		if b.Record == nil {
			return nil, fmt.Errorf("the shared image %s %s: a build without its record", s.Name, s.Version)
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].Record.Cell.Target < bs[j].Record.Cell.Target })
	return bs, nil
}

// SharedSBOM is an SPDX 2.3 document for a shared image: the image's tree
// (its digest as the package checksum) containing each of its jars by
// checksum.
func SharedSBOM(s Shared, imageRef string) ([]byte, error) {
	bs, err := s.builds()
	if err != nil {
		return nil, err
	}
	noa := noAssertion
	var targets []string
	for _, b := range bs {
		targets = append(targets, b.Record.Cell.Target)
	}
	root := spdxPackage{SPDXID: "SPDXRef-Package-" + spdxID(s.Name), Name: s.Name, Version: s.Version, Download: noa, PrimaryPurpose: "APPLICATION",
		LicenseConcluded: noa, LicenseDeclared: noa, CopyrightText: noa,
		Checksums: []spdxChecksum{{"SHA256", strings.TrimPrefix(s.Tree, "sha256:")}},
		Comment:   fmt.Sprintf("the tree of %s/ (layer digest, uncompressed, fixed dates), the same in the builds for %s", s.From, strings.Join(targets, ", "))}
	pkgs := []spdxPackage{root}
	rels := []spdxRel{{"SPDXRef-DOCUMENT", "DESCRIBES", root.SPDXID}}
	files := append([]SharedFile{}, s.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		p := spdxPackage{SPDXID: "SPDXRef-Jar-" + spdxID(f.Path), Name: f.Path[strings.LastIndex(f.Path, "/")+1:], Download: noa,
			LicenseConcluded: noa, LicenseDeclared: noa, CopyrightText: noa, PrimaryPurpose: "LIBRARY",
			Checksums: []spdxChecksum{{"SHA256", f.SHA256}}, Comment: s.From + "/" + f.Path}
		pkgs = append(pkgs, p)
		rels = append(rels, spdxRel{root.SPDXID, "CONTAINS", p.SPDXID})
	}
	return spdxDocument(imageRef, "https://dorisarm.dev/spdx/shared/"+strings.TrimPrefix(s.Tree, "sha256:"), latest(bs), pkgs, rels)
}

func latest(bs []SharedBuild) time.Time {
	var t time.Time
	for _, b := range bs {
		if b.Record.Finished.After(t) {
			t = b.Record.Finished
		}
	}
	return t
}

// sharedDep is a build holding the tree, as the provenance names it.
type sharedDep struct {
	Name        string            `json:"name"`
	Digest      map[string]string `json:"digest"`
	Annotations struct {
		Target string `json:"target"`
		Source string `json:"source"`
	} `json:"annotations"`
}

type sharedParams struct {
	Image string `json:"image"`
	Doris string `json:"doris"`
	Tree  string `json:"tree"`
	From  string `json:"from"`
}

// SharedProvenance is a SLSA provenance v1 predicate for a shared image:
// its tree, taken from the builds that each made it (by build digest, with
// their target and source digest).
func SharedProvenance(s Shared, builderID string) ([]byte, error) {
	bs, err := s.builds()
	if err != nil {
		return nil, err
	}
	var deps []sharedDep
	var started, finished time.Time
	for i, b := range bs {
		d := sharedDep{Name: "build:" + b.Record.Cell.Target, Digest: map[string]string{"sha256": strings.TrimPrefix(b.Record.ContentDigest(), "sha256:")}}
		d.Annotations.Target, d.Annotations.Source = b.Record.Cell.Target, b.Record.Source.Digest
		deps = append(deps, d)
		if st := b.Record.Finished.Add(-time.Duration(b.Record.Seconds * float64(time.Second))); i == 0 || st.Before(started) {
			started = st
		}
		if b.Record.Finished.After(finished) {
			finished = b.Record.Finished
		}
	}
	pred := map[string]any{
		"buildDefinition": map[string]any{
			"buildType":            BuildTypeShared,
			"externalParameters":   sharedParams{Image: s.Name, Doris: s.Version, Tree: s.Tree, From: s.From},
			"resolvedDependencies": deps,
		},
		"runDetails": map[string]any{
			"builder":  map[string]any{"id": builderID},
			"metadata": map[string]any{"startedOn": started.UTC().Format(time.RFC3339Nano), "finishedOn": finished.UTC().Format(time.RFC3339Nano)},
		},
	}
	return json.Marshal(pred)
}

type sharedScanTarget struct {
	Target     string         `json:"target"`
	Build      string         `json:"build"`
	Summary    scan.Summary   `json:"summary"`
	Violations []scan.Finding `json:"violations"`
}

type sharedScan struct {
	Image   string             `json:"image"`
	Doris   string             `json:"doris"`
	Tree    string             `json:"tree"`
	Targets []sharedScanTarget `json:"targets"`
	Summary struct {
		Clean      bool `json:"clean"`
		Violations int  `json:"violations"`
		Targets    int  `json:"targets"`
	} `json:"summary"`
}

// SharedScan is the scan predicate of a shared image: its tree scanned for
// the target of every build holding it, clean only when every target's is.
func SharedScan(s Shared) ([]byte, error) {
	bs, err := s.builds()
	if err != nil {
		return nil, err
	}
	out := sharedScan{Image: s.Name, Doris: s.Version, Tree: s.Tree, Targets: []sharedScanTarget{}}
	out.Summary.Clean = true
	for _, b := range bs {
		var rep scan.Report
		if err := json.Unmarshal(b.Scan, &rep); err != nil {
			return nil, fmt.Errorf("the scan report of %s/ for %s does not parse: %w", s.From, b.Record.Cell.Target, err)
		}
		t := sharedScanTarget{Target: rep.Target, Build: b.Record.ContentDigest(), Summary: rep.Summary, Violations: []scan.Finding{}}
		for _, f := range rep.Findings {
			if f.Violation() {
				t.Violations = append(t.Violations, f)
			}
		}
		out.Targets = append(out.Targets, t)
		out.Summary.Clean = out.Summary.Clean && rep.Summary.Clean
		out.Summary.Violations += rep.Summary.Violations
	}
	out.Summary.Targets = len(out.Targets)
	return json.Marshal(out)
}

// checkSharedPredicate says why the predicate of a shared image's
// attestation is not about the tree the image holds (tree, its annotation)
// or, for the scan, why it is not clean; "" when it is.
func checkSharedPredicate(typ string, pred []byte, tree string) string {
	switch typ {
	case PredicateSLSA1:
		var p struct {
			BuildDefinition struct {
				BuildType          string       `json:"buildType"`
				ExternalParameters sharedParams `json:"externalParameters"`
			} `json:"buildDefinition"`
		}
		if err := json.Unmarshal(pred, &p); err != nil {
			return "the provenance does not parse: " + err.Error()
		}
		if p.BuildDefinition.BuildType != BuildTypeShared {
			return fmt.Sprintf("the provenance is of build type %q, not a shared image's (%s)", p.BuildDefinition.BuildType, BuildTypeShared)
		}
		if got := p.BuildDefinition.ExternalParameters.Tree; got != tree {
			return fmt.Sprintf("the provenance is of the tree %s, but the image holds %s", got, tree)
		}
	case PredicateSPDX:
		var doc struct {
			Packages []spdxPackage `json:"packages"`
		}
		if err := json.Unmarshal(pred, &doc); err != nil {
			return "the SBOM does not parse: " + err.Error()
		}
		for _, p := range doc.Packages {
			if p.PrimaryPurpose != "APPLICATION" {
				continue
			}
			for _, c := range p.Checksums {
				if c.Algorithm == "SHA256" && "sha256:"+c.Value == tree {
					return ""
				}
			}
		}
		return fmt.Sprintf("the SBOM does not describe the tree %s the image holds", tree)
	case PredicateScan:
		var s sharedScan
		if err := json.Unmarshal(pred, &s); err != nil {
			return "the scan attestation does not parse: " + err.Error()
		}
		if s.Tree != tree {
			return fmt.Sprintf("the scan attestation is of the tree %s, but the image holds %s", s.Tree, tree)
		}
		if len(s.Targets) == 0 {
			return "the scan attestation names no target the tree was scanned for"
		}
		var dirty []string
		for _, t := range s.Targets {
			if !t.Summary.Clean {
				dirty = append(dirty, fmt.Sprintf("%d violation(s) for %s", t.Summary.Violations, t.Target))
			}
		}
		if !s.Summary.Clean && len(dirty) == 0 {
			dirty = append(dirty, fmt.Sprintf("%d violation(s)", s.Summary.Violations))
		}
		if len(dirty) > 0 {
			return "the scan found " + strings.Join(dirty, ", ")
		}
	}
	return ""
}
