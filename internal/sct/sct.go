// Package sct verifies the signed certificate timestamps (SCTs) that a CA
// embeds in a certificate (RFC 6962 §3.3): the promise of a certificate
// transparency log to publish the certificate. Fulcio embeds one in every
// certificate it issues.
package sct

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// OIDList is the certificate extension holding the embedded SCT list.
var OIDList = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}

// SCT is one signed certificate timestamp, version 1 (RFC 6962 §3.2).
type SCT struct {
	LogID      [32]byte // SHA-256 of the log's public key (DER)
	Timestamp  uint64   // milliseconds since the epoch
	Extensions []byte
	Hash       uint8 // TLS HashAlgorithm: 4 is SHA-256
	Sig        uint8 // TLS SignatureAlgorithm: 1 RSA, 3 ECDSA
	Signature  []byte
}

// Time is when the log saw the certificate.
func (s SCT) Time() time.Time { return time.UnixMilli(int64(s.Timestamp)) }

// TLS 1.2 algorithm numbers (RFC 5246 §7.4.1.4.1) that CT logs use.
const (
	hashSHA256 = 4
	sigRSA     = 1
	sigECDSA   = 3
)

// ErrNone says a certificate has no SCT list extension.
var ErrNone = errors.New("no embedded SCT list")

// Embedded returns the SCTs embedded in cert; ErrNone if it has none.
func Embedded(cert *x509.Certificate) ([]SCT, error) {
	for _, e := range cert.Extensions {
		if e.Id.Equal(OIDList) {
			return ParseExtension(e.Value)
		}
	}
	return nil, ErrNone
}

// ParseExtension reads the SCT list extension's value: a DER OCTET STRING
// wrapping a TLS-encoded SignedCertificateTimestampList.
func ParseExtension(value []byte) ([]SCT, error) {
	var list []byte
	rest, err := asn1.Unmarshal(value, &list)
	if err != nil || len(rest) != 0 {
		return nil, errors.New("the SCT list extension is not one DER OCTET STRING")
	}
	return ParseList(list)
}

// ParseList reads a TLS-encoded SignedCertificateTimestampList: a 16-bit
// length, then SCTs, each with a 16-bit length. Only version 1 SCTs are
// accepted; nothing may follow the list or an SCT inside its length.
func ParseList(b []byte) ([]SCT, error) {
	in := cryptobyte.String(b)
	var list cryptobyte.String
	if !in.ReadUint16LengthPrefixed(&list) || !in.Empty() {
		return nil, errors.New("the SCT list is truncated or has bytes after it")
	}
	if list.Empty() {
		return nil, errors.New("the SCT list is empty")
	}
	var out []SCT
	for !list.Empty() {
		var one cryptobyte.String
		if !list.ReadUint16LengthPrefixed(&one) || one.Empty() {
			return nil, fmt.Errorf("SCT %d of the list is truncated", len(out)+1)
		}
		s, err := parseSCT(one)
		if err != nil {
			return nil, fmt.Errorf("SCT %d of the list: %w", len(out)+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSCT(in cryptobyte.String) (SCT, error) {
	var s SCT
	var version uint8
	var id []byte
	var ext, sig cryptobyte.String
	if !in.ReadUint8(&version) {
		return s, errors.New("truncated")
	}
	if version != 0 {
		return s, fmt.Errorf("version %d, want 1 (0 on the wire)", version+1)
	}
	if !in.ReadBytes(&id, 32) || !in.ReadUint64(&s.Timestamp) || !in.ReadUint16LengthPrefixed(&ext) ||
		!in.ReadUint8(&s.Hash) || !in.ReadUint8(&s.Sig) || !in.ReadUint16LengthPrefixed(&sig) {
		return s, errors.New("truncated")
	}
	if !in.Empty() {
		return s, errors.New("bytes after the signature")
	}
	copy(s.LogID[:], id)
	s.Extensions, s.Signature = bytes.Clone(ext), bytes.Clone(sig)
	return s, nil
}

// Marshal is s in its TLS encoding (without the list's length prefix).
func (s SCT) Marshal() []byte {
	var b cryptobyte.Builder
	b.AddUint8(0)
	b.AddBytes(s.LogID[:])
	b.AddUint64(s.Timestamp)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.Extensions) })
	b.AddUint8(s.Hash)
	b.AddUint8(s.Sig)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.Signature) })
	return b.BytesOrPanic()
}

// MarshalList is the TLS-encoded SignedCertificateTimestampList of scts.
func MarshalList(scts []SCT) []byte {
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, s := range scts {
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.Marshal()) })
		}
	})
	return b.BytesOrPanic()
}

// LogID is the ID of the log with public key pub: the SHA-256 of its DER.
func LogID(pub crypto.PublicKey) ([32]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(der), nil
}

