package sign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
)

// cosign's signature algorithms, for its default hash SHA-256: ECDSA
// (ASN.1 signatures) and RSA PKCS #1 v1.5 over the message's SHA-256,
// Ed25519 over the message itself.

// pubKey verifies signatures.
type pubKey struct{ key crypto.PublicKey }

func newPubKey(k crypto.PublicKey) (*pubKey, error) {
	switch k.(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey, ed25519.PublicKey:
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
