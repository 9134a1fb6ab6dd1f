package tuf

import (
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
