package sign

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
)

// keySigner is a key pair in dir and its signer writing format f.
func keySigner(t *testing.T, f Format) (*Signer, string) {
	t.Helper()
	priv, pub, err := Keygen(t.TempDir(), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	return s.WithFormat(f), pub
}

// pushBuildImage pushes a build-made image to host and returns its digest.
func pushBuildImage(t *testing.T, host string) name.Digest {
	t.Helper()
	img := buildImage(t)
	ref, _ := name.ParseReference(host + "/doris/doris-be:2.1.8-kunpeng920")
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	dg, _ := img.Digest()
	return ref.Context().Digest(dg.String())
}

var releasePredicates = map[string]string{PredicateScan: `{"summary":{"clean":true}}`, PredicateSPDX: `{"spdxVersion":"SPDX-2.3"}`, PredicateSLSA1: `{"buildDefinition":{}}`}

func signAndAttest(t *testing.T, s *Signer, d name.Digest) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Sign(ctx, d); err != nil {
		t.Fatal(err)
	}
	for typ, p := range releasePredicates {
		if err := s.Attest(ctx, d, typ, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
}

func referrersOf(t *testing.T, d name.Digest) []v1.Descriptor {
	t.Helper()
	idx, err := remote.Referrers(d)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return im.Manifests
}

func tagExists(d name.Digest, suffix string) bool {
	_, err := remote.Head(sigTag(d, suffix))
	return err == nil
}

// Each format alone is written alone and verified, and the checks say which
// form they checked.
func TestSignatureFormats(t *testing.T) {
	for _, c := range []struct {
		f            Format
		referrers    int  // the signature and three attestations as bundles
		tags         bool // the legacy .sig and .att
		checkedForms []string
	}{
		{FormatBundle, 4, false, []string{checkedBundle}},
		{FormatLegacy, 0, true, []string{checkedLegacy}},
		{FormatBoth, 4, true, []string{checkedBundle, checkedLegacy}},
	} {
		t.Run(string(c.f), func(t *testing.T) {
			d := pushBuildImage(t, registryHost(t))
			s, pub := keySigner(t, c.f)
			signAndAttest(t, s, d)
			rs := referrersOf(t, d)
			if len(rs) != c.referrers {
				t.Errorf("%d referrers, want %d", len(rs), c.referrers)
			}
			for _, r := range rs {
				if !isBundleType(r.ArtifactType) || r.Annotations[annBundlePredicate] == "" {
					t.Errorf("referrer %s: artifact type %q, annotations %v", r.Digest, r.ArtifactType, r.Annotations)
				}
			}
			if tagExists(d, sigSuffix) != c.tags || tagExists(d, attSuffix) != c.tags {
				t.Errorf(".sig/.att tags exist: %v/%v, want %v", tagExists(d, sigSuffix), tagExists(d, attSuffix), c.tags)
			}
			res, err := VerifyRelease(context.Background(), d, Trust{Key: pub}, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range append(res.Signatures, res.Attestations...) {
				if !ch.OK || !slices.Equal(ch.Formats, c.checkedForms) {
					t.Errorf("%s: ok=%v %q, formats %v, want %v", ch.What, ch.OK, ch.Why, ch.Formats, c.checkedForms)
				}
			}
			var out bytes.Buffer
			NewVerified(d.String(), res.Checks()).WriteText(&out)
			if !strings.Contains(out.String(), "["+strings.Join(c.checkedForms, " and ")+"]") {
				t.Errorf("verify's text does not name the forms checked:\n%s", out.String())
			}
			// Signing again adds no second bundle signature.
			if _, err := s.Sign(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if n := len(referrersOf(t, d)); n != c.referrers {
				t.Errorf("%d referrers after signing twice, want %d", n, c.referrers)
			}
		})
	}
	if _, err := ParseFormat("sigstore"); err == nil || !strings.Contains(err.Error(), "--signature-format") {
		t.Errorf("ParseFormat(sigstore): %v", err)
	}
}

// A bundle is the single layer of a referrer that names the image as its
// subject, with the predicate type annotated: what cosign v3 reads.
func TestBundleAsCosignStoresIt(t *testing.T) {
	d := pushBuildImage(t, registryHost(t))
	s, _ := keySigner(t, FormatBundle)
	signAndAttest(t, s, d)
	types := map[string]bool{}
	for _, r := range referrersOf(t, d) {
		img, err := remote.Image(d.Context().Digest(r.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		mf, _ := img.Manifest()
		if mf.Subject == nil || mf.Subject.Digest.String() != d.DigestStr() || len(mf.Layers) != 1 {
			t.Fatalf("referrer %s: %+v", r.Digest, mf)
		}
		raw, err := readBlob(img, mf.Layers[0])
		if err != nil {
			t.Fatal(err)
		}
		b := &sgbundle.Bundle{}
		if err := b.UnmarshalJSON(raw); err != nil {
			t.Fatalf("referrer %s is not a Sigstore bundle: %v", r.Digest, err)
		}
		if v, _ := b.Version(); v != "v0.3" {
			t.Errorf("bundle version %s", v)
		}
		var st statement
		if err := json.Unmarshal(b.GetDsseEnvelope().Payload, &st); err != nil {
			t.Fatal(err)
		}
		if st.PredicateType != mf.Annotations[annBundlePredicate] {
			t.Errorf("statement of %s annotated %s", st.PredicateType, mf.Annotations[annBundlePredicate])
		}
		types[st.PredicateType] = true
	}
	for _, want := range []string{ctypes.CosignSignPredicateType, PredicateSPDX, PredicateSLSA1, PredicateScan} {
		if !types[want] {
			t.Errorf("no bundle of %s among %v", want, types)
		}
	}
}

// Of a replaced type the newest bundle counts: a newer one by another key
// fails the check (as the legacy tag replaced by another key does), and a
// newer one by the release key replaces the older.
func TestNewestBundleCounts(t *testing.T) {
	d := pushBuildImage(t, registryHost(t))
	s, pub := keySigner(t, FormatBundle)
	signAndAttest(t, s, d)
	ctx := context.Background()
	if err := s.Attest(ctx, d, PredicateScan, []byte(`{"summary":{"clean":false,"violations":2}}`)); err != nil {
		t.Fatal(err)
	}
	checks, sts, err := attestationChecks(ctx, []name.Digest{d}, Trust{Key: pub})
	if err != nil {
		t.Fatal(err)
	}
	if c := checks[2]; c.OK || !strings.Contains(c.Why, "2 violation(s)") {
		t.Errorf("a newer dirty scan: ok=%v %q", c.OK, c.Why)
	}
	if n := len(sts[d.DigestStr()]); n != 3 {
		t.Errorf("%d statements, want one of each type", n)
	}
	other, _ := keySigner(t, FormatBundle)
	if err := other.Attest(ctx, d, PredicateSPDX, []byte(`{"spdxVersion":"SPDX-2.3"}`)); err != nil {
		t.Fatal(err)
	}
	// Another key's bundle is not the release's: it is not what counts.
	checks, _, _ = attestationChecks(ctx, []name.Digest{d}, Trust{Key: pub})
	if c := checks[0]; !c.OK || !slices.Equal(c.Formats, []string{checkedBundle}) {
		t.Errorf("a newer SPDX bundle by another key beside the release's: ok=%v %q %v", c.OK, c.Why, c.Formats)
	}
}

// A newer scan logged in Rekor wins over an older one by the log's time,
// whatever order the registry lists them in or their referrers claim.
func TestLoggedTimeOrders(t *testing.T) {
	older := Statement{PredicateType: PredicateScan, Predicate: json.RawMessage(`{"summary":{"clean":false,"violations":1}}`), Format: checkedBundle, Time: time.Unix(1000, 0), created: time.Unix(3000, 0)}
	newer := Statement{PredicateType: PredicateScan, Predicate: json.RawMessage(`{"summary":{"clean":true}}`), Format: checkedBundle, Time: time.Unix(2000, 0), created: time.Unix(1, 0)}
	for _, order := range [][]Statement{{older, newer}, {newer, older}} {
		chosen, why := chooseStatement(PredicateScan, order, nil, "")
		if why != "" || len(chosen) != 1 || string(chosen[0].Predicate) != string(newer.Predicate) {
			t.Errorf("chose %+v (%q), want the one the log says is newer", chosen, why)
		}
	}
	// Without the log's time, the referrers' (unsigned) creation orders
	// bundles; a legacy tag and a bundle that differ are refused.
	older.Time, newer.Time = time.Time{}, time.Time{}
	if chosen, why := chooseStatement(PredicateScan, []Statement{newer, older}, nil, ""); why == "" || len(chosen) != 1 {
		t.Errorf("unlogged: chose %+v (%q), want the later-created dirty scan refused", chosen, why)
	}
	legacy := newer
	legacy.Format = checkedLegacy
	if _, why := chooseStatement(PredicateScan, []Statement{legacy, {PredicateType: PredicateScan, Predicate: json.RawMessage(`{"summary":{"clean":true},"x":1}`), Format: checkedBundle}}, nil, ""); !strings.Contains(why, "say different things") {
		t.Errorf("a bundle and a legacy tag that differ: %q", why)
	}
}

// A bundle whose payload was edited does not verify: beside the genuine
// ones it does not count, and alone it is reported as altered.
func TestEditedBundle(t *testing.T) {
	d := pushBuildImage(t, registryHost(t))
	s, pub := keySigner(t, FormatBoth)
	signAndAttest(t, s, d)
	ctx := context.Background()
	edit := func(d name.Digest, b []byte) {
		t.Helper()
		sb := &sgbundle.Bundle{}
		if err := sb.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		env := sb.GetDsseEnvelope()
		env.Payload = bytes.Replace(env.Payload, []byte("SPDX-2.3"), []byte("SPDX-9.9"), 1)
		edited, err := sb.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := writeBundle(ctx, d, edited, PredicateSPDX, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range referrersOf(t, d) {
		if r.Annotations[annBundlePredicate] == PredicateSPDX {
			img, _ := remote.Image(d.Context().Digest(r.Digest.String()))
			mf, _ := img.Manifest()
			raw, _ := readBlob(img, mf.Layers[0])
			edit(d, raw) // a newer referrer than the genuine one
		}
	}
	checks, sts, err := attestationChecks(ctx, []name.Digest{d}, Trust{Key: pub})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !c.OK || len(c.Formats) != 2 {
			t.Errorf("%s beside an edited bundle: ok=%v %q %v", c.What, c.OK, c.Why, c.Formats)
		}
	}
	for _, st := range sts[d.DigestStr()] {
		if bytes.Contains(st.Predicate, []byte("SPDX-9.9")) {
			t.Error("the edited statement is among the verified ones")
		}
	}
	// Only an edited SPDX bundle: altered, not missing.
	e := pushBuildImage(t, registryHost(t))
	bs, _ := keySigner(t, FormatBundle)
	bs.sv = s.sv
	for _, typ := range []string{PredicateScan, PredicateSLSA1} {
		if err := bs.Attest(ctx, e, typ, []byte(releasePredicates[typ])); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := newStatement(e, PredicateSPDX, []byte(releasePredicates[PredicateSPDX]))
	env, entry, pem, err := bs.envelope(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := makeBundle(bs.sv, st, env, pem, entry)
	if err != nil {
		t.Fatal(err)
	}
	edit(e, b)
	checks, _, _ = attestationChecks(ctx, []name.Digest{e}, Trust{Key: pub})
	if c := checks[0]; c.OK || !strings.Contains(c.Why, "attached, but its signature does not verify") {
		t.Errorf("only an edited SPDX bundle: ok=%v %q", c.OK, c.Why)
	}
}

// lyingRegistry serves a registry whose referrers answer for every digest
// is the index set with lie (nil: the truth).
func lyingRegistry(t *testing.T) (string, *[]byte) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var lie []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lie != nil && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/referrers/") {
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			w.Write(lie)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &lie
}

// The referrers list is not signed: a referrer of another manifest listed
// for this one, a bundle over the size bound and more referrers than the
// bound are not verified, and a legacy signature still is.
func TestReferrersThatLie(t *testing.T) {
	host, lie := lyingRegistry(t)
	d := pushBuildImage(t, host)
	e := pushBuildImage(t, host) // another random image
	if e.DigestStr() == d.DigestStr() {
		t.Fatal("two random images with one digest")
	}
	s, pub := keySigner(t, FormatBoth)
	signAndAttest(t, s, e)
	ctx := context.Background()
	eRefs := referrersOf(t, e)
	idx := func(ds []v1.Descriptor) []byte {
		b, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: ds})
		return b
	}
	// d's referrers are said to be e's: e's signature bundle names e.
	*lie = idx(eRefs)
	_, err := readBundles(ctx, d, nil)
	if err == nil || !strings.Contains(err.Error(), "names another subject") {
		t.Errorf("another manifest's referrer: %v", err)
	}
	checks, _ := signatureChecksOf(ctx, d, Trust{Key: pub})
	if len(checks) != 1 || checks[0].OK || !strings.Contains(checks[0].Why, "names another subject") {
		t.Errorf("unsigned d with e's referrers: %+v", checks)
	}
	// The tag fallback as cosign v2.6's go-containerregistry writes it:
	// the config's (empty) media type listed, no annotations. The bundles
	// are still found by their manifests.
	var plain []v1.Descriptor
	for _, r := range eRefs {
		plain = append(plain, v1.Descriptor{MediaType: r.MediaType, Digest: r.Digest, Size: r.Size, ArtifactType: mediaEmpty})
	}
	*lie = idx(plain)
	checks, _ = signatureChecksOf(ctx, e, Trust{Key: pub})
	if len(checks) != 1 || !checks[0].OK || !slices.Contains(checks[0].Formats, checkedBundle) {
		t.Errorf("bundles listed with the empty artifact type: %+v", checks)
	}
	// Too many referrers.
	var many []v1.Descriptor
	for range maxReferrers + 1 {
		many = append(many, eRefs[0])
	}
	*lie = idx(many)
	if _, err := readBundles(ctx, e, nil); err == nil || !strings.Contains(err.Error(), "more than 1000 Sigstore bundles") {
		t.Errorf("%d referrers: %v", len(many), err)
	}
	// The legacy signature of e still verifies beside unreadable referrers.
	checks, _ = signatureChecksOf(ctx, e, Trust{Key: pub})
	if len(checks) != 1 || !checks[0].OK || !slices.Equal(checks[0].Formats, []string{checkedLegacy}) {
		t.Errorf("e's legacy signature beside too many referrers: %+v", checks)
	}
	*lie = nil
	// A bundle over the size bound is refused before it is read.
	mt := types.MediaType("application/vnd.dev.sigstore.bundle.v0.3+json")
	small := static.NewLayer([]byte("{}"), mt)
	if err := remote.WriteLayer(e.Context(), small); err != nil {
		t.Fatal(err)
	}
	sd, _ := small.Digest()
	eh, _ := v1.NewHash(e.DigestStr())
	big := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
		Config:  v1.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Digest: sd, Size: 2},
		Layers:  []v1.Descriptor{{MediaType: mt, Digest: sd, Size: maxLayer + 1}},
		Subject: &v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: eh, Size: 1}}
	raw, _ := json.Marshal(struct {
		v1.Manifest
		ArtifactType string `json:"artifactType"`
	}{big, string(mt)})
	rd, _, _ := v1.SHA256(bytes.NewReader(raw))
	if err := remote.Put(e.Context().Digest(rd.String()), rawManifest(raw)); err != nil {
		t.Fatal(err)
	}
	if _, err := readBundles(ctx, e, nil); err == nil || !strings.Contains(err.Error(), "more than a signature holds") {
		t.Errorf("a bundle of %d bytes: %v", maxLayer+1, err)
	}
	// A config that aliases the layer's digest with another size (the
	// layer would be read by the config's descriptor), and a manifest
	// swollen with annotations: refused before any bundle is read.
	for want, m := range map[string]v1.Manifest{
		"not the empty descriptor": {Config: v1.Descriptor{MediaType: mediaEmpty, Digest: sd, Size: 1 << 40}, Layers: []v1.Descriptor{{MediaType: mt, Digest: sd, Size: 2}}},
		"more than a Sigstore bundle's referrer is": {Config: v1.Descriptor{MediaType: mediaEmpty, Digest: emptyConfig, Size: 2}, Layers: []v1.Descriptor{{MediaType: mt, Digest: sd, Size: 2}},
			Annotations: map[string]string{annCreated: strings.Repeat("9", maxReferrerManifest)}},
	} {
		f := host + "/doris/f" + strings.ReplaceAll(want[:8], " ", "")
		fref, _ := name.ParseReference(f + ":1")
		img := buildImage(t)
		if err := remote.Write(fref, img); err != nil {
			t.Fatal(err)
		}
		fd, _ := img.Digest()
		fdig := fref.Context().Digest(fd.String())
		if err := remote.WriteLayer(fdig.Context(), small); err != nil {
			t.Fatal(err)
		}
		m.SchemaVersion, m.MediaType = 2, types.OCIManifestSchema1
		m.Subject = &v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: fd, Size: 1}
		raw, _ := json.Marshal(struct {
			v1.Manifest
			ArtifactType string `json:"artifactType"`
		}{m, string(mt)})
		rd, _, _ := v1.SHA256(bytes.NewReader(raw))
		if err := remote.Put(fdig.Context().Digest(rd.String()), rawManifest(raw)); err != nil {
			t.Fatal(err)
		}
		if _, err := readBundles(ctx, fdig, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a referrer that is %s: %v", want, err)
		}
	}
}

// rawManifest is an OCI manifest's bytes, to put as they are.
type rawManifest []byte

func (r rawManifest) RawManifest() ([]byte, error)        { return r, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// Key-based signing with a Rekor log: every bundle carries its log entry
// and every legacy layer its Rekor bundle, which sigstore-go checks
// (inclusion proof, checkpoint, signed entry timestamp) against the log's
// key in a trusted root.
func TestKeySignedWithRekor(t *testing.T) {
	f := fakeSigstore(t)
	d := pushBuildImage(t, registryHost(t))
	s, pub := keySigner(t, FormatBoth)
	if _, err := s.WithRekor("http://example.com"); err == nil {
		t.Error("a plain-http Rekor off loopback was accepted")
	}
	if _, err := s.WithRekor(f.Rekor.URL); err != nil {
		t.Fatal(err)
	}
	signAndAttest(t, s, d)
	if f.Logged() != 5 { // the bundle and legacy signatures, three attestations (one envelope each, both forms)
		t.Errorf("%d Rekor entries, want 5", f.Logged())
	}
	bs, err := readBundles(context.Background(), d, nil)
	if err != nil || len(bs) != 4 {
		t.Fatalf("%d bundles: %v", len(bs), err)
	}
	for _, b := range bs {
		if !b.Bundle.HasInclusionProof() {
			t.Errorf("bundle %s has no inclusion proof", b.Manifest)
		}
	}
	// --key with --trusted-root: the log entries are required and checked
	// (inclusion proof, checkpoint, signed entry timestamp) against the
	// root's Rekor key, in both forms.
	tr, err := f.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := tr.MarshalJSON()
	trPath := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(trPath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	withLog := Trust{Key: pub, TrustedRoot: trPath}
	res, err := VerifyRelease(context.Background(), d, withLog, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(res.Signatures, res.Attestations...) {
		if !c.OK || len(c.Formats) != 2 {
			t.Errorf("with the log: %s: ok=%v %q %v", c.What, c.OK, c.Why, c.Formats)
		}
	}
	// What was not logged does not verify against the log.
	e := pushBuildImage(t, registryHost(t))
	unlogged, _ := keySigner(t, FormatBoth)
	unlogged.sv = s.sv // the same key
	signAndAttest(t, unlogged, e)
	if res, err := VerifyRelease(context.Background(), e, withLog, false); err != nil || res.Signatures[0].OK || res.Attestations[0].OK {
		t.Errorf("unlogged signatures checked against the log: %+v %+v %v", res.Signatures, res.Attestations, err)
	}
	if res, err := VerifyRelease(context.Background(), e, Trust{Key: pub}, false); err != nil || !res.Signatures[0].OK || !res.Attestations[0].OK {
		t.Errorf("unlogged signatures with the key alone: %+v %v", res, err)
	}
	// Signed again with the log: an unlogged bundle signature is not taken
	// for the logged one asked for.
	if _, err := s.Sign(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if res, err := VerifyRelease(context.Background(), e, withLog, true); err != nil || !res.Signatures[0].OK || !slices.Contains(res.Signatures[0].Formats, checkedBundle) {
		t.Errorf("re-signed with the log: %+v %v", res, err)
	}
	ls, err := readLayers(context.Background(), d, sigSuffix, nil)
	if err != nil || len(ls) != 1 || ls[0].Annotations[annBundle] == "" {
		t.Errorf("legacy signature layers %+v: %v", ls, err)
	}
}
