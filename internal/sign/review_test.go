package sign

import (
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
	"encoding/json"
	"encoding/pem"
	"maps"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/dorisarm/dorisarm/internal/trustroot"
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

// Keyless attacks that verification already refuses: a certificate from
// a CA the trusted root trusts only outside the Rekor log time; the
// signature made malleable (ECDSA (r, n-s) verifies too) no longer
// matches the Rekor entry; a chain annotation of the attacker's is not
// used (only the trusted root's intermediates are).
func TestKeylessReviewHolds(t *testing.T) {
	f, _, _, ds := signedIndex(t)
	ctx := context.Background()
	ls, err := readLayers(ctx, ds[1], sigSuffix, nil)
	if err != nil || len(ls) == 0 {
		t.Fatalf("%d layers, %v", len(ls), err)
	}
	l := ls[0]
	verifyWith := func(edit func(*trustroot.Root), l layer) error {
		r, err := ours(f.TrustedRoot)()
		if err != nil {
			t.Fatal(err)
		}
		edit(r)
		v := &verifier{tm: r, identity: releaseIdentity, issuer: f.Issuer}
		return v.verifySignature(ds[1], l)
	}
	if err := verifyWith(func(*trustroot.Root) {}, l); err != nil {
		t.Fatalf("untouched: %v", err)
	}
	for what, edit := range map[string]func(*trustroot.Root){
		"the CA trusted from an hour on":   func(r *trustroot.Root) { r.CAs[0].Start = time.Now().Add(time.Hour) },
		"the CA trusted until an hour ago": func(r *trustroot.Root) { r.CAs[0].End = time.Now().Add(-time.Hour) },
		"the Rekor log trusted from an hour on": func(r *trustroot.Root) {
			for _, lg := range r.Tlogs {
				lg.Start = time.Now().Add(time.Hour)
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
	m := layer{Payload: l.Payload, Annotations: maps.Clone(l.Annotations)}
	m.Annotations[annSignature] = base64.StdEncoding.EncodeToString(mall)
	if err := verifyWith(func(*trustroot.Root) {}, m); err == nil || !strings.Contains(err.Error(), "another signature") {
		t.Errorf("a malleated signature: %v", err)
	}

	c := layer{Payload: l.Payload, Annotations: maps.Clone(l.Annotations)}
	c.Annotations[annChain] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
	if err := verifyWith(func(r *trustroot.Root) {}, c); err != nil {
		t.Errorf("the chain annotation is read: %v", err)
	}
}

func sha256Sum(b []byte) []byte { h := sha256.Sum256(b); return h[:] }
