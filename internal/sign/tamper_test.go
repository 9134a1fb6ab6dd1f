package sign

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/image"
)

// TestEditedAttestationPayload: an attestation whose DSSE payload was
// edited with its signature kept is reported as not verifying, not as
// missing; the untouched ones still verify.
func TestEditedAttestationPayload(t *testing.T) {
	host := registryHost(t)
	img, _ := random.Image(100, 1)
	img = mutate.Annotations(img, map[string]string{image.AnnBuild: "sha256:" + strings.Repeat("ab", 32)}).(v1.Image)
	ref, _ := name.ParseReference(host + "/doris/doris-be:2.1.8-kunpeng920")
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	dg, _ := img.Digest()
	d := ref.Context().Digest(dg.String())
	priv, pub, _ := Keygen(t.TempDir(), []byte("pw"))
	s, err := LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	// The legacy tag alone: a bundle beside it would still verify (see
	// TestEditedBundle for the bundle's own case).
	s = s.WithFormat(FormatLegacy)
	ctx := context.Background()
	for typ, p := range map[string]string{PredicateScan: `{"summary":{"clean":true}}`, PredicateSPDX: `{"spdxVersion":"SPDX-2.3"}`, PredicateSLSA1: `{"buildDefinition":{}}`} {
		if err := s.Attest(ctx, d, typ, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	checks, _, err := attestationChecks(ctx, []name.Digest{d}, Trust{Key: pub})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !c.OK {
			t.Fatalf("before the edit: %s: %s", c.What, c.Why)
		}
	}

	// Edit the SPDX statement's payload in the .att image, keep its signature.
	editAttestation(t, d, PredicateSPDX, "SPDX-2.3", "SPDX-9.9")

	checks, _, err = attestationChecks(ctx, []name.Digest{d}, Trust{Key: pub})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		spdx := strings.Contains(c.What, PredicateSPDX)
		switch {
		case spdx && (c.OK || !strings.Contains(c.Why, "signature does not verify")):
			t.Errorf("edited SPDX attestation: ok=%v %q", c.OK, c.Why)
		case !spdx && !c.OK:
			t.Errorf("untouched %s: %s", c.What, c.Why)
		}
	}
}

// editAttestation replaces old with new in the DSSE payload of d's
// attestation of predicateType, in the registry, keeping its signature.
func editAttestation(t *testing.T, d name.Digest, predicateType, old, new string) {
	t.Helper()
	att := d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + ".att")
	img, err := remote.Image(att)
	if err != nil {
		t.Fatal(err)
	}
	mf, _ := img.Manifest()
	layers, _ := img.Layers()
	edited := mutate.MediaType(empty.Image, mf.MediaType)
	edited = mutate.ConfigMediaType(edited, mf.Config.MediaType)
	changed := false
	for i, l := range layers {
		rc, _ := l.Compressed()
		data, _ := io.ReadAll(rc)
		rc.Close()
		var env map[string]any
		json.Unmarshal(data, &env)
		raw, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
		if strings.Contains(string(raw), `"predicateType":"`+predicateType+`"`) && strings.Contains(string(raw), old) {
			raw = []byte(strings.Replace(string(raw), old, new, 1))
			env["payload"] = base64.StdEncoding.EncodeToString(raw)
			data, _ = json.Marshal(env)
			changed = true
		}
		edited, err = mutate.Append(edited, mutate.Addendum{Layer: static.NewLayer(data, types.MediaType(mf.Layers[i].MediaType)), Annotations: mf.Layers[i].Annotations})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !changed {
		t.Fatalf("no %s attestation of %s holds %q", predicateType, d, old)
	}
	if err := remote.Write(att, edited); err != nil {
		t.Fatal(err)
	}
}
