package sign

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/build"
)

// SBOM is an SPDX 2.3 JSON document for the build behind an image: Apache
// Doris with its source digest, every third-party package with version and
// archive checksums, and every patch applied.
func SBOM(rec *build.Record, imageRef string) ([]byte, error) {
	pkgs, rels, root := buildPackages(rec, "", "")
	rels = append([]spdxRel{{"SPDXRef-DOCUMENT", "DESCRIBES", root}}, rels...)
	return spdxDocument(imageRef, "https://dorisarm.dev/spdx/"+strings.TrimPrefix(rec.ContentDigest(), "sha256:"), rec.Finished, pkgs, rels)
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxPackage struct {
	SPDXID           string            `json:"SPDXID"`
	Name             string            `json:"name"`
	Version          string            `json:"versionInfo,omitempty"`
	Download         string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment          string            `json:"comment,omitempty"`
	PrimaryPurpose   string            `json:"primaryPackagePurpose,omitempty"`
	LicenseConcluded string            `json:"licenseConcluded"`
	LicenseDeclared  string            `json:"licenseDeclared"`
	CopyrightText    string            `json:"copyrightText"`
}

type spdxRel struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

// buildPackages are the SPDX packages of one build (Doris, its third-party
// packages, its patches) and their relationships; root is Doris's SPDXID.
// prefix keeps the IDs of several builds in one document apart; note
// starts every comment (the platform, in an index's SBOM).
func buildPackages(rec *build.Record, prefix, note string) (pkgs []spdxPackage, rels []spdxRel, root string) {
	noa := noAssertion
	id := func(kind, s string) string { return "SPDXRef-" + prefix + kind + "-" + spdxID(s) }
	doris := spdxPackage{SPDXID: id("Package", "doris"), Name: "apache-doris", Version: rec.Source.Version, Download: noa, PrimaryPurpose: "APPLICATION",
		LicenseConcluded: noa, LicenseDeclared: noa, CopyrightText: noa,
		Comment: note + fmt.Sprintf("built by dorisarm for target %s (cpu %s, -march=%s) with %s %s; source tree digest %s",
			rec.Cell.Target, rec.Cell.CPU, rec.Cell.March, rec.Compiler.Name, rec.Compiler.Version, rec.Source.Digest)}
	if d, ok := strings.CutPrefix(rec.Source.Digest, "sha256:"); ok {
		doris.Checksums = []spdxChecksum{{"SHA256", d}}
	}
	pkgs = []spdxPackage{doris}
	for _, p := range rec.Packages {
		sp := spdxPackage{SPDXID: id("Package", p.Entry), Name: strings.ToLower(p.Entry), Version: p.Version, Download: noa,
			LicenseConcluded: noa, LicenseDeclared: noa, CopyrightText: noa, Comment: note + "archive " + p.Archive}
		if p.SHA256 != "" {
			sp.Checksums = append(sp.Checksums, spdxChecksum{"SHA256", p.SHA256})
		}
		if p.MD5 != "" {
			sp.Checksums = append(sp.Checksums, spdxChecksum{"MD5", p.MD5})
		}
		pkgs = append(pkgs, sp)
		rels = append(rels, spdxRel{doris.SPDXID, "DEPENDS_ON", sp.SPDXID})
	}
	for _, p := range rec.Patches {
		sp := spdxPackage{SPDXID: id("Patch", p.ID), Name: "patch:" + p.ID, Download: noa, FilesAnalyzed: false,
			LicenseConcluded: noa, LicenseDeclared: noa, CopyrightText: noa, Comment: note + "applied to " + p.Component + ": " + p.Why,
			Checksums: []spdxChecksum{{"SHA256", p.SHA256}}}
		pkgs = append(pkgs, sp)
		rels = append(rels, spdxRel{sp.SPDXID, "PATCH_APPLIED", doris.SPDXID})
	}
	return pkgs, rels, doris.SPDXID
}

func spdxDocument(name, namespace string, created time.Time, pkgs []spdxPackage, rels []spdxRel) ([]byte, error) {
	doc := map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              name,
		"documentNamespace": namespace,
		"creationInfo": map[string]any{
			"created":  created.UTC().Format("2006-01-02T15:04:05Z"),
			"creators": []string{"Tool: dorisarm"},
		},
		"packages":      pkgs,
		"relationships": rels,
	}
	return json.Marshal(doc)
}

