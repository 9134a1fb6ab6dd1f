package sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
)

// keyVerifier is the verifier of a cosign.pub holding pub, as verify
// --key loads it.
func keyVerifier(t *testing.T, pub crypto.PublicKey) (*verifier, error) {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return Trust{Key: f}.verifier(context.Background())
}

// An envelope signed by the trusted key over another payload type (the
// same key may sign other DSSE documents) is not read as an in-toto
// attestation: cosign refuses any payloadType but in-toto's.
func TestAttestationPayloadTypeChecked(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d, err := name.NewDigest("example.com/doris@sha256:" + strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	st, err := newStatement(d, PredicateScan, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := keyVerifier(t, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signature.LoadSigner(k, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	for typ, ok := range map[string]bool{payloadInToto: true, "application/vnd.example.other+json": false, "": false} {
		env, err := dsse.WrapSigner(sv, typ).SignMessage(bytes.NewReader(st))
		if err != nil {
			t.Fatal(err)
		}
		sts, err := v.verifyAttestations(context.Background(), d, []layer{attestationLayer(env, PredicateScan, nil)})
		if (err == nil) != ok {
			t.Errorf("payloadType %q: err %v, want ok=%v", typ, err, ok)
		}
		if ok && (len(sts) != 1 || sts[0].PredicateType != PredicateScan) {
			t.Errorf("payloadType %q: statements %+v", typ, sts)
		}
		if !ok && err != nil && !strings.Contains(err.Error(), "payloadType") {
			t.Errorf("payloadType %q: the error does not name the payloadType: %v", typ, err)
		}
	}
}

// Keys that are no keys or too weak are refused when loaded, with an
// error, never a panic: an Ed25519 key of the wrong size, ECDSA on P-224,
// RSA under 2048 bits.
func TestWeakOrMalformedKeysRefused(t *testing.T) {
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for what, k := range map[string]crypto.PublicKey{
		"ed25519, 31 bytes": ed25519.PublicKey(make([]byte, 31)),
		"ed25519, 33 bytes": ed25519.PublicKey(make([]byte, 33)),
		"ecdsa P-224":       &p224.PublicKey,
		"rsa 1024":          &rsa1024.PublicKey,
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: panic: %v", what, r)
				}
			}()
			if _, err := keyVerifier(t, k); err == nil {
				t.Errorf("%s: accepted", what)
			}
		}()
	}
	for name, k := range testKeys(t) {
		if _, err := keyVerifier(t, k.Public()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Keyless attacks that verification refuses: a certificate from a CA the
// trusted root trusts only outside the Rekor log time; the signature made
// malleable (ECDSA (r, n-s) verifies too) no longer matches the Rekor
// entry; a chain annotation of the attacker's does not make an untrusted
// certificate trusted.
func TestKeylessReviewHolds(t *testing.T) {
	f, _, _, ds := signedIndex(t)
	ctx := context.Background()
	ls, err := readLayers(ctx, ds[1], sigSuffix, nil)
	if err != nil || len(ls) == 0 {
		t.Fatalf("%d layers, %v", len(ls), err)
	}
	l := ls[0]
	verifyWith := func(edit func(*root.TrustedRoot), l layer) error {
		r, err := f.TrustedRoot()
		if err != nil {
			t.Fatal(err)
		}
		edit(r)
		v := &verifier{co: &cosign.CheckOpts{TrustedMaterial: r, Offline: true,
			Identities: []cosign.Identity{{Subject: releaseIdentity, Issuer: f.Issuer}}}}
		_, err = v.verifySignature(ctx, ds[1], l)
		return err
	}
	if err := verifyWith(func(*root.TrustedRoot) {}, l); err != nil {
		t.Fatalf("untouched: %v", err)
	}
	ca := func(r *root.TrustedRoot) *root.FulcioCertificateAuthority {
		return r.FulcioCertificateAuthorities()[0].(*root.FulcioCertificateAuthority)
	}
	for what, edit := range map[string]func(*root.TrustedRoot){
		"the CA trusted from an hour on":   func(r *root.TrustedRoot) { ca(r).ValidityPeriodStart = time.Now().Add(time.Hour) },
		"the CA trusted until an hour ago": func(r *root.TrustedRoot) { ca(r).ValidityPeriodEnd = time.Now().Add(-time.Hour) },
		"the Rekor log trusted from an hour on": func(r *root.TrustedRoot) {
			for _, lg := range r.RekorLogs() {
				lg.ValidityPeriodStart = time.Now().Add(time.Hour)
			}
		},
	} {
		if err := verifyWith(edit, l); err == nil {
			t.Errorf("%s: verified", what)
		}
	}

	sig, _ := base64.StdEncoding.DecodeString(l.Annotations[annSignature])
	var es struct{ R, S *big.Int }
	if _, err := asn1.Unmarshal(sig, &es); err != nil {
		t.Fatal(err)
	}
	es.S.Sub(elliptic.P256().Params().N, es.S)
	mall, _ := asn1.Marshal(es)
	blk, _ := pem.Decode([]byte(l.Annotations[annCertificate]))
	cert, _ := x509.ParseCertificate(blk.Bytes)
	if !ecdsa.VerifyASN1(cert.PublicKey.(*ecdsa.PublicKey), sha256Sum(l.Payload), mall) {
		t.Fatal("the malleated signature does not verify: the test is wrong")
	}
	m := layer{Payload: l.Payload, MediaType: l.MediaType, Annotations: maps.Clone(l.Annotations)}
	m.Annotations[annSignature] = base64.StdEncoding.EncodeToString(mall)
	if err := verifyWith(func(*root.TrustedRoot) {}, m); err == nil {
		t.Error("a malleated signature (not the one Rekor logged) verified")
	}

	c := layer{Payload: l.Payload, MediaType: l.MediaType, Annotations: maps.Clone(l.Annotations)}
	c.Annotations[annChain] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
	if err := verifyWith(func(r *root.TrustedRoot) {}, c); err == nil {
		t.Error("a garbage chain annotation verified")
	}
}

func sha256Sum(b []byte) []byte { h := sha256.Sum256(b); return h[:] }
