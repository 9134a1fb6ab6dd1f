package sct

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/asn1"
	"strings"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/sign/fakesigstore"
)

// The certificates here come from fakesigstore's Fulcio, whose CT log
// makes its SCTs with certificate-transparency-go: another implementation.

func fulcioCert(t *testing.T) (*fakesigstore.Server, *x509.Certificate, *x509.Certificate) {
	t.Helper()
	f, err := fakesigstore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf, issuer, err := f.Certificate(&k.PublicKey, "https://github.com/o/r/.github/workflows/w.yml@refs/tags/v1")
	if err != nil {
		t.Fatal(err)
	}
	return f, leaf, issuer
}

func TestVerifyEmbedded(t *testing.T) {
	f, leaf, issuer := fulcioCert(t)
	scts, err := Embedded(leaf)
	if err != nil || len(scts) != 1 {
		t.Fatalf("Embedded: %d SCTs, %v", len(scts), err)
	}
	s := scts[0]
	if d := time.Since(s.Time()); d < 0 || d > time.Minute {
		t.Errorf("the SCT's time %v is not about now", s.Time())
	}
	if err := Verify(s, leaf, issuer, f.CTKey()); err != nil {
		t.Fatalf("a real embedded SCT: %v", err)
	}

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err := Verify(s, leaf, issuer, other.Public()); err == nil || !strings.Contains(err.Error(), "another log") {
		t.Errorf("another log's key: %v", err)
	}
	forged := s
	forged.LogID, _ = LogID(other.Public())
	if err := Verify(forged, leaf, issuer, other.Public()); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("an SCT claimed by another log: %v", err)
	}
	later := s
	later.Timestamp++
	if err := Verify(later, leaf, issuer, f.CTKey()); err == nil {
		t.Error("a changed timestamp verifies")
	}
	ext := s
	ext.Extensions = []byte{0}
	if err := Verify(ext, leaf, issuer, f.CTKey()); err == nil {
		t.Error("changed SCT extensions verify")
	}
	if err := Verify(s, leaf, leaf, f.CTKey()); err == nil {
		t.Error("another issuer key verifies")
	}
	// The same certificate with another issuer URL in Fulcio's issuer
	// extension (same length, so nothing else moves).
	raw := bytes.Replace(leaf.Raw, []byte(f.Issuer), []byte(strings.Replace(f.Issuer, "fake", "evil", 1)), 1)
	if bytes.Equal(raw, leaf.Raw) {
		t.Fatal("the issuer URL is not in the certificate")
	}
	changed, err := x509.ParseCertificate(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(s, changed, issuer, f.CTKey()); err == nil {
		t.Error("a certificate with a changed extension verifies")
	}
	if _, err := Embedded(issuer); err != ErrNone {
		t.Errorf("a certificate without SCTs: %v", err)
	}
}

func TestParseList(t *testing.T) {
	_, leaf, _ := fulcioCert(t)
	var ext []byte
	for _, e := range leaf.Extensions {
		if e.Id.Equal(OIDList) {
			ext = e.Value
		}
	}
	var list []byte
	if _, err := asn1.Unmarshal(ext, &list); err != nil {
		t.Fatal(err)
	}
	scts, err := ParseList(list)
	if err != nil || len(scts) != 1 {
		t.Fatalf("%d SCTs, %v", len(scts), err)
	}
	if got := MarshalList(scts); !bytes.Equal(got, list) {
		t.Errorf("re-encoded list differs:\n%x\n%x", got, list)
	}
	if one, err := ParseList(wrap(scts[0].Marshal())); err != nil || len(one) != 1 {
		t.Fatalf("wrap: %v", err)
	}
	two, err := ParseList(MarshalList([]SCT{scts[0], scts[0]}))
	if err != nil || len(two) != 2 {
		t.Errorf("a list of two: %d, %v", len(two), err)
	}
	for what, b := range map[string][]byte{
		"trailing garbage":                      append(bytes.Clone(list), 0),
		"a truncated list":                      list[:len(list)-1],
		"a list length past its end":            append([]byte{list[0], list[1] + 1}, list[2:]...),
		"an SCT length inside the list":         append([]byte{list[0], list[1], list[2], list[3] - 1}, list[4:]...),
		"an empty list":                         {0, 0},
		"nothing":                               nil,
		"an SCT of version 2":                   append(bytes.Clone(list[:4]), append([]byte{1}, list[5:]...)...),
		"an SCT with bytes after its signature": wrap(append(scts[0].Marshal(), 0)),
		"an SCT without its signature":          wrap(scts[0].Marshal()[:50]),
	} {
		if _, err := ParseList(b); err == nil {
			t.Errorf("%s: parsed", what)
		}
	}
	if _, err := ParseExtension(append(bytes.Clone(ext), 0)); err == nil {
		t.Error("an extension value with bytes after its OCTET STRING")
	}
}

func TestStripSCTList(t *testing.T) {
	_, leaf, issuer := fulcioCert(t)
	tbs, err := StripSCTList(leaf.RawTBSCertificate)
	if err != nil {
		t.Fatal(err)
	}
	if len(tbs) >= len(leaf.RawTBSCertificate) || bytes.Contains(tbs, []byte{0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x02}) {
		t.Error("the SCT list extension is still there")
	}
	if _, err := StripSCTList(tbs); err == nil || !strings.Contains(err.Error(), "0 SCT list") {
		t.Errorf("a TBSCertificate without an SCT list: %v", err)
	}
	if _, err := StripSCTList(issuer.RawTBSCertificate); err == nil {
		t.Error("the issuer has no SCT list")
	}
	if _, err := StripSCTList(append(bytes.Clone(leaf.RawTBSCertificate), 0)); err == nil {
		t.Error("bytes after the TBSCertificate")
	}
}

// wrap makes a list of the one encoded SCT b.
func wrap(b []byte) []byte {
	n := len(b)
	return append([]byte{byte((n + 2) >> 8), byte(n + 2), byte(n >> 8), byte(n)}, b...)
}
