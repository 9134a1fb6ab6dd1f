// Package trustroot reads a Sigstore trusted root (trusted_root.json, media
// type application/vnd.dev.sigstore.trustedroot+json;version=0.1): the
// Fulcio CAs, Rekor logs, CT logs and timestamp authorities to trust, each
// for a time range. The file is the protobuf-JSON form of Sigstore's
// TrustedRoot message; this reads it with encoding/json, strictly: an
// unknown field, a bad base64 value or a missing key is an error.
package trustroot

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/jsonkey"
)

// MediaType is the one version of the format this reads.
const MediaType = "application/vnd.dev.sigstore.trustedroot+json;version=0.1"

// Root is what a trusted root trusts.
type Root struct {
	CAs []*CA
	// Tlogs (Rekor) and CTLogs by log ID, hex.
	Tlogs  map[string]*Log
	CTLogs map[string]*Log
	TSAs   []*CA
}

// Log is a transparency log's key, trusted from Start to End (open if zero).
type Log struct {
	BaseURL    string
	ID         []byte
	Key        crypto.PublicKey
	KeyDetails string // e.g. PKIX_ECDSA_P256_SHA_256
	Start, End time.Time
}

// ValidAt says whether the log's key is trusted for what was logged at t.
func (l *Log) ValidAt(t time.Time) bool {
	return !t.Before(l.Start) && (l.End.IsZero() || !t.After(l.End))
}

// CA is a certificate authority: its root, the intermediates under it, and
// when it is trusted (open ends if zero).
type CA struct {
	URI           string
	Root          *x509.Certificate
	Intermediates []*x509.Certificate
	Start, End    time.Time
}

// Verify checks that cert chains to the CA for code signing at t, the time
// the signature was logged, which must fall in the CA's validity. It
// returns the chains, the leaf first.
func (ca *CA) Verify(cert *x509.Certificate, t time.Time) ([][]*x509.Certificate, error) {
	if !ca.Start.IsZero() && t.Before(ca.Start) {
		return nil, fmt.Errorf("the CA %s is trusted from %s, after %s", ca.URI, ca.Start.UTC(), t.UTC())
	}
	if !ca.End.IsZero() && t.After(ca.End) {
		return nil, fmt.Errorf("the CA %s is trusted until %s, before %s", ca.URI, ca.End.UTC(), t.UTC())
	}
	roots, inters := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(ca.Root)
	for _, c := range ca.Intermediates {
		inters.AddCert(c)
	}
	return cert.Verify(x509.VerifyOptions{CurrentTime: t, Roots: roots, Intermediates: inters,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}})
}

// maxFile bounds a trusted root file; Sigstore's public-good one is about
// 10 kB.
const maxFile = 16 << 20

// Read reads the trusted root in file.
func Read(file string) (*Root, error) {
	data, err := fsutil.ReadFile(file, maxFile)
	if err != nil {
		return nil, err
	}
	r, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return r, nil
}

// The file's JSON, with protobuf-JSON's camelCase names.
type (
	fileRoot struct {
		MediaType              string    `json:"mediaType"`
		Tlogs                  []fileLog `json:"tlogs"`
		CertificateAuthorities []fileCA  `json:"certificateAuthorities"`
		Ctlogs                 []fileLog `json:"ctlogs"`
		TimestampAuthorities   []fileCA  `json:"timestampAuthorities"`
	}
	fileLog struct {
		BaseURL         string     `json:"baseUrl"`
		HashAlgorithm   string     `json:"hashAlgorithm"`
		PublicKey       *fileKey   `json:"publicKey"`
		LogID           *fileLogID `json:"logId"`
		CheckpointKeyID *fileLogID `json:"checkpointKeyId"`
		Operator        string     `json:"operator"`
	}
	fileKey struct {
		RawBytes   bytesField `json:"rawBytes"`
		KeyDetails string     `json:"keyDetails"`
		ValidFor   *fileRange `json:"validFor"`
	}
	fileLogID struct {
		KeyID bytesField `json:"keyId"`
	}
	fileRange struct {
		Start *timeField `json:"start"`
		End   *timeField `json:"end"`
	}
	fileCA struct {
		Subject *struct {
			Organization string `json:"organization"`
			CommonName   string `json:"commonName"`
		} `json:"subject"`
		URI       string `json:"uri"`
		CertChain *struct {
			Certificates []struct {
				RawBytes bytesField `json:"rawBytes"`
			} `json:"certificates"`
		} `json:"certChain"`
		ValidFor *fileRange `json:"validFor"`
		Operator string     `json:"operator"`
	}
)

