package sign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// An envelope signed by the trusted key over another payload type (the
// same key may sign other DSSE documents) is not read as an in-toto
// attestation: cosign refuses any payloadType but in-toto's too.
func TestAttestationPayloadTypeChecked(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := newPrivKey(k)
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
	v := &verifier{key: &priv.pubKey}
	for typ, ok := range map[string]bool{payloadInToto: true, "application/vnd.example.other+json": false, "": false} {
		sig, err := priv.sign(pae(typ, st))
		if err != nil {
			t.Fatal(err)
		}
		env, _ := json.Marshal(envelope{PayloadType: typ, Payload: base64.StdEncoding.EncodeToString(st),
			Signatures: []envelopeSig{{Sig: base64.StdEncoding.EncodeToString(sig)}}})
		_, err = v.verifyAttestation(d, layer{Payload: env})
		if (err == nil) != ok {
			t.Errorf("payloadType %q: err %v, want ok=%v", typ, err, ok)
		}
		if !ok && err != nil && !strings.Contains(err.Error(), "payloadType") {
			t.Errorf("payloadType %q: the error does not name the payloadType: %v", typ, err)
		}
	}
}

// Keys that are no keys or too weak are refused when loaded, with an
// error, never a panic when verifying: an Ed25519 key of the wrong size
// (ed25519.Verify panics on it), ECDSA on P-224, RSA under 2048 bits.
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
			pk, err := newPubKey(k)
			if err == nil {
				err = pk.verify(make([]byte, 64), []byte("m"))
				t.Errorf("%s: accepted (a verification then says %v)", what, err)
			}
		}()
	}
	for name, k := range testKeys(t) {
		if _, err := newPubKey(k.Public()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
