package sign

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/scan"
)

// release is a multi-arch index in an in-memory registry: two platform
// images made from builds (kunpeng920 on linux/arm64/v8, x86_64 on
// linux/amd64), and one imported image (not the release's, not attested).
type release struct {
	host     string
	index    name.Digest
	children []IndexChild // the two made from builds
	s        *Signer
	pub      string
	other    *Signer
}

func record(target, cpu, isa string, finished time.Time) *build.Record {
	return &build.Record{
		Cell:   plan.CellInfo{Doris: "2.1.8", Target: target, CPU: cpu, OS: "ubuntu-22.04", ISA: isa, March: "armv8.2-a"},
		Source: plan.SourceInfo{Version: "2.1.8", Digest: "sha256:" + strings.Repeat("5", 64)},
		Packages: []build.Package{
			{Entry: "ZLIB", Version: "1.3.1", Archive: "zlib-1.3.1.tar.gz", SHA256: strings.Repeat("a", 64)},
		},
		Patches:  []plan.PatchRef{{ID: "be/0001-arm-crc", Component: "be", Why: "CRC32 on ARM", SHA256: strings.Repeat("c", 64)}},
		Steps:    []build.StepRecord{{ID: "doris-be", Key: target}},
		Seconds:  60,
		Finished: finished,
	}
}

func scanOf(target string, violations int) []byte {
	rep := scan.Report{Target: target, Summary: scan.Summary{Clean: violations == 0, Violations: violations, Files: 3}}
	for i := 0; i < violations; i++ {
		rep.Findings = append(rep.Findings, scan.Finding{Kind: "isa", Severity: scan.SevError, Path: "be/lib/doris_be", Detail: "uses sve2", Feature: "sve2"})
	}
	b, _ := json.Marshal(rep)
	return b
}