// bytesField is protobuf-JSON bytes: base64, standard or URL-safe, padded
// or not.
type bytesField string

func (b bytesField) decode(field string) ([]byte, error) {
	s := strings.TrimRight(string(b), "=")
	if strings.ContainsAny(s, "-_") {
		s = strings.NewReplacer("-", "+", "_", "/").Replace(s)
	}
	v, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s: bad base64: %w", field, err)
	}
	return v, nil
}

// timeField is a protobuf-JSON Timestamp: RFC 3339.
type timeField string

func (t timeField) parse(field string) (time.Time, error) {
	v, err := time.Parse(time.RFC3339Nano, string(t))
	if err != nil {
		return v, fmt.Errorf("%s: %q is not an RFC 3339 time such as 2021-01-12T11:53:27Z", field, string(t))
	}
	return v, nil
}

// parse reads r's ends; a missing start is the zero time.
func (r *fileRange) parse(field string) (start, end time.Time, err error) {
	if r.Start != nil {
		if start, err = r.Start.parse(field + ".start"); err != nil {
			return
		}
	}
	if r.End != nil {
		end, err = r.End.parse(field + ".end")
	}
	return
}

// Parse reads a trusted root.
func Parse(data []byte) (*Root, error) {
	// protobuf-JSON also accepts the proto field names (snake_case):
	// rename them so that one strict decoding reads both.
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	raw, err := camelKeys(raw)
	if err != nil {
		return nil, err
	}
	norm, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var f fileRoot
	dec := json.NewDecoder(bytes.NewReader(norm))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a Sigstore trusted root: %w", err)
	}
	if f.MediaType != MediaType {
		return nil, fmt.Errorf("mediaType %q: this reads %q only", f.MediaType, MediaType)
	}
	r := &Root{}
	if r.Tlogs, err = logs("tlogs", f.Tlogs); err != nil {
		return nil, err
	}
	if r.CTLogs, err = logs("ctlogs", f.Ctlogs); err != nil {
		return nil, err
	}
	if r.CAs, err = cas("certificateAuthorities", f.CertificateAuthorities); err != nil {
		return nil, err
	}
	if r.TSAs, err = cas("timestampAuthorities", f.TimestampAuthorities); err != nil {
		return nil, err
	}
	return r, nil
}

// camelKeys renames every snake_case object key of v to camelCase. Two
// keys of one object that name one field (valid_for and validFor, or keys
// that differ in case, which encoding/json matches alike) are refused:
// which one would be read is not defined.
func camelKeys(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		seen := make(map[string]string, len(v))
		for k, x := range v {
			c := camel(k)
			if o, ok := seen[jsonkey.Fold(c)]; ok {
				return nil, fmt.Errorf("the field %q is given twice (as %q and %q)", c, o, k)
			}
			seen[jsonkey.Fold(c)] = k
			y, err := camelKeys(x)
			if err != nil {
				return nil, err
			}
			out[c] = y
		}
		return out, nil
	case []any:
		for i, x := range v {
			y, err := camelKeys(x)
			if err != nil {
				return nil, err
			}
			v[i] = y
		}
	}
	return v, nil
}

