package sign

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/image"
)

// sharedFE pushes a shared FE image holding tree, signs it and returns its
// digest, the signer and the public key.
func sharedFE(t *testing.T, tree string) (name.Digest, *Signer, string) {
	t.Helper()
	repo, _ := name.NewRepository(registryHost(t) + "/doris/doris-fe")
	img, _ := random.Image(200, 1)
	img = mutate.Annotations(img, map[string]string{image.AnnShared: tree,
		"org.opencontainers.image.title": "doris-fe", "org.opencontainers.image.version": "2.1.8"}).(v1.Image)
	if err := remote.Write(repo.Tag("2.1.8"), img); err != nil {
		t.Fatal(err)
	}
	dg, _ := img.Digest()
	d := repo.Digest(dg.String())
	priv, pub, _ := Keygen(filepath.Join(t.TempDir(), "k"), []byte("pw"))
	s, err := LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sign(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d, s, pub
}

func feShared(tree string, violations int) Shared {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	return Shared{Name: "doris-fe", Version: "2.1.8", Tree: tree, From: "fe",
		Builds: []SharedBuild{
			{Record: record("kunpeng920", "tsv110", "armv8", at), Scan: scanOf("kunpeng920", violations)},
			{Record: record("graviton3", "neoverse-v1", "armv8", at.Add(time.Minute)), Scan: scanOf("graviton3", 0)},
		},
		Files: []SharedFile{{Path: "lib/doris-fe.jar", SHA256: strings.Repeat("f", 64)}}}
}

func attestShared(t *testing.T, s *Signer, d name.Digest, sh Shared) {
	t.Helper()
	sbom, err := SharedSBOM(sh, d.Context().Name())
	if err != nil {
		t.Fatal(err)
	}
	prov, err := SharedProvenance(sh, "https://github.com/dorisarm/dorisarm")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := SharedScan(sh)
	if err != nil {
		t.Fatal(err)
	}
	for typ, p := range map[string][]byte{PredicateSPDX: sbom, PredicateSLSA1: prov, PredicateScan: sc} {
		if err := s.Attest(context.Background(), d, typ, p); err != nil {
			t.Fatal(err)
		}
	}
}

func sharedChecks(t *testing.T, d name.Digest, pub string) map[string]Check {
	t.Helper()
	res, err := VerifyRelease(context.Background(), d, Trust{Key: pub}, false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Check{}
	for _, c := range res.Attestations {
		got[strings.Fields(c.What)[1]] = c
	}
	if len(got) != 3 {
		t.Fatalf("%d attestation checks of the shared image, want 3: %+v", len(got), res.Attestations)
	}
	return got
}

// The shared FE image is attested about the tree it holds: without
// attestations it fails verification (promotion needs it), with them it
// passes; attestations of another tree, or a scan dirty for one target,
// fail.
func TestSharedImageAttestations(t *testing.T) {
	tree := "sha256:" + strings.Repeat("e", 64)

	d, s, pub := sharedFE(t, tree)
	for typ, c := range sharedChecks(t, d, pub) {
		if c.OK || !strings.Contains(c.Why, "missing") {
			t.Errorf("unattested shared image, %s: %+v; want missing", typ, c)
		}
	}
	attestShared(t, s, d, feShared(tree, 0))
	for typ, c := range sharedChecks(t, d, pub) {
		if !c.OK {
			t.Errorf("attested shared image, %s: %s", typ, c.Why)
		}
	}

	// Attestations made for another tree (an older FE) do not pass.
	d, s, pub = sharedFE(t, tree)
	attestShared(t, s, d, feShared("sha256:"+strings.Repeat("0", 64), 0))
	for typ, c := range sharedChecks(t, d, pub) {
		if c.OK || !strings.Contains(c.Why, tree) {
			t.Errorf("another tree's attestation, %s: %+v; want refused naming %s", typ, c, tree)
		}
	}

	// The tree scanned dirty for one of its targets.
	d, s, pub = sharedFE(t, tree)
	attestShared(t, s, d, feShared(tree, 2))
	c := sharedChecks(t, d, pub)[PredicateScan]
	if c.OK || !strings.Contains(c.Why, "2 violation(s) for kunpeng920") {
		t.Errorf("dirty scan: %+v", c)
	}
}

func TestSharedPredicates(t *testing.T) {
	tree := "sha256:" + strings.Repeat("e", 64)
	sh := feShared(tree, 0)
	prov, _ := SharedProvenance(sh, "b")
	var p struct {
		BuildDefinition struct {
			ExternalParameters   sharedParams `json:"externalParameters"`
			ResolvedDependencies []sharedDep  `json:"resolvedDependencies"`
		} `json:"buildDefinition"`
	}
	if err := json.Unmarshal(prov, &p); err != nil {
		t.Fatal(err)
	}
	deps := p.BuildDefinition.ResolvedDependencies
	if p.BuildDefinition.ExternalParameters != (sharedParams{Image: "doris-fe", Doris: "2.1.8", Tree: tree, From: "fe"}) || len(deps) != 2 ||
		deps[0].Annotations.Target != "graviton3" || deps[1].Digest["sha256"] != strings.TrimPrefix(sh.Builds[0].Record.ContentDigest(), "sha256:") {
		t.Errorf("provenance: %s", prov)
	}
	sbom, _ := SharedSBOM(sh, "r/doris-fe")
	if !strings.Contains(string(sbom), `"name":"doris-fe.jar"`) || !strings.Contains(string(sbom), strings.Repeat("f", 64)) {
		t.Errorf("SBOM lists no jar: %s", sbom)
	}
	for what, s := range map[string]Shared{
		"no tree":   {Name: "doris-fe", Version: "2.1.8", Builds: sh.Builds},
		"no builds": {Name: "doris-fe", Version: "2.1.8", Tree: tree},
	} {
		if _, err := SharedProvenance(s, "b"); err == nil {
			t.Errorf("%s: provenance made", what)
		}
		if _, err := SharedScan(s); err == nil {
			t.Errorf("%s: scan made", what)
		}
	}
	if why := checkSharedPredicate(PredicateSLSA1, []byte(`{"buildDefinition":{"buildType":"`+BuildTypeIndex+`"}}`), tree); !strings.Contains(why, "build type") {
		t.Errorf("an index's provenance on a shared image: %q", why)
	}
	if why := checkSharedPredicate(PredicateScan, []byte(`{"tree":"`+tree+`","targets":[]}`), tree); !strings.Contains(why, "no target") {
		t.Errorf("a scan of no target: %q", why)
	}
}
