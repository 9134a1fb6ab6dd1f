package sign

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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