func spdxID(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Provenance is a SLSA provenance v1 predicate for the build behind an
// image: what was built for which target, from which matrix, recipe,
// source and patches, with which compiler and flags and PGO profile.
func Provenance(rec *build.Record, builderID string) ([]byte, error) {
	type dep struct {
		Name   string            `json:"name"`
		URI    string            `json:"uri,omitempty"`
		Digest map[string]string `json:"digest"`
	}
	sha := func(d string) map[string]string { return map[string]string{"sha256": strings.TrimPrefix(d, "sha256:")} }
	deps := []dep{
		{Name: "doris-source", Digest: sha(rec.Source.Digest)},
		{Name: "matrix.yaml", Digest: sha(rec.Matrix)},
		{Name: "recipe:" + rec.Recipe.Name, Digest: sha(rec.Recipe.Digest)},
		{Name: "compiler:" + rec.Compiler.Name, URI: "file://" + rec.Compiler.Path, Digest: sha(rec.Compiler.Digest)},
	}
	for _, p := range rec.Patches {
		deps = append(deps, dep{Name: "patch:" + p.ID, Digest: sha(p.SHA256)})
	}
	for _, p := range rec.Packages {
		if p.SHA256 != "" {
			deps = append(deps, dep{Name: "archive:" + p.Archive, Digest: sha(p.SHA256)})
		}
	}
	phases := make([]string, 0, len(rec.Flags))
	for ph := range rec.Flags {
		phases = append(phases, ph)
	}
	sort.Strings(phases)
	flags := map[string]string{}
	for _, ph := range phases {
		flags[ph] = strings.Join(rec.Flags[ph], " ")
	}
	pred := map[string]any{
		"buildDefinition": map[string]any{
			"buildType":          "https://dorisarm.dev/buildtypes/doris/v1",
			"externalParameters": externalParameters(rec),
			"internalParameters": map[string]any{
				"compiler":   map[string]string{"name": rec.Compiler.Name, "version": rec.Compiler.Version, "banner": rec.Compiler.Banner},
				"flags":      flags,
				"pgo":        rec.Cell.PGO,
				"pgoNone":    rec.Cell.PGONone,
				"lto":        rec.Cell.LTO,
				"pgoProfile": rec.PGOProfile,
				"build":      rec.ContentDigest(),
				"patches":    patchIDs(rec),
				// The target OS's libraries the build linked against, or why not.
				"sysroot":       rec.Cell.Sysroot,
				"sysrootWaiver": rec.Cell.SysrootWaiver,
				// A BE built at the -march its tree fixes, and why.
				"lostTuning": rec.Cell.LostTuning,
			},
			"resolvedDependencies": deps,
		},
		"runDetails": map[string]any{
			"builder": map[string]string{"id": builderID},
			"metadata": map[string]any{
				"invocationId": rec.ContentDigest(),
				"startedOn":    rec.Finished.Add(-time.Duration(rec.Seconds * float64(time.Second))).UTC().Format(time.RFC3339Nano),
				"finishedOn":   rec.Finished.UTC().Format(time.RFC3339Nano),
			},
			// How much of the build came from the step cache: the release report shows it.
			"byproducts": []map[string]any{{
				"name":        "step-cache",
				"annotations": map[string]int{"hits": len(rec.Cache.Hits), "misses": len(rec.Cache.Misses)},
			}},
		},
	}
	return json.Marshal(pred)
}

func patchIDs(rec *build.Record) []string {
	ids := make([]string, 0, len(rec.Patches))
	for _, p := range rec.Patches {
		ids = append(ids, p.ID)
	}
	return ids
}

// externalParameters are what a build was asked to make: the matrix cell.
func externalParameters(rec *build.Record) map[string]any {
	return map[string]any{"target": rec.Cell.Target, "doris": rec.Cell.Doris, "cpu": rec.Cell.CPU, "os": rec.Cell.OS, "march": rec.Cell.March}
}
