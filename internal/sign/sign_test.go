package sign

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

func registryHost(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// signatureChecksOf is VerifyRelease's signature checks of ref (signatures
// only), nil when it failed before checking any.
func signatureChecksOf(ctx context.Context, ref name.Reference, trust Trust) ([]Check, error) {
	res, err := VerifyRelease(ctx, ref, trust, true)
	if res == nil {
		return nil, err
	}
	return res.Signatures, err
}

// statementsOf is what VerifyRelease verified of the attestations of d, a
// manifest made from a build: its statements and its attestation checks.
func statementsOf(t *testing.T, ctx context.Context, d name.Digest, trust Trust) ([]Statement, []Check) {
	t.Helper()
	res, err := VerifyRelease(ctx, d, trust, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attestations) == 0 {
		t.Fatalf("%s: no attestation checks (is it annotated as made from a build?)", d)
	}
	return res.Statements[d.DigestStr()], res.Attestations
}

// buildImage is a random image annotated as made from a build, so that
// VerifyRelease checks its attestations.
func buildImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	return mutate.Annotations(img, map[string]string{image.AnnBuild: "sha256:" + strings.Repeat("b", 64)}).(v1.Image)
}

func TestSignAndVerifyIndex(t *testing.T) {
	host := registryHost(t)
	idx, err := random.Index(100, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(host + "/doris/doris-be:2.1.8")
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv, pub, err := Keygen(dir, []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Keygen(dir, []byte("x")); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("keygen over an existing key: %v", err)
	}
	ctx := context.Background()

	// Unsigned: every check fails.
	checks, err := signatureChecksOf(ctx, ref, Trust{Key: pub})
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 3 || checks[0].OK {
		t.Fatalf("unsigned index: %+v", checks)
	}
	if _, err := LoadSigner(priv, []byte("wrong")); err == nil || !strings.Contains(err.Error(), "COSIGN_PASSWORD") {
		t.Errorf("wrong password: %v", err)
	}
	s, err := LoadSigner(priv, []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	signed, err := s.Sign(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(signed) != 3 {
		t.Fatalf("signed %d digests, want the index and its 2 manifests", len(signed))
	}
	checks, _ = signatureChecksOf(ctx, ref, Trust{Key: pub})
	for _, c := range checks {
		if !c.OK {
			t.Errorf("%s: %s", c.What, c.Why)
		}
	}
	// Another key's public half does not verify.
	_, otherPub, _ := Keygen(filepath.Join(dir, "other"), []byte("x"))
	checks, _ = signatureChecksOf(ctx, ref, Trust{Key: otherPub})
	for _, c := range checks {
		if c.OK {
			t.Errorf("%s verified with another key", c.What)
		}
	}
	// Signing twice adds no second signature layer.
	if _, err := s.Sign(ctx, ref); err != nil {
		t.Fatal(err)
	}
	sigTag, _ := name.ParseReference(host + "/doris/doris-be:" + strings.ReplaceAll(signed[0].DigestStr(), ":", "-") + ".sig")
	img, err := remote.Image(sigTag)
	if err != nil {
		t.Fatalf("no cosign signature tag %s: %v", sigTag, err)
	}
	if ls, _ := img.Layers(); len(ls) != 1 {
		t.Errorf("signature image has %d layers after signing twice", len(ls))
	}
}

func TestAttestAndVerify(t *testing.T) {
	host := registryHost(t)
	img := buildImage(t)
	ref, _ := name.ParseReference(host + "/doris/doris-be:2.1.8-kunpeng920")
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	dg, _ := img.Digest()
	d := ref.Context().Digest(dg.String())
	dir := t.TempDir()
	priv, pub, _ := Keygen(dir, []byte("pw"))
	_, otherPub, _ := Keygen(filepath.Join(dir, "o"), []byte("pw"))
	s, err := LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Attest(ctx, d, PredicateScan, []byte("not json")); err == nil {
		t.Error("a non-JSON predicate was attested")
	}
	for i, p := range []string{`{"clean":false}`, `{"clean":true}`} { // the second replaces the first
		if err := s.Attest(ctx, d, PredicateScan, []byte(p)); err != nil {
			t.Fatal(i, err)
		}
	}
	if err := s.Attest(ctx, d, PredicateSPDX, []byte(`{"spdxVersion":"SPDX-2.3"}`)); err != nil {
		t.Fatal(err)
	}
	sts, _ := statementsOf(t, ctx, d, Trust{Key: pub})
	got := map[string]string{}
	for _, st := range sts {
		if st.Subject != dg.String() {
			t.Errorf("%s: subject %s, want %s", st.PredicateType, st.Subject, dg)
		}
		got[st.PredicateType] += string(st.Predicate)
	}
	if len(sts) != 2 || got[PredicateScan] != `{"clean":true}` || got[PredicateSPDX] == "" {
		t.Errorf("attestations: %v", got)
	}
	if sts, checks := statementsOf(t, ctx, d, Trust{Key: otherPub}); len(sts) != 0 || checks[0].OK || checks[1].OK || checks[2].OK {
		t.Errorf("attestations verified with another key: %v %+v", sts, checks)
	}
}

func TestTrustConfiguration(t *testing.T) {
	for _, c := range []struct {
		t    Trust
		want string
	}{
		{Trust{}, "give --key cosign.pub, or --certificate-identity"},
		{Trust{Identity: "x"}, "give --key cosign.pub, or --certificate-identity"},
		{Trust{Key: "k", Issuer: "i"}, "not both"},
		{Trust{Identity: "x", IdentityRegexp: "y", Issuer: "i"}, "give --key cosign.pub, or --certificate-identity"},
		{Trust{IdentityRegexp: "(", Issuer: "i"}, "--certificate-identity-regexp"},
	} {
		if err := c.t.Validate(); !fault.IsInput(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want bad input saying %q", c.t, err, c.want)
		}
	}
	if err := (Trust{Key: "k"}).Validate(); err != nil {
		t.Errorf("a key alone: %v", err)
	}
	// Keyless: identity and issuer matched, the log and SCT required, the
	// trusted root fetched (stubbed: it needs the network).
	saved := trustedRoot
	defer func() { trustedRoot = saved }()
	trustedRoot = func() (root.TrustedMaterial, error) { return nil, errors.New("no network") }
	kl := Trust{Identity: "https://github.com/dorisarm/dorisarm/.github/workflows/release.yml@refs/tags/v1", Issuer: "https://token.actions.githubusercontent.com"}
	if _, err := kl.verifier(context.Background()); err == nil || !strings.Contains(err.Error(), "trusted root") {
		t.Errorf("keyless without the trusted root: %v", err)
	}
	tr := &root.TrustedRoot{}
	trustedRoot = func() (root.TrustedMaterial, error) { return tr, nil }
	v, err := kl.verifier(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []cosign.Identity{{Subject: kl.Identity, Issuer: kl.Issuer}}
	if v.co.SigVerifier != nil || v.co.TrustedMaterial != tr || !slices.Equal(v.co.Identities, want) || v.co.IgnoreTlog || v.co.IgnoreSCT || !v.co.Offline {
		t.Errorf("keyless verifier: %+v", v.co)
	}
	kl.Identity, kl.IdentityRegexp = "", "^https://github.com/dorisarm/"
	want = []cosign.Identity{{SubjectRegExp: kl.IdentityRegexp, Issuer: kl.Issuer}}
	if v, err := kl.verifier(context.Background()); err != nil || !slices.Equal(v.co.Identities, want) {
		t.Errorf("keyless verifier with an identity regexp: %+v %v", v, err)
	}
}

func TestKeylessConfiguration(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if _, err := (Keyless{}).Resolve(getenv); err == nil || !strings.Contains(err.Error(), "id-token: write") {
		t.Errorf("no token anywhere: %v", err)
	}
	env["ACTIONS_ID_TOKEN_REQUEST_URL"] = "https://pipelines.actions.githubusercontent.com/x"
	if _, err := (Keyless{}).Resolve(getenv); err == nil || !strings.Contains(err.Error(), "ACTIONS_ID_TOKEN_REQUEST_TOKEN") {
		t.Errorf("GitHub's token endpoint without its bearer token: %v", err)
	}
	env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = "bearer"
	k, err := (Keyless{}).Resolve(getenv)
	if err != nil {
		t.Fatal(err)
	}
	if k.FulcioURL != "https://fulcio.sigstore.dev" || k.RekorURL != "https://rekor.sigstore.dev" || k.OIDCIssuer != "https://oauth2.sigstore.dev/auth" || k.IDToken != "" {
		t.Errorf("GitHub Actions defaults: %+v", k)
	}
	delete(env, "ACTIONS_ID_TOKEN_REQUEST_URL")
	env["SIGSTORE_ID_TOKEN"] = "tok"
	k, err = (Keyless{FulcioURL: "https://fulcio.internal", RekorURL: "http://127.0.0.1:3000"}).Resolve(getenv)
	if err != nil || k.IDToken != "tok" || k.FulcioURL != "https://fulcio.internal" || k.RekorURL != "http://127.0.0.1:3000" {
		t.Errorf("private instance with a token from the environment: %+v %v", k, err)
	}
	for _, bad := range []Keyless{{RekorURL: "http://rekor.example.com"}, {RekorURL: "ftp://127.0.0.1/x"}, {RekorURL: "rekor.example.com"}} {
		if _, err := bad.Resolve(getenv); err == nil || !strings.Contains(err.Error(), "--rekor-url") {
			t.Errorf("Rekor %q: %v", bad.RekorURL, err)
		}
	}
	if _, err := (Keyless{FulcioURL: "http://fulcio.example.com"}).Resolve(getenv); err == nil || !strings.Contains(err.Error(), "--fulcio-url") {
		t.Errorf("plain http Fulcio: %v", err)
	}
	if _, err := (Keyless{OIDCIssuer: "http://issuer.example.com"}).Resolve(getenv); err == nil || !strings.Contains(err.Error(), "--oidc-issuer") {
		t.Errorf("plain http issuer: %v", err)
	}
	if k, _ := (Keyless{IDToken: "flag"}).Resolve(getenv); k.IDToken != "flag" {
		t.Errorf("--identity-token must win over the environment: %q", k.IDToken)
	}
}

// A verification key is checked by goodkey's policy (boulder's, as Fulcio
// uses), not only by its size: an RSA key with an exponent other than
// 65537, which the deprecated cryptoutils check let through, and a curve
// outside P-256/384/521 are refused, naming the file.
func TestVerificationKeyPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, pub crypto.PublicKey) string {
		t.Helper()
		pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(pub)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pemBytes, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ec256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e3 := &rsa.PublicKey{N: rk.N, E: 3}
	for _, c := range []struct {
		name string
		pub  crypto.PublicKey
		ok   bool
	}{
		{"p256.pub", &ec256.PublicKey, true},
		{"rsa2048.pub", &rk.PublicKey, true},
		{"rsa-e3.pub", e3, false},
		{"p224.pub", &ec224.PublicKey, false},
	} {
		p := write(c.name, c.pub)
		_, err := Trust{Key: p}.verifier(context.Background())
		if c.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), p)) {
			t.Errorf("%s: %v, want ok=%v (an error naming the file)", c.name, err, c.ok)
		}
	}
}
