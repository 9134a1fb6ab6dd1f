package trustroot

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/sign/fakesigstore"
)

// testdata/public-good.json is the public Sigstore instance's
// trusted_root.json as its TUF repository served it (a copy shipped with
// sigstore/sigstore's TUF client).
func TestPublicGood(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "public-good.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tlogs) != 1 || len(r.CTLogs) != 2 || len(r.CAs) != 2 || len(r.TSAs) != 1 {
		t.Fatalf("%d tlogs, %d ctlogs, %d CAs, %d TSAs", len(r.Tlogs), len(r.CTLogs), len(r.CAs), len(r.TSAs))
	}
	for id, l := range mergeLogs(r.Tlogs, r.CTLogs) {
		der, err := x509.MarshalPKIXPublicKey(l.Key)
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(der); hex.EncodeToString(h[:]) != id || hex.EncodeToString(l.ID) != id {
			t.Errorf("%s: log ID %s is not the SHA-256 of its key", l.BaseURL, id)
		}
		if _, ok := l.Key.(*ecdsa.PublicKey); !ok || l.KeyDetails != "PKIX_ECDSA_P256_SHA_256" {
			t.Errorf("%s: a %T key, %s", l.BaseURL, l.Key, l.KeyDetails)
		}
		if l.Start.IsZero() || l.Start.Year() < 2021 {
			t.Errorf("%s: trusted from %v", l.BaseURL, l.Start)
		}
		// The first CT log was retired; the others are open-ended.
		retired := strings.HasSuffix(l.BaseURL, "/test")
		if want := time.Date(2022, 10, 31, 23, 59, 59, 999e6, time.UTC); retired && !l.End.Equal(want) || !retired && !l.End.IsZero() {
			t.Errorf("%s: trusted until %v", l.BaseURL, l.End)
		}
		if retired == l.ValidAt(time.Now()) {
			t.Errorf("%s: ValidAt(now) is %v", l.BaseURL, !retired)
		}
	}
	ca := r.CAs[1]
	if ca.URI != "https://fulcio.sigstore.dev" || len(ca.Intermediates) != 1 || !ca.End.IsZero() || ca.Start.IsZero() {
		t.Errorf("the current Fulcio CA: %+v", ca)
	}
	if err := ca.Intermediates[0].CheckSignatureFrom(ca.Root); err != nil {
		t.Errorf("the intermediate is not signed by the root that follows it: %v", err)
	}
	if r.CAs[0].End.IsZero() || len(r.CAs[0].Intermediates) != 0 {
		t.Errorf("the first Fulcio CA: %+v", r.CAs[0])
	}
}

