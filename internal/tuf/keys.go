package tuf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// The key types and signature schemes the client verifies (TUF
// specification §4.2 and securesystemslib's): ECDSA on P-256 (or P-384)
// with a PEM public key and hex ASN.1 signatures over the SHA-256 (or
// SHA-384) of the message, Ed25519 with a hex public key and hex
// signatures, RSASSA-PSS with SHA-256 and a PEM public key.

// pubKey is a parsed key: id identifies the key itself (its type and
// public bytes), whatever key id metadata gives it.
type pubKey struct {
	id     string
	verify func(msg, sig []byte) bool
}

const minRSABits = 2048

func parseKey(k key) (*pubKey, error) {
	switch {
	case (k.KeyType == "ecdsa" || k.KeyType == "ecdsa-sha2-nistp256") && k.Scheme == "ecdsa-sha2-nistp256":
		return ecdsaKey(k, elliptic.P256(), crypto.SHA256)
	case (k.KeyType == "ecdsa" || k.KeyType == "ecdsa-sha2-nistp384") && k.Scheme == "ecdsa-sha2-nistp384":
		return ecdsaKey(k, elliptic.P384(), crypto.SHA384)
	case k.KeyType == "ed25519" && k.Scheme == "ed25519":
		b, err := hex.DecodeString(k.KeyVal.Public)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, errors.New("an ed25519 key that is not 32 hex-encoded bytes")
		}
		pk := ed25519.PublicKey(b)
		return &pubKey{id: "ed25519:" + string(b), verify: func(msg, sig []byte) bool {
			return ed25519.Verify(pk, msg, sig)
		}}, nil
	case k.KeyType == "rsa" && k.Scheme == "rsassa-pss-sha256":
		pub, der, err := pemKey(k.KeyVal.Public)
		if err != nil {
			return nil, err
		}
		pk, ok := pub.(*rsa.PublicKey)
		if !ok || pk.N.BitLen() < minRSABits {
			return nil, fmt.Errorf("an rsa key that is not an RSA public key of at least %d bits", minRSABits)
		}
		return &pubKey{id: "rsa:" + string(der), verify: func(msg, sig []byte) bool {
			h := sha256.Sum256(msg)
			return rsa.VerifyPSS(pk, crypto.SHA256, h[:], sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto}) == nil
		}}, nil
	}
	return nil, fmt.Errorf("key type %q with scheme %q is not supported", k.KeyType, k.Scheme)
}

func ecdsaKey(k key, curve elliptic.Curve, h crypto.Hash) (*pubKey, error) {
	pub, der, err := pemKey(k.KeyVal.Public)
	if err != nil {
		return nil, err
	}
	pk, ok := pub.(*ecdsa.PublicKey)
	if !ok || pk.Curve != curve {
		return nil, fmt.Errorf("a %s key that is not an ECDSA %s public key", k.Scheme, curve.Params().Name)
	}
	return &pubKey{id: "ecdsa:" + string(der), verify: func(msg, sig []byte) bool {
		var d []byte
		if h == crypto.SHA384 {
			s := sha512.Sum384(msg)
			d = s[:]
		} else {
			s := sha256.Sum256(msg)
			d = s[:]
		}
		return ecdsa.VerifyASN1(pk, d, sig)
	}}, nil
}

// pemKey decodes one PEM "PUBLIC KEY" block (PKIX) and returns the key and
// its DER bytes, encoded again so that one key has one encoding.
func pemKey(s string) (crypto.PublicKey, []byte, error) {
	b, _ := pem.Decode([]byte(s))
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, nil, errors.New("a key whose keyval.public is not a PEM PUBLIC KEY")
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub) // one encoding per key
	if err != nil {
		return nil, nil, err
	}
	return pub, der, nil
}
