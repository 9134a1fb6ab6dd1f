package sign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
)

// cosign's signature algorithms, for its default hash SHA-256: ECDSA
// (ASN.1 signatures) and RSA PKCS #1 v1.5 over the message's SHA-256,
// Ed25519 over the message itself.

const minRSABits = 2048

// pubKey verifies signatures.
type pubKey struct{ key crypto.PublicKey }

// Keys are refused that cosign's own key checks refuse: ECDSA off the
// NIST curves P-256, P-384 and P-521, RSA under 2048 bits, and Ed25519
// keys that are not 32 bytes (ed25519.Verify panics on those).
func newPubKey(k crypto.PublicKey) (*pubKey, error) {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if c := k.Curve; c != elliptic.P256() && c != elliptic.P384() && c != elliptic.P521() {
			return nil, fmt.Errorf("an ECDSA key on curve %s: want P-256, P-384 or P-521", c.Params().Name)
		}
		return &pubKey{k}, nil
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return nil, fmt.Errorf("a %d-bit RSA key: want at least %d bits", k.N.BitLen(), minRSABits)
		}
		return &pubKey{k}, nil
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("an Ed25519 key of %d bytes: want %d", len(k), ed25519.PublicKeySize)
		}
		return &pubKey{k}, nil
	}
	return nil, fmt.Errorf("a %T key: want ECDSA, RSA or Ed25519", k)
}

// verify checks that sig signs msg.
func (p *pubKey) verify(sig, msg []byte) error {
	h := sha256.Sum256(msg)
	ok := false
	switch k := p.key.(type) {
	case *ecdsa.PublicKey:
		ok = ecdsa.VerifyASN1(k, h[:], sig)
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(k, crypto.SHA256, h[:], sig) == nil
	case ed25519.PublicKey:
		ok = ed25519.Verify(k, msg, sig)
	}
	if !ok {
		return errors.New("the signature does not verify")
	}
	return nil
}

// privKey signs, and verifies with its public half.
type privKey struct {
	pubKey
	priv crypto.Signer
}

func newPrivKey(k crypto.PrivateKey) (*privKey, error) {
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T key cannot sign", k)
	}
	pub, err := newPubKey(s.Public())
	if err != nil {
		return nil, err
	}
	return &privKey{*pub, s}, nil
}

// sign signs msg.
func (p *privKey) sign(msg []byte) ([]byte, error) {
	if _, ok := p.key.(ed25519.PublicKey); ok {
		return p.priv.Sign(rand.Reader, msg, crypto.Hash(0))
	}
	h := sha256.Sum256(msg)
	return p.priv.Sign(rand.Reader, h[:], crypto.SHA256) // ECDSA: ASN.1
}