// newRelease pushes the index (version ver), signs it recursively and
// attests both platform images (not the index).
func newRelease(t *testing.T, ver string) *release {
	t.Helper()
	host := registryHost(t)
	repo, _ := name.NewRepository(host + "/doris/doris-be")
	r := &release{host: host}
	var adds []mutate.IndexAddendum
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, c := range []struct {
		target, cpu, isa string
		plat             v1.Platform
	}{
		{"kunpeng920", "tsv110", "armv8", v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}},
		{"x86_64", "x86-64-v2", "x86_64", v1.Platform{OS: "linux", Architecture: "amd64"}},
	} {
		rec := record(c.target, c.cpu, c.isa, at.Add(time.Duration(i)*time.Minute))
		img, _ := random.Image(200, 1)
		img = mutate.Annotations(img, map[string]string{image.AnnBuild: rec.ContentDigest(), image.AnnTarget: c.target}).(v1.Image)
		dg, _ := img.Digest()
		if err := remote.Write(repo.Tag(ver+"-"+c.target), img); err != nil {
			t.Fatal(err)
		}
		plat := c.plat
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &plat, Annotations: map[string]string{image.AnnTarget: c.target}}})
		r.children = append(r.children, IndexChild{Digest: dg.String(), Platform: c.plat, Record: rec, Scan: scanOf(c.target, 0)})
	}
	imported, _ := random.Image(100, 1)
	adds = append(adds, mutate.IndexAddendum{Add: imported, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "ppc64le"},
		Annotations: map[string]string{image.AnnImported: "docker.io/apache/doris:2.1.8-ppc64le"}}})
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	idx = mutate.Annotations(idx, map[string]string{"org.opencontainers.image.title": "doris-be", "org.opencontainers.image.version": ver}).(v1.ImageIndex)
	if err := remote.WriteIndex(repo.Tag(ver), idx); err != nil {
		t.Fatal(err)
	}
	dg, _ := idx.Digest()
	r.index = repo.Digest(dg.String())

	dir := t.TempDir()
	priv, pub, _ := Keygen(dir, []byte("pw"))
	opriv, _, _ := Keygen(filepath.Join(dir, "other"), []byte("pw"))
	var err error
	if r.s, err = LoadSigner(priv, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	r.other, _ = LoadSigner(opriv, []byte("pw"))
	r.pub = pub
	ctx := context.Background()
	if _, err := r.s.Sign(ctx, r.index); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.children {
		d := repo.Digest(c.Digest)
		sbom, _ := SBOM(c.Record, repo.Name())
		prov, _ := Provenance(c.Record, "https://github.com/dorisarm/dorisarm")
		for typ, p := range map[string][]byte{PredicateSPDX: sbom, PredicateSLSA1: prov, PredicateScan: c.Scan} {
			if err := r.s.Attest(ctx, d, typ, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

// attestIndex attaches the three index predicates made from ix.
func (r *release) attestIndex(t *testing.T, s *Signer, ix Index) {
	t.Helper()
	sbom, err := IndexSBOM(ix, r.index.Context().Name())
	if err != nil {
		t.Fatal(err)
	}
	prov, err := IndexProvenance(ix, "https://github.com/dorisarm/dorisarm")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := IndexScan(ix)
	if err != nil {
		t.Fatal(err)
	}
	for typ, p := range map[string][]byte{PredicateSPDX: sbom, PredicateSLSA1: prov, PredicateScan: sc} {
		if err := s.Attest(context.Background(), r.index, typ, p); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *release) ix() Index { return Index{Name: "doris-be", Version: "2.1.8", Children: r.children} }

// indexChecks verifies the release and returns the index's three
// attestation checks by predicate type, failing on any other failed check.
func (r *release) indexChecks(t *testing.T) map[string]Check {
	t.Helper()
	res, err := VerifyRelease(context.Background(), r.index, Trust{Key: r.pub}, false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Check{}
	for _, c := range res.Checks() {
		if strings.HasSuffix(c.What, " of "+r.index.String()) && strings.HasPrefix(c.What, "attestation ") {
			got[strings.Fields(c.What)[1]] = c
			continue
		}
		if !c.OK {
			t.Errorf("%s: %s", c.What, c.Why)
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d attestation checks of the index, want 3: %+v", len(got), res.Attestations)
	}
	return got
}

func TestIndexAttestationsVerify(t *testing.T) {
	r := newRelease(t, "2.1.8")
	// Signed and its platforms attested, the index not: each of its three
	// attestations is reported missing, as a platform's would be.
	for typ, c := range r.indexChecks(t) {
		if c.OK || c.Why != "missing (sign it with dorisarm sign --build)" {
			t.Errorf("unattested index, %s: ok=%v %q", typ, c.OK, c.Why)
		}
	}
	r.attestIndex(t, r.s, r.ix())
	res, err := VerifyRelease(context.Background(), r.index, Trust{Key: r.pub}, false)
	if err != nil {
		t.Fatal(err)
	}
	// The index, its two build-made platforms, 3 attestations each; the
	// imported platform carries none and needs none.
	if len(res.Attestations) != 9 {
		t.Errorf("%d attestation checks, want 9: %+v", len(res.Attestations), res.Attestations)
	}
	for _, c := range res.Checks() {
		if !c.OK {
			t.Errorf("%s: %s", c.What, c.Why)
		}
	}
	sts := res.Statements[r.index.DigestStr()]
	if len(sts) != 3 {
		t.Fatalf("%d verified statements about the index, want 3", len(sts))
	}
	byType := map[string]json.RawMessage{}
	for _, st := range sts {
		if st.Subject != r.index.DigestStr() {
			t.Errorf("%s is about %s, not the index", st.PredicateType, st.Subject)
		}
		byType[st.PredicateType] = st.Predicate
	}

	// The provenance names every platform with its build's parameters.
	var prov struct {
		BuildDefinition struct {
			BuildType          string `json:"buildType"`
			ExternalParameters struct {
				Image, Doris string
				Platforms    []string
			} `json:"externalParameters"`
			ResolvedDependencies []indexDep `json:"resolvedDependencies"`
		} `json:"buildDefinition"`
		RunDetails struct {
			Metadata struct{ StartedOn, FinishedOn time.Time } `json:"metadata"`
		} `json:"runDetails"`
	}
	if err := json.Unmarshal(byType[PredicateSLSA1], &prov); err != nil {
		t.Fatal(err)
	}
	bd := prov.BuildDefinition
	if bd.BuildType != BuildTypeIndex || bd.ExternalParameters.Image != "doris-be" || bd.ExternalParameters.Doris != "2.1.8" ||
		fmt.Sprint(bd.ExternalParameters.Platforms) != "[linux/amd64 linux/arm64/v8]" || len(bd.ResolvedDependencies) != 2 {
		t.Errorf("index provenance: %+v", bd)
	}
	for _, c := range r.children {
		found := false
		for _, d := range bd.ResolvedDependencies {
			if "sha256:"+d.Digest["sha256"] != c.Digest {
				continue
			}
			found = true
			a := d.Annotations
			if a.Platform != c.Platform.String() || a.Target != c.Record.Cell.Target || a.Build != c.Record.ContentDigest() ||
				a.ExternalParameters["target"] != c.Record.Cell.Target || a.ExternalParameters["cpu"] != c.Record.Cell.CPU || a.ExternalParameters["doris"] != "2.1.8" {
				t.Errorf("the provenance's entry for %s: %+v", c.Digest, a)
			}
		}
		if !found {
			t.Errorf("the provenance does not name %s", c.Digest)
		}
	}
	if !prov.RunDetails.Metadata.StartedOn.Equal(r.children[0].Record.Finished.Add(-time.Minute)) || !prov.RunDetails.Metadata.FinishedOn.Equal(r.children[1].Record.Finished) {
		t.Errorf("run times: %+v", prov.RunDetails.Metadata)
	}

	// The SBOM: one CONTAINER package per platform, each containing its
	// build's Doris, with the platform in every comment.
	var doc struct {
		Packages      []spdxPackage `json:"packages"`
		Relationships []spdxRel     `json:"relationships"`
	}
	if err := json.Unmarshal(byType[PredicateSPDX], &doc); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	containers := map[string]spdxPackage{}
	for _, p := range doc.Packages {
		if ids[p.SPDXID] {
			t.Errorf("SPDXID %s twice", p.SPDXID)
		}
		ids[p.SPDXID] = true
		if p.PrimaryPurpose == "CONTAINER" {
			containers["sha256:"+p.Checksums[0].Value] = p
		}
		if !strings.HasPrefix(p.Comment, "platform linux/") {
			t.Errorf("%s does not say its platform: %q", p.SPDXID, p.Comment)
		}
	}
	if len(doc.Packages) != 2*(1+1+1+1) { // per platform: the image, Doris, zlib, a patch
		t.Errorf("%d SBOM packages", len(doc.Packages))
	}
	arm := containers[r.children[0].Digest]
	if len(containers) != 2 || len(arm.ExternalRefs) != 1 ||
		arm.ExternalRefs[0].Locator != "pkg:oci/doris-be@sha256%3A"+strings.TrimPrefix(r.children[0].Digest, "sha256:")+"?arch=arm64&variant=v8" {
		t.Errorf("SBOM images: %+v", containers)
	}
	contains := 0
	for _, rel := range doc.Relationships {
		if rel.Type == "CONTAINS" && rel.Element == arm.SPDXID && rel.Related == "SPDXRef-kunpeng920-Package-doris" {
			contains++
		}
	}
	if contains != 1 {
		t.Errorf("the arm64 image does not contain the kunpeng920 build's Doris: %+v", doc.Relationships)
	}

	// The scan: each platform's target and result.
	var sc indexScan
	if err := json.Unmarshal(byType[PredicateScan], &sc); err != nil {
		t.Fatal(err)
	}
	if !sc.Summary.Clean || sc.Summary.Platforms != 2 || len(sc.Platforms) != 2 || sc.Platforms[1].Target != "kunpeng920" ||
		sc.Platforms[1].Platform != "linux/arm64/v8" || sc.Platforms[1].Digest != r.children[0].Digest || sc.Platforms[1].Summary.Files != 3 {
		t.Errorf("index scan: %+v", sc)
	}

	// Another key's index attestations are not the release's.
	res, err = VerifyRelease(context.Background(), r.index, Trust{Key: r.pub}, false)
	if err != nil || len(res.Attestations) != 9 {
		t.Fatalf("VerifyRelease: %v, %v", res, err)
	}
	r.attestIndex(t, r.other, r.ix()) // replaces the good ones in the legacy tag (one per type)
	for typ, c := range r.indexChecks(t) {
		// The release's bundles are still there: they, not the other key's, count.
		if !c.OK || !slices.Equal(c.Formats, []string{checkedBundle}) {
			t.Errorf("index attested with another key, %s: ok=%v %q %v, want the release's bundle", typ, c.OK, c.Why, c.Formats)
		}
	}
	// With the legacy tag alone, another key's attestations replace the release's.
	r = newRelease(t, "2.1.8")
	r.s.WithFormat(FormatLegacy)
	r.other.WithFormat(FormatLegacy)
	r.attestIndex(t, r.s, r.ix())
	r.attestIndex(t, r.other, r.ix())
	for typ, c := range r.indexChecks(t) {
		if c.OK || !strings.Contains(c.Why, "no matching attestations") {
			t.Errorf("index attested with another key, legacy tag only, %s: ok=%v %q", typ, c.OK, c.Why)
		}
	}
}

// TestIndexAttestationAltered: an index attestation whose payload was
// edited (its signature kept) is reported as altered, like a platform's;
// the others still verify.
func TestIndexAttestationAltered(t *testing.T) {
	r := newRelease(t, "2.1.8")
	r.s.WithFormat(FormatLegacy) // the legacy tag alone (an edited bundle: TestEditedBundle)
	r.attestIndex(t, r.s, r.ix())
	// Claim the x86_64 platform is a kunpeng920 build.
	editAttestation(t, r.index, PredicateSLSA1, `"target":"x86_64"`, `"target":"kunpeng920"`)
	for typ, c := range r.indexChecks(t) {
		switch {
		case typ == PredicateSLSA1 && (c.OK || !strings.Contains(c.Why, "signature does not verify: it was altered")):
			t.Errorf("edited index provenance: ok=%v %q", c.OK, c.Why)
		case typ != PredicateSLSA1 && !c.OK:
			t.Errorf("untouched %s: %s", typ, c.Why)
		}
	}
}

// TestIndexAttestationChildrenMismatch: index predicates (signed with the
// right key) that name other platforms than the index has are refused.
func TestIndexAttestationChildrenMismatch(t *testing.T) {
	r := newRelease(t, "2.1.8")
	stranger, _ := random.Image(50, 1)
	sd, _ := stranger.Digest()
	retarget := append([]IndexChild{}, r.children...)
	rec := *retarget[1].Record
	rec.Cell.Target = "kunpeng920" // the x86_64 image named as another target's build
	retarget[1].Record = &rec
	retarget[1].Scan = scanOf("kunpeng920", 0)
	dirty := append([]IndexChild{}, r.children...)
	dirty[1].Scan = scanOf("x86_64", 2)
	for _, c := range []struct {
		name     string
		children []IndexChild
		want     map[string]string // predicate type → the reason's words
	}{
		{"one platform left out", r.children[:1], map[string]string{
			PredicateSLSA1: "does not name " + r.children[1].Digest + " (linux/amd64 for x86_64 from build " + r.children[1].Record.ContentDigest() + ")",
			PredicateSPDX:  "does not name " + r.children[1].Digest,
			PredicateScan:  "does not name " + r.children[1].Digest,
		}},
		{"a stranger added", append(append([]IndexChild{}, r.children...), IndexChild{Digest: sd.String(), Platform: v1.Platform{OS: "linux", Architecture: "riscv64"}, Record: record("sg2042", "c920", "riscv", time.Now()), Scan: scanOf("sg2042", 0)}),
			map[string]string{
				PredicateSLSA1: "names " + sd.String() + ", which is not a platform of the index made from a build",
				PredicateSPDX:  "names " + sd.String() + ", which is not a platform",
				PredicateScan:  "names " + sd.String() + ", which is not a platform",
			}},
		{"a platform's target changed", retarget, map[string]string{
			PredicateSLSA1: "says " + r.children[1].Digest + " is linux/amd64 for kunpeng920 from build " + rec.ContentDigest() + ", but it is linux/amd64 for x86_64 from build " + r.children[1].Record.ContentDigest(),
			PredicateScan:  "says " + r.children[1].Digest + " is linux/amd64 for kunpeng920",
		}},
		{"a platform's platform changed", []IndexChild{r.children[0], {Digest: r.children[1].Digest, Platform: v1.Platform{OS: "linux", Architecture: "arm64"}, Record: r.children[1].Record, Scan: r.children[1].Scan}},
			map[string]string{
				PredicateSLSA1: "is linux/arm64 for x86_64 from build " + r.children[1].Record.ContentDigest() + ", but it is linux/amd64 for x86_64",
				PredicateScan:  "is linux/arm64 for x86_64 from build " + r.children[1].Record.ContentDigest() + ", but it is linux/amd64 for x86_64",
			}},
		{"a platform's scan failed", dirty, map[string]string{PredicateScan: "the scan found 2 violation(s) on linux/amd64 for x86_64"}},
	} {
		r.attestIndex(t, r.s, Index{Name: "doris-be", Version: "2.1.8", Children: c.children})
		for typ, ch := range r.indexChecks(t) {
			want, bad := c.want[typ]
			switch {
			case bad && (ch.OK || !strings.Contains(ch.Why, want)):
				t.Errorf("%s, %s: ok=%v %q, want %q", c.name, typ, ch.OK, ch.Why, want)
			case !bad && !ch.OK:
				t.Errorf("%s, %s: %s", c.name, typ, ch.Why)
			}
		}
	}
	// A platform manifest's provenance attached to the index is not the index's.
	prov, _ := Provenance(r.children[0].Record, "b")
	if err := r.s.Attest(context.Background(), r.index, PredicateSLSA1, prov); err != nil {
		t.Fatal(err)
	}
	if c := r.indexChecks(t)[PredicateSLSA1]; c.OK || !strings.Contains(c.Why, "not a multi-arch index's") {
		t.Errorf("a platform's provenance on the index: ok=%v %q", c.OK, c.Why)
	}
}

func TestIndexPredicatesBadInput(t *testing.T) {
	if _, err := IndexProvenance(Index{Name: "doris-fe", Version: "2.1.8"}, "b"); err == nil || !strings.Contains(err.Error(), "no platform made from a build") {
		t.Errorf("an index without builds: %v", err)
	}
	c := IndexChild{Digest: "sha256:" + strings.Repeat("1", 64), Record: record("kunpeng920", "tsv110", "armv8", time.Now()), Scan: []byte("{")}
	if _, err := IndexSBOM(Index{Name: "doris-be", Children: []IndexChild{c, c}}, "r"); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a platform listed twice: %v", err)
	}
	if _, err := IndexScan(Index{Name: "doris-be", Children: []IndexChild{c}}); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("a scan report that does not parse: %v", err)
	}
	// Two platforms built for one target keep their SPDX IDs apart.
	c2 := c
	c2.Digest = "sha256:" + strings.Repeat("2", 64)
	sbom, err := IndexSBOM(Index{Name: "doris-be", Children: []IndexChild{c, c2}}, "r")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Packages []spdxPackage }
	json.Unmarshal(sbom, &doc)
	seen := map[string]bool{}
	for _, p := range doc.Packages {
		if seen[p.SPDXID] {
			t.Errorf("SPDXID %s twice", p.SPDXID)
		}
		seen[p.SPDXID] = true
	}
	if len(doc.Packages) != 8 {
		t.Errorf("%d packages, want 8", len(doc.Packages))
	}
}
