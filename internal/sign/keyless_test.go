package sign

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	cbundle "github.com/sigstore/cosign/v2/pkg/cosign/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/dorisarm/dorisarm/internal/sign/fakesigstore"
)

// These tests run against fakesigstore (a fake Fulcio, Rekor and OIDC
// issuer with throw-away keys), never the real Sigstore.

func fakeSigstore(t *testing.T) *fakesigstore.Server {
	t.Helper()
	f, err := fakesigstore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	saved, savedRetries := trustedRoot, rekorRetries
	trustedRoot = ours(f.TrustedRoot)
	rekorRetries = 0
	t.Cleanup(func() { trustedRoot, rekorRetries = saved, savedRetries })
	return f
}

// ours is a trusted root that sigstore-go wrote (as JSON), read back as
// dorisarm reads the one from TUF or --trusted-root.
func ours(tm func() (*root.TrustedRoot, error)) func() (root.TrustedMaterial, error) {
	return func() (root.TrustedMaterial, error) {
		tr, err := tm()
		if err != nil {
			return nil, err
		}
		js, err := tr.MarshalJSON()
		if err != nil {
			return nil, err
		}
		return root.NewTrustedRootFromJSON(js)
	}
}

func noEnv(string) string { return "" }

// pushIndex pushes an index of two images and returns its tag.
func pushIndex(t *testing.T) name.Reference {
	t.Helper()
	// Two images made from builds, so that their attestations are checked.
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: buildImage(t)}, mutate.IndexAddendum{Add: buildImage(t)})
	ref, _ := name.ParseReference(registryHost(t) + "/doris/doris-be:2.1.8")
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	return ref
}

// sigTags says which of ds have a cosign signature (.sig) or attestation
// (.att) tag.
func hasTag(t *testing.T, d name.Digest, suffix string) bool {
	t.Helper()
	tag := d.Context().Tag(strings.ReplaceAll(d.DigestStr(), ":", "-") + suffix)
	_, err := remote.Head(tag)
	return err == nil
}

const releaseIdentity = "https://github.com/dorisarm/dorisarm/.github/workflows/release.yml@refs/tags/v1"

