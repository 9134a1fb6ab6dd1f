package sign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
)

// sigstore's signature and DSSE packages (what dorisarm used before, and
// what cosign uses) are here only to check that dorisarm's own signing is
// interchangeable with theirs; they are not linked into dorisarm.

func testKeys(t *testing.T) map[string]crypto.Signer {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]crypto.Signer{"ecdsa": ec, "rsa": rk, "ed25519": ed}
}

func TestSignaturesInterchangeWithSigstore(t *testing.T) {
	msg := []byte(`{"critical":{"identity":{"docker-reference":"r"}}}`)
	for name, k := range testKeys(t) {
		ours, err := newPrivKey(k)
		if err != nil {
			t.Fatal(name, err)
		}
		theirs, err := signature.LoadSignerVerifier(k, crypto.SHA256)
		if err != nil {
			t.Fatal(name, err)
		}
		sig, err := ours.sign(msg)
		if err != nil {
			t.Fatal(name, err)
		}
		if err := theirs.VerifySignature(bytes.NewReader(sig), bytes.NewReader(msg)); err != nil {
			t.Errorf("%s: sigstore refuses our signature: %v", name, err)
		}
		sig2, err := theirs.SignMessage(bytes.NewReader(msg))
		if err != nil {
			t.Fatal(name, err)
		}
		if err := ours.verify(sig2, msg); err != nil {
			t.Errorf("%s: we refuse sigstore's signature: %v", name, err)
		}
		if err := ours.verify(sig2, append(msg, ' ')); err == nil {
			t.Errorf("%s: a signature verifies for another message", name)
		}
		sig2[len(sig2)/2] ^= 1
		if err := ours.verify(sig2, msg); err == nil {
			t.Errorf("%s: a changed signature verifies", name)
		}
	}
	if _, err := newPubKey("not a key"); err == nil {
		t.Error("a string as a public key")
	}
}

// Ed25519 signs deterministically, so an envelope signed with it must be
// byte for byte sigstore's (Rekor hashes the envelope as sent).
func TestDSSEMatchesSigstore(t *testing.T) {
	st := []byte(`{"_type":"https://in-toto.io/Statement/v1","predicateType":"x","subject":[],"predicate":{"a":"<&>"}}`)
	for name, k := range testKeys(t) {
		ours, _ := newPrivKey(k)
		theirs, _ := signature.LoadSignerVerifier(k, crypto.SHA256)
		env, err := signDSSE(ours, st)
		if err != nil {
			t.Fatal(name, err)
		}
		if err := dsse.WrapVerifier(theirs).VerifySignature(bytes.NewReader(env), nil); err != nil {
			t.Errorf("%s: sigstore refuses our envelope: %v\n%s", name, err, env)
		}
		want, err := dsse.WrapSigner(theirs, payloadInToto).SignMessage(bytes.NewReader(st))
		if err != nil {
			t.Fatal(name, err)
		}
		if name == "ed25519" && !bytes.Equal(env, want) {
			t.Errorf("the envelope differs from sigstore's:\n%s\n%s", env, want)
		}
	}
}
