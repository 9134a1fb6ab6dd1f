package sign

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// cosign's key files: an ECDSA P-256 key, PKCS #8, encrypted with the
// password (scrypt and NaCl secretbox, as go-securesystemslib does it) in a
// PEM block of this type; cosign's older keys use the second.
const (
	pemPrivateKey       = "ENCRYPTED SIGSTORE PRIVATE KEY"
	pemPrivateKeyCosign = "ENCRYPTED COSIGN PRIVATE KEY"
)

// newKeyPair makes a key pair in cosign's format: the encrypted private
// key and the public key, both PEM.
func newKeyPair(password []byte) (priv, pub []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	enc, err := encrypted.Encrypt(der, password)
	if err != nil {
		return nil, nil, err
	}
	if pub, err = cryptoutils.MarshalPublicKeyToPEM(k.Public()); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: enc}), pub, nil
}

// loadPrivateKey decrypts a cosign private key.
func loadPrivateKey(data, password []byte) (*privKey, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("not a PEM file")
	}
	if b.Type != pemPrivateKey && b.Type != pemPrivateKeyCosign {
		return nil, fmt.Errorf("a %q PEM block, not a cosign private key (%s)", b.Type, pemPrivateKey)
	}
	der, err := encrypted.Decrypt(b.Bytes, password)
	if err != nil {
		return nil, fmt.Errorf("cannot decrypt: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, err
	}
	return newPrivKey(k)
}