func camel(k string) string {
	if !strings.Contains(k, "_") {
		return k
	}
	parts := strings.Split(k, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

func logs(field string, in []fileLog) (map[string]*Log, error) {
	out := map[string]*Log{}
	for i, fl := range in {
		where := fmt.Sprintf("%s[%d] (%s)", field, i, fl.BaseURL)
		l, err := parseLog(fl)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		out[hex.EncodeToString(l.ID)] = l
	}
	return out, nil
}

func parseLog(fl fileLog) (*Log, error) {
	if fl.HashAlgorithm != "SHA2_256" {
		return nil, fmt.Errorf("hashAlgorithm %q: want SHA2_256", fl.HashAlgorithm)
	}
	if fl.LogID == nil || fl.LogID.KeyID == "" {
		return nil, errors.New("no logId.keyId")
	}
	id, err := fl.LogID.KeyID.decode("logId.keyId")
	if err != nil {
		return nil, err
	}
	if fl.CheckpointKeyID != nil {
		if _, err := fl.CheckpointKeyID.KeyID.decode("checkpointKeyId.keyId"); err != nil {
			return nil, err
		}
	}
	k := fl.PublicKey
	if k == nil || k.RawBytes == "" {
		return nil, errors.New("no publicKey.rawBytes")
	}
	if k.ValidFor == nil || k.ValidFor.Start == nil {
		return nil, errors.New("no publicKey.validFor.start")
	}
	raw, err := k.RawBytes.decode("publicKey.rawBytes")
	if err != nil {
		return nil, err
	}
	key, err := publicKey(k.KeyDetails, raw)
	if err != nil {
		return nil, fmt.Errorf("publicKey: %w", err)
	}
	l := &Log{BaseURL: fl.BaseURL, ID: id, Key: key, KeyDetails: k.KeyDetails}
	if l.Start, l.End, err = k.ValidFor.parse("publicKey.validFor"); err != nil {
		return nil, err
	}
	return l, nil
}

// publicKey parses raw as keyDetails says (Sigstore's PublicKeyDetails).
func publicKey(details string, raw []byte) (crypto.PublicKey, error) {
	if details == "PKCS1_RSA_PKCS1V5" {
		return x509.ParsePKCS1PublicKey(raw)
	}
	var ok func(crypto.PublicKey) bool
	switch details {
	case "PKIX_ECDSA_P256_SHA_256", "PKIX_ECDSA_P384_SHA_384", "PKIX_ECDSA_P521_SHA_512":
		ok = func(k crypto.PublicKey) bool { _, is := k.(*ecdsa.PublicKey); return is }
	case "PKIX_RSA_PKCS1V15_2048_SHA256", "PKIX_RSA_PKCS1V15_3072_SHA256", "PKIX_RSA_PKCS1V15_4096_SHA256":
		ok = func(k crypto.PublicKey) bool { _, is := k.(*rsa.PublicKey); return is }
	case "PKIX_ED25519":
		ok = func(k crypto.PublicKey) bool { _, is := k.(ed25519.PublicKey); return is }
	default:
		return nil, fmt.Errorf("keyDetails %q is not a key type this reads", details)
	}
	key, err := x509.ParsePKIXPublicKey(raw)
	if err != nil {
		return nil, err
	}
	if !ok(key) {
		return nil, fmt.Errorf("a %T, not the %s key that keyDetails says", key, details)
	}
	return key, nil
}

func cas(field string, in []fileCA) ([]*CA, error) {
	var out []*CA
	for i, fc := range in {
		ca, err := parseCA(fc)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] (%s): %w", field, i, fc.URI, err)
		}
		out = append(out, ca)
	}
	return out, nil
}

func parseCA(fc fileCA) (*CA, error) {
	if fc.CertChain == nil || len(fc.CertChain.Certificates) == 0 {
		return nil, errors.New("no certChain.certificates")
	}
	ca := &CA{URI: fc.URI}
	certs := fc.CertChain.Certificates
	for i, c := range certs {
		field := fmt.Sprintf("certChain.certificates[%d].rawBytes", i)
		if c.RawBytes == "" {
			return nil, fmt.Errorf("no %s", field)
		}
		der, err := c.RawBytes.decode(field)
		if err != nil {
			return nil, err
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%s: not a certificate: %w", field, err)
		}
		if i == len(certs)-1 {
			ca.Root = cert
		} else {
			ca.Intermediates = append(ca.Intermediates, cert)
		}
	}
	if fc.ValidFor != nil {
		var err error
		if ca.Start, ca.End, err = fc.ValidFor.parse("validFor"); err != nil {
			return nil, err
		}
	}
	return ca, nil
}