// SignedData is what the log signed for s embedded in cert, which issuer
// issued (RFC 6962 §3.2, a precert_entry): the version, the signature type
// certificate_timestamp, the timestamp, the entry type precert_entry, the
// SHA-256 of the issuer's public key, cert's TBSCertificate without the SCT
// list extension, and s's extensions.
func SignedData(s SCT, cert, issuer *x509.Certificate) ([]byte, error) {
	tbs, err := StripSCTList(cert.RawTBSCertificate)
	if err != nil {
		return nil, err
	}
	if len(tbs) >= 1<<24 {
		return nil, errors.New("the TBSCertificate is too long for a CT entry")
	}
	keyHash := sha256.Sum256(issuer.RawSubjectPublicKeyInfo)
	var b cryptobyte.Builder
	b.AddUint8(0) // v1
	b.AddUint8(0) // certificate_timestamp
	b.AddUint64(s.Timestamp)
	b.AddUint16(1) // precert_entry
	b.AddBytes(keyHash[:])
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(tbs) })
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.Extensions) })
	return b.Bytes()
}

// StripSCTList re-encodes a DER TBSCertificate without its one SCT list
// extension (and without the extensions field if nothing else is left).
func StripSCTList(tbs []byte) ([]byte, error) {
	in := cryptobyte.String(tbs)
	var body cryptobyte.String
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) || !in.Empty() {
		return nil, errors.New("the TBSCertificate is not one DER SEQUENCE")
	}
	var b cryptobyte.Builder
	removed := 0
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		for !body.Empty() {
			var el cryptobyte.String
			var tag cbasn1.Tag
			if !body.ReadAnyASN1Element(&el, &tag) {
				b.SetError(errors.New("the TBSCertificate is malformed"))
				return
			}
			if tag != cbasn1.Tag(3).Constructed().ContextSpecific() {
				b.AddBytes(el)
				continue
			}
			exts, n, err := withoutSCTList(el)
			if err != nil {
				b.SetError(err)
				return
			}
			removed += n
			if len(exts) > 0 {
				b.AddASN1(tag, func(b *cryptobyte.Builder) {
					b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddBytes(exts) })
				})
			}
		}
	})
	out, err := b.Bytes()
	if err != nil {
		return nil, err
	}
	if removed != 1 {
		return nil, fmt.Errorf("the certificate has %d SCT list extensions, want 1", removed)
	}
	return out, nil
}

// withoutSCTList takes the [3] element of a TBSCertificate and returns its
// extensions (each a DER element, concatenated) but the SCT list, and how
// many SCT lists it dropped.
func withoutSCTList(el cryptobyte.String) ([]byte, int, error) {
	var explicit, seq cryptobyte.String
	if !el.ReadASN1(&explicit, cbasn1.Tag(3).Constructed().ContextSpecific()) ||
		!explicit.ReadASN1(&seq, cbasn1.SEQUENCE) || !explicit.Empty() {
		return nil, 0, errors.New("the certificate's extensions are malformed")
	}
	var keep []byte
	n := 0
	for !seq.Empty() {
		var ext cryptobyte.String
		if !seq.ReadASN1Element(&ext, cbasn1.SEQUENCE) {
			return nil, 0, errors.New("a certificate extension is malformed")
		}
		inner := ext
		var body cryptobyte.String
		var oid asn1.ObjectIdentifier
		if !inner.ReadASN1(&body, cbasn1.SEQUENCE) || !body.ReadASN1ObjectIdentifier(&oid) {
			return nil, 0, errors.New("a certificate extension is malformed")
		}
		if oid.Equal(OIDList) {
			n++
			continue
		}
		keep = append(keep, ext...)
	}
	return keep, n, nil
}

// Verify checks that key, a CT log's public key, signed s for cert (issued
// by issuer, whose public key the entry names). s.LogID must be key's.
func Verify(s SCT, cert, issuer *x509.Certificate, key crypto.PublicKey) error {
	id, err := LogID(key)
	if err != nil {
		return fmt.Errorf("the CT log key: %w", err)
	}
	if id != s.LogID {
		return errors.New("the SCT is from another log")
	}
	if s.Hash != hashSHA256 {
		return fmt.Errorf("the SCT's hash algorithm %d is not SHA-256 (4)", s.Hash)
	}
	data, err := SignedData(s, cert, issuer)
	if err != nil {
		return err
	}
	h := sha256.Sum256(data)
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if s.Sig != sigECDSA {
			return fmt.Errorf("the SCT's signature algorithm %d is not ECDSA (3), the log key's", s.Sig)
		}
		if !ecdsa.VerifyASN1(k, h[:], s.Signature) {
			return errors.New("the SCT's signature does not verify")
		}
	case *rsa.PublicKey:
		if s.Sig != sigRSA {
			return fmt.Errorf("the SCT's signature algorithm %d is not RSA (1), the log key's", s.Sig)
		}
		if rsa.VerifyPKCS1v15(k, crypto.SHA256, h[:], s.Signature) != nil {
			return errors.New("the SCT's signature does not verify")
		}
	default:
		return fmt.Errorf("a CT log key of type %T: want ECDSA or RSA", key)
	}
	return nil
}