func mergeLogs(ms ...map[string]*Log) map[string]*Log {
	out := map[string]*Log{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// A trusted root that sigstore-go writes (for fakesigstore's instance)
// reads back to the same keys, certificates and times.
func TestReadsSigstoreGos(t *testing.T) {
	f, err := fakesigstore.New()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := f.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	js, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(js)
	if err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if len(r.Tlogs) != len(tr.RekorLogs()) || len(r.CTLogs) != len(tr.CTLogs()) || len(r.CAs) != 1 {
		t.Fatalf("%d tlogs, %d ctlogs, %d CAs from\n%s", len(r.Tlogs), len(r.CTLogs), len(r.CAs), js)
	}
	for id, want := range tr.CTLogs() {
		got := r.CTLogs[id]
		if got == nil || !got.Start.Equal(want.ValidityPeriodStart) || got.BaseURL != want.BaseURL || !got.Key.(*ecdsa.PublicKey).Equal(want.PublicKey) {
			t.Errorf("CT log %s: %+v, want %+v", id, got, want)
		}
	}
	for id, want := range tr.RekorLogs() {
		if got := r.Tlogs[id]; got == nil || !got.Key.(*ecdsa.PublicKey).Equal(want.PublicKey) {
			t.Errorf("Rekor log %s: %+v", id, got)
		}
	}
	roots, _, _ := f.PEM()
	if !strings.Contains(string(roots), strings.TrimSpace(string(pemOf(r.CAs[0].Root)))) {
		t.Error("the CA's root is not the fake's")
	}
}

func TestSnakeCaseNames(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "public-good.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer(`"mediaType"`, `"media_type"`, `"rawBytes"`, `"raw_bytes"`, `"validFor"`, `"valid_for"`, `"logId"`, `"log_id"`, `"keyId"`, `"key_id"`).Replace(string(data))
	r, err := Parse([]byte(s))
	if err != nil || len(r.CTLogs) != 2 {
		t.Errorf("protobuf's own field names: %v", err)
	}
}

func TestRefuses(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "public-good.json"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(data)
	once := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("%q is not in the file", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	for _, c := range []struct{ what, data, want string }{
		{"bad base64", once(`"rawBytes": "MFkwEwYH`, `"rawBytes": "MFk*EwYH`), "tlogs[0] (https://rekor.sigstore.dev): publicKey.rawBytes: bad base64"},
		{"bad base64 in a certificate", once(`"rawBytes": "MIIB+DCC`, `"rawBytes": "MIIB+DC!`), "certificateAuthorities[0] (https://fulcio.sigstore.dev): certChain.certificates[0].rawBytes: bad base64"},
		{"bad base64 in a log ID", once(`"keyId": "wNI9`, `"keyId": "w%I9`), "logId.keyId: bad base64"},
		{"a certificate that is not one", once(`"rawBytes": "MIIB+DCC`, `"rawBytes": "AAAA`), "not a certificate"},
		{"an unknown media type", once(`trustedroot+json;version=0.1`, `trustedroot+json;version=0.2`), `mediaType "application/vnd.dev.sigstore.trustedroot+json;version=0.2"`},
		{"no media type", once(`"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",`, ``), `mediaType ""`},
		{"an unknown field", once(`"baseUrl": "https://rekor.sigstore.dev",`, `"baseUrl": "https://rekor.sigstore.dev", "shard": 2,`), `unknown field "shard"`},
		{"a missing log ID", once(`"logId": {
        "keyId": "wNI9atQGlz+VWfO6LRygH4QUfY/8W4RFwiT5i5WRgB0="
      }`, `"logId": {}`), "no logId.keyId"},
		{"a missing validity", once(`"validFor": {
          "start": "2021-01-12T11:53:27.000Z"
        }`, `"validFor": {}`), "no publicKey.validFor.start"},
		{"a bad time", once(`"start": "2021-01-12T11:53:27.000Z"`, `"start": "2021-01-12 11:53"`), "publicKey.validFor.start"},
		{"an unknown key type", once(`"keyDetails": "PKIX_ECDSA_P256_SHA_256"`, `"keyDetails": "ML_DSA_65"`), `keyDetails "ML_DSA_65"`},
		{"a key of another type", once(`"keyDetails": "PKIX_ECDSA_P256_SHA_256"`, `"keyDetails": "PKIX_ED25519"`), "not the PKIX_ED25519 key"},
		{"another hash", once(`"hashAlgorithm": "SHA2_256"`, `"hashAlgorithm": "SHA2_384"`), "want SHA2_256"},
		{"an empty chain", once(`"certChain": {`, `"certChain": {"certificates": []}, "x": {`), `unknown field "x"`},
		{"not JSON", good[:100], "not JSON"},
		{"a list where an object goes", once(`"tlogs": [`, `"tlogs": [[],`), "not a Sigstore trusted root"},
	} {
		dir := t.TempDir()
		file := filepath.Join(dir, "trusted_root.json")
		os.WriteFile(file, []byte(c.data), 0o644)
		_, err := Read(file)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), file+": ") {
			t.Errorf("%s: %v, want %q after the file's name", c.what, err, c.want)
		}
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing file")
	}
	// Missing parts, cut out of the decoded file.
	for what, cut := range map[string]func(m map[string]any){
		"no certChain":      func(m map[string]any) { delete(item(m, "certificateAuthorities", 0), "certChain") },
		"no publicKey":      func(m map[string]any) { delete(item(m, "ctlogs", 1), "publicKey") },
		"no TSA chain":      func(m map[string]any) { delete(item(m, "timestampAuthorities", 0), "certChain") },
		"no hash algorithm": func(m map[string]any) { delete(item(m, "tlogs", 0), "hashAlgorithm") },
	} {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		cut(m)
		b, _ := json.Marshal(m)
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: parsed", what)
		}
	}
}

func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func item(m map[string]any, list string, i int) map[string]any {
	return m[list].([]any)[i].(map[string]any)
}