// signedIndex is an index pushed and signed by releaseSigner on a fresh
// fake Sigstore, with the digests signed (the index and its manifests).
func signedIndex(t *testing.T) (*fakesigstore.Server, name.Reference, *KeylessSigner, []name.Digest) {
	t.Helper()
	f := fakeSigstore(t)
	ref := pushIndex(t)
	s := releaseSigner(t, f)
	ds, err := s.Sign(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return f, ref, s, ds
}

// releaseSigner is a keyless signer for releaseIdentity on the fake Sigstore.
func releaseSigner(t *testing.T, f *fakesigstore.Server) *KeylessSigner {
	t.Helper()
	s, err := NewKeylessSigner(Keyless{FulcioURL: f.Fulcio.URL, RekorURL: f.Rekor.URL, IDToken: f.Token(releaseIdentity)}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKeylessSignAttestVerify(t *testing.T) {
	f, ref, s, ds := signedIndex(t)
	ctx := context.Background()
	// Both formats: a dsse entry (the bundle's statement) and a
	// hashedrekord entry (the legacy payload) a digest.
	if len(ds) != 3 || f.Logged() != 6 {
		t.Fatalf("signed %d digests with %d Rekor entries, want the index and its 2 manifests, each logged in both formats", len(ds), f.Logged())
	}
	trust := Trust{Identity: releaseIdentity, Issuer: f.Issuer}
	checks, err := signatureChecksOf(ctx, ref, trust)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !c.OK || !slices.Equal(c.Formats, []string{checkedBundle, checkedLegacy}) {
			t.Errorf("%s: %s %v, want the bundle and the legacy tag verified", c.What, c.Why, c.Formats)
		}
	}
	// The identity, the issuer, the trusted root (CA, Rekor key) and the SCT
	// (the CT log's key) each matter.
	for what, tr := range map[string]Trust{
		"another identity":                       {Identity: "https://github.com/evil/fork/.github/workflows/release.yml@refs/tags/v1", Issuer: f.Issuer},
		"another issuer":                         {Identity: releaseIdentity, Issuer: "https://token.actions.githubusercontent.com"},
		"an identity regexp that does not match": {IdentityRegexp: "^https://github.com/evil/", Issuer: f.Issuer},
	} {
		checks, _ := signatureChecksOf(ctx, ref, tr)
		for _, c := range checks {
			if c.OK {
				t.Errorf("%s: %s verified", what, c.What)
			}
		}
	}
	if checks, _ := signatureChecksOf(ctx, ref, Trust{IdentityRegexp: "^https://github.com/dorisarm/", Issuer: f.Issuer}); len(checks) != 3 || !checks[0].OK {
		t.Errorf("identity regexp: %+v", checks)
	}
	other, err := fakesigstore.New()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for what, tm := range map[string]func() (*root.TrustedRoot, error){"another Sigstore's root": other.TrustedRoot, "a root without the CT log": f.TrustedRootWithoutCT} {
		trustedRoot = ours(tm)
		checks, _ := signatureChecksOf(ctx, ref, trust)
		if len(checks) == 0 || checks[0].OK {
			t.Errorf("%s: %+v", what, checks)
		}
	}
	// A trusted_root.json given (--trusted-root) instead of TUF's.
	trustedRoot = func() (root.TrustedMaterial, error) { return nil, errors.New("no network") }
	tr, _ := f.TrustedRoot()
	js, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	trPath := filepath.Join(t.TempDir(), "trusted_root.json")
	os.WriteFile(trPath, js, 0o644)
	withFile := trust
	withFile.TrustedRoot = trPath
	if checks, err := signatureChecksOf(ctx, ref, withFile); err != nil || len(checks) != 3 || !checks[0].OK || !checks[2].OK {
		t.Errorf("--trusted-root: %+v %v", checks, err)
	}
	withFile.TrustedRoot = filepath.Join(t.TempDir(), "missing.json")
	if _, err := signatureChecksOf(ctx, ref, withFile); err == nil || !strings.Contains(err.Error(), "--trusted-root") {
		t.Errorf("a missing --trusted-root: %v", err)
	}
	trustedRoot = ours(f.TrustedRoot)

	// The stored form is cosign's: certificate, chain and Rekor bundle.
	se, err := remote.Image(ds[1].Context().Tag(strings.ReplaceAll(ds[1].DigestStr(), ":", "-") + ".sig"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := se.Manifest()
	if len(m.Layers) != 1 {
		t.Fatalf("signature image has %d layers", len(m.Layers))
	}
	for _, k := range []string{"dev.sigstore.cosign/certificate", "dev.sigstore.cosign/chain", "dev.sigstore.cosign/bundle", "dev.cosignproject.cosign/signature"} {
		if m.Layers[0].Annotations[k] == "" {
			t.Errorf("signature layer lacks %s: %v", k, m.Layers[0].Annotations)
		}
	}

	// Attestations: DSSE entries in Rekor, the same predicate type replaced.
	d := ds[1]
	for i, p := range []string{`{"clean":false}`, `{"clean":true}`} {
		if err := s.Attest(ctx, d, PredicateScan, []byte(p)); err != nil {
			t.Fatal(i, err)
		}
	}
	if err := s.Attest(ctx, d, PredicateSPDX, []byte(`{"spdxVersion":"SPDX-2.3"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Attest(ctx, d, PredicateSPDX, []byte(`not json`)); err == nil {
		t.Error("a non-JSON predicate was attested")
	}
	// An attestation's one envelope and entry serve both formats.
	if f.Logged() != 9 {
		t.Errorf("%d Rekor entries after 3 signatures in two formats and 3 attestations", f.Logged())
	}
	sts, _ := statementsOf(t, ctx, d, trust)
	got := map[string]string{}
	for _, st := range sts {
		if st.Subject != d.DigestStr() {
			t.Errorf("%s: subject %s, want %s", st.PredicateType, st.Subject, d.DigestStr())
		}
		got[st.PredicateType] += string(st.Predicate)
	}
	if len(sts) != 2 || got[PredicateScan] != `{"clean":true}` || got[PredicateSPDX] == "" {
		t.Errorf("attestations: %v", got)
	}
	if sts, checks := statementsOf(t, ctx, d, Trust{Identity: "someone@example.com", Issuer: f.Issuer}); len(sts) != 0 || checks[0].OK || checks[1].OK || checks[2].OK {
		t.Errorf("attestations verified for another identity: %v %+v", sts, checks)
	}
	att, err := remote.Image(d.Context().Tag(strings.ReplaceAll(d.DigestStr(), ":", "-") + ".att"))
	if err != nil {
		t.Fatal(err)
	}
	am, _ := att.Manifest()
	for _, l := range am.Layers {
		if l.MediaType != "application/vnd.dsse.envelope.v1+json" || l.Annotations["predicateType"] == "" || l.Annotations["dev.sigstore.cosign/bundle"] == "" || l.Annotations["dev.sigstore.cosign/certificate"] == "" {
			t.Errorf("attestation layer: %s %v", l.MediaType, l.Annotations)
		}
	}
}

// TestKeylessGitHubActionsToken: with no token given, the signer fetches
// GitHub Actions' (audience sigstore) and the certificate names the
// workflow it identifies.
func TestKeylessGitHubActionsToken(t *testing.T) {
	f := fakeSigstore(t)
	ref := pushIndex(t)
	ctx := context.Background()
	env := map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": f.Actions.URL + "/token?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "wrong"}
	s, err := NewKeylessSigner(Keyless{FulcioURL: f.Fulcio.URL, RekorURL: f.Rekor.URL}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sign(ctx, ref); err == nil || !strings.Contains(err.Error(), "id-token: write") {
		t.Errorf("a refused token request: %v", err)
	}
	env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = f.ActionsBearer
	if _, err := s.Sign(ctx, ref); err != nil {
		t.Fatal(err)
	}
	checks, _ := signatureChecksOf(ctx, ref, Trust{Identity: f.ActionsIdentity, Issuer: f.Issuer})
	for _, c := range checks {
		if !c.OK {
			t.Errorf("%s: %s", c.What, c.Why)
		}
	}
}

// TestKeylessFailures: Fulcio refusing, Rekor down or failing half-way and
// no token give errors that say what failed, and nothing reaches the
// registry.
func TestKeylessFailures(t *testing.T) {
	f := fakeSigstore(t)
	ctx := context.Background()
	ref := pushIndex(t)
	ds, err := Digests(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	nothingWritten := func(what string) {
		t.Helper()
		for _, d := range ds {
			if hasTag(t, d, ".sig") || hasTag(t, d, ".att") {
				t.Errorf("%s: %s has a signature or attestation", what, d)
			}
		}
	}
	if _, err := NewKeylessSigner(Keyless{FulcioURL: f.Fulcio.URL, RekorURL: f.Rekor.URL}, noEnv); err == nil || !strings.Contains(err.Error(), "needs an OIDC token") {
		t.Errorf("no token: %v", err)
	}

	f.Refuse("token revoked")
	s := releaseSigner(t, f)
	if _, err := s.Sign(ctx, ref); err == nil || !strings.Contains(err.Error(), "refused by Fulcio") || !strings.Contains(err.Error(), "token revoked") {
		t.Errorf("Fulcio refusing: %v", err)
	}
	if err := s.Attest(ctx, ds[1], PredicateScan, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "refused by Fulcio") {
		t.Errorf("Fulcio refusing an attestation: %v", err)
	}
	nothingWritten("Fulcio refusing")
	f.Refuse("")

	// A token from another issuer (not the fake's key) is refused too.
	forged := strings.Split(f.Token(releaseIdentity), ".")
	other, _ := fakesigstore.New()
	defer other.Close()
	otherTok := strings.Split(other.Token(releaseIdentity), ".")
	s, _ = NewKeylessSigner(Keyless{FulcioURL: f.Fulcio.URL, RekorURL: f.Rekor.URL, IDToken: forged[0] + "." + forged[1] + "." + otherTok[2]}, noEnv)
	if _, err := s.Sign(ctx, ref); err == nil || !strings.Contains(err.Error(), "refused by Fulcio") {
		t.Errorf("a forged token: %v", err)
	}
	if _, err := (&KeylessSigner{cfg: Keyless{IDToken: "not-a-jwt"}}).Sign(ctx, ref); err == nil || !strings.Contains(err.Error(), "not a JWT") {
		t.Errorf("a token that is not a JWT: %v", err)
	}
	nothingWritten("bad tokens")

	// Rekor down.
	down, _ := fakesigstore.New()
	down.Close()
	s, _ = NewKeylessSigner(Keyless{FulcioURL: f.Fulcio.URL, RekorURL: down.Rekor.URL, IDToken: f.Token(releaseIdentity)}, noEnv)
	if _, err := s.Sign(ctx, ref); err == nil || !strings.Contains(err.Error(), "Rekor "+down.Rekor.URL) {
		t.Errorf("Rekor down: %v", err)
	}
	if err := s.Attest(ctx, ds[1], PredicateScan, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "Rekor "+down.Rekor.URL) {
		t.Errorf("Rekor down, attesting: %v", err)
	}
	nothingWritten("Rekor down")

	// Rekor failing after the index's entry: no digest gets a signature,
	// not even those logged.
	f.FailRekorAfter(f.Logged() + 1)
	s = releaseSigner(t, f)
	if _, err := s.Sign(ctx, ref); err == nil || !strings.Contains(err.Error(), "Rekor "+f.Rekor.URL) {
		t.Errorf("Rekor failing half-way: %v", err)
	}
	nothingWritten("Rekor failing half-way")
}

// TestKeylessTampered: a Rekor bundle moved from another signature, a
// signed entry timestamp altered, or a certificate swapped for another one
// of the same CA does not verify; the signature left alone still does.
func TestKeylessTampered(t *testing.T) {
	f, _, _, ds := signedIndex(t)
	ctx := context.Background()
	other := releaseSigner(t, f)
	if _, err := other.Sign(ctx, ds[2]); err != nil { // a second signature of ds[2], with another key and certificate
		t.Fatal(err)
	}
	layers := func(d name.Digest) []layer {
		ls, err := readLayers(ctx, d, sigSuffix, nil)
		if err != nil || len(ls) == 0 {
			t.Fatalf("%s: %d layers, %v", d, len(ls), err)
		}
		return ls
	}
	second := layers(ds[2])
	v, err := Trust{Identity: releaseIdentity, Issuer: f.Issuer}.verifier(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for what, edit := range map[string]func(l layer) layer{
		"another signature's Rekor bundle": func(l layer) layer { l.Annotations[annBundle] = layers(ds[0])[0].Annotations[annBundle]; return l },
		"an altered signed entry timestamp": func(l layer) layer {
			var b cbundle.RekorBundle
			json.Unmarshal([]byte(l.Annotations[annBundle]), &b)
			b.Payload.IntegratedTime++
			js, _ := json.Marshal(b)
			l.Annotations[annBundle] = string(js)
			return l
		},
		"another certificate of the same CA": func(l layer) layer { l.Annotations[annCertificate] = second[1].Annotations[annCertificate]; return l },
		"no bundle":                          func(l layer) layer { delete(l.Annotations, annBundle); return l },
	} {
		l := layers(ds[1])[0]
		if _, err := v.verifySignature(ctx, ds[1], edit(l)); err == nil {
			t.Errorf("%s: verified", what)
		} else {
			t.Logf("%s: %v", what, err)
		}
	}
	if _, err := v.verifySignature(ctx, ds[1], layers(ds[1])[0]); err != nil {
		t.Errorf("the untouched signature: %v", err)
	}
	// A signature of one digest does not verify for another.
	if _, err := v.verifySignature(ctx, ds[0], layers(ds[1])[0]); err == nil || !strings.Contains(err.Error(), "invalid or missing digest in claim") {
		t.Errorf("a signature of another digest: %v", err)
	}
}

// TestRekorMalformedAnswers: a Rekor that answers 201 with something other
// than one well-formed entry is an error that names it, never a crash.
func TestRekorMalformedAnswers(t *testing.T) {
	for _, body := range []string{`{}`, `not json`, `{"a":{}}`, `{"a":{"body":"eyJ9","integratedTime":1,"logID":"ab","logIndex":0}}`,
		`{"a":{"body":"eyJ9","integratedTime":1,"logID":"ab","logIndex":0,"verification":{}}}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, body)
		}))
		r, err := newRekorLog(srv.URL, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.uploadSignature(context.Background(), []byte("x"), []byte("sig"), []byte("cert")); err == nil || !strings.Contains(err.Error(), "Rekor "+srv.URL) {
			t.Errorf("%s: %v", body, err)
		} else {
			t.Logf("%s: %v", body, err)
		}
		srv.Close()
	}
}

// TestTokenSubject: the identity a token's claims give Fulcio — a verified
// e-mail address, else the subject — and the tokens refused.
func TestTokenSubject(t *testing.T) {
	for _, c := range []struct {
		claims, want, err string
	}{
		{`{"email":"rm@example.org","email_verified":true,"sub":"123"}`, "rm@example.org", ""},
		{`{"email":"rm@example.org","email_verified":"True"}`, "rm@example.org", ""},
		{`{"email":"rm@example.org","email_verified":false,"sub":"123"}`, "", "not verified"},
		{`{"email":"rm@example.org","sub":"123"}`, "", "email_verified is missing"},
		{`{"sub":"repo:apache/doris:ref:refs/heads/main"}`, "repo:apache/doris:ref:refs/heads/main", ""},
		{`{"iss":"https://token.actions.githubusercontent.com"}`, "", "no sub claim"},
		{`not json`, "", "invalid character"},
	} {
		got, err := tokenSubject([]byte(c.claims))
		if got != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("tokenSubject(%s) = %q, %v; want %q, error with %q", c.claims, got, err, c.want, c.err)
		}
	}
}

// TestKeylessFreshTokenPerCertificate: GitHub's OIDC tokens expire
// minutes after they are fetched, long before a release's signing ends.
// A token fetched at the start of a job and handed in (SIGSTORE_ID_TOKEN)
// is refused once expired; with the runner's token endpoint (what the
// workflows now pass to the module) every certificate gets a token fetched
// for it, and signing after the first token expired still works.
func TestKeylessFreshTokenPerCertificate(t *testing.T) {
	f := fakeSigstore(t)
	// Tokens live a second; certificates two minutes, so every signature
	// needs a certificate of its own (the signer renews one with less
	// than two minutes left) and so a token.
	f.TokenTTL, f.CertTTL = time.Second, 2*time.Minute
	ref := pushIndex(t)
	ctx := context.Background()

	early := f.Token(f.ActionsIdentity) // fetched when the job started
	time.Sleep(1100 * time.Millisecond)
	s, err := NewKeylessSigner(Keyless{FulcioURL: f.Fulcio.URL, RekorURL: f.Rekor.URL, IDToken: early}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sign(ctx, ref); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("signing with a token that expired: %v, want Fulcio's refusal", err)
	}

	env := map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": f.Actions.URL + "/token?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": f.ActionsBearer}
	s, err = NewKeylessSigner(Keyless{FulcioURL: f.Fulcio.URL, RekorURL: f.Rekor.URL}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	digests, err := s.Sign(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	served := f.ActionsServed.Load()
	if served < int64(len(digests)) {
		t.Errorf("%d digests signed with %d tokens fetched: want one per certificate", len(digests), served)
	}
	time.Sleep(1100 * time.Millisecond) // every token fetched so far has expired
	if _, err := s.Sign(ctx, ref); err != nil {
		t.Errorf("signing after the first tokens expired: %v", err)
	}
	if f.ActionsServed.Load() <= served {
		t.Error("no fresh token was fetched for the later certificates")
	}
	checks, _ := signatureChecksOf(ctx, ref, Trust{Identity: f.ActionsIdentity, Issuer: f.Issuer})
	for _, c := range checks {
		if !c.OK {
			t.Errorf("%s: %s", c.What, c.Why)
		}
	}
}
