package tuf

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// encoding/json matches object keys to struct fields under Unicode case
// folding (bytes.EqualFold: "ſ" folds to "s", the Kelvin sign "K" to
// "k"), not only ASCII case. Two keys that fold alike must be refused, or
// the client reads one where another client (python-tuf, go-tuf) reads
// the other: here an expired "expires" beside a later "expireſ".
func TestUnicodeFoldedDuplicateKeys(t *testing.T) {
	for _, raw := range []string{
		`{"expires": "2020-01-01T00:00:00Z", "expireſ": "2099-01-01T00:00:00Z"}`,
		"{\"keyids\": [], \"\u212Aeyids\": []}",
		`{"a": {"ſpec_version": "2.0", "spec_version": "1.0"}}`,
	} {
		if _, err := decode([]byte(raw)); err == nil {
			t.Errorf("%s: keys that encoding/json folds together accepted", raw)
		}
	}
	// What the check guards against: the later key is what Go reads.
	var ts timestampMeta
	r := newRepo(t)
	r.publish(setRole("timestamp", func(s map[string]any) {
		s["expires"] = expiry(testNow.Add(-time.Hour))
		s["expireſ"] = expiry(testNow.Add(time.Hour))
	}))
	if _, err := parse(r.get("timestamp.json"), "timestamp", &ts); err == nil {
		t.Errorf("timestamp with \"expires\" and \"expireſ\" parsed; expires read as %s", ts.Expires)
	} else if !strings.Contains(err.Error(), "keys in one object") {
		t.Errorf("error: %v", err)
	}
	// Keys that differ but do not fold together stay.
	if _, err := decode([]byte(`{"version": 1, "versions": 2, "x-é": 1, "x-e": 2}`)); err != nil {
		t.Error(err)
	}
}

// Attacks that the client already refuses; kept as regression tests.
func TestReviewHolds(t *testing.T) {
	t.Run("one ECDSA key under two ids, PEM re-wrapped and keytype renamed", func(t *testing.T) {
		r := newRepo(t)
		k := r.keys["targets"][0]
		blk, _ := pem.Decode([]byte(k.obj["keyval"].(map[string]any)["public"].(string)))
		alt := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Headers: map[string]string{"Comment": "twin"}, Bytes: blk.Bytes}))
		r.signTargetsWith(&tkey{id: strings.Repeat("ef", 32), obj: map[string]any{"keytype": "ecdsa-sha2-nistp256", "scheme": "ecdsa-sha2-nistp256", "keyval": map[string]any{"public": alt}}, sign: k.sign})
		r.mustFail("2.targets.json: 1 valid signature(s)")
	})
	for name, tf := range map[string]map[string]any{
		"a target with a length and no hashes":         {"length": 74},
		"a target with only an unknown hash":           {"length": 74, "hashes": map[string]any{"sha3-256": strings.Repeat("00", 32)}},
		"a target whose sha512 is wrong, sha256 right": nil, // filled below
		"a target of a huge length":                    {"length": int64(1) << 40, "hashes": map[string]any{"sha256": strings.Repeat("00", 32)}},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRepo(t)
			if tf == nil {
				h := hashes(r.target)
				h["sha512"] = strings.Repeat("00", 64)
				tf = map[string]any{"length": len(r.target), "hashes": h}
			}
			r.publish(setRole("targets", func(s map[string]any) { s["targets"] = map[string]any{"trusted_root.json": tf} }))
			r.mustFail("target")
		})
	}
	t.Run("expires with a time zone offset is read as an instant", func(t *testing.T) {
		r := newRepo(t)
		// 13:00 at +02:00 is 11:00Z, an hour before testNow.
		r.publish(setRole("timestamp", func(s map[string]any) { s["expires"] = "2026-06-01T13:00:00+02:00" }))
		r.mustFail("timestamp.json expired")
	})
	t.Run("a redirect to another host is followed and still verified", func(t *testing.T) {
		r := newRepo(t)
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.Write(bytes.Replace(r.get(strings.TrimPrefix(req.URL.Path, "/")), []byte(`"version": 2`), []byte(`"version": 3`), 1))
		}))
		defer evil.Close()
		files := r.srv.Config.Handler
		r.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Path == "/timestamp.json" {
				http.Redirect(w, req, evil.URL+req.URL.Path, http.StatusFound)
				return
			}
			files.ServeHTTP(w, req)
		})
		r.publish(nil)
		r.mustFail("timestamp.json: 0 valid signature(s)")
	})
}
