package tuf

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// The embedded root is Sigstore's (signed by its root keys, which
// python-tuf-made canonical JSON and ECDSA signatures must verify) with
// the roles and thresholds it is known to have. No network.
func TestSigstoreRoot(t *testing.T) {
	r, doc, err := parseRoot(sigstoreRoot)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyRole(doc, r, "root", "the embedded root"); err != nil {
		t.Fatal(err)
	}
	if r.Version != 13 || !r.ConsistentSnapshot {
		t.Errorf("version %d, consistent_snapshot %v", r.Version, r.ConsistentSnapshot)
	}
	want := map[string][2]int{"root": {3, 5}, "targets": {3, 5}, "timestamp": {1, 1}, "snapshot": {1, 1}}
	for name, w := range want {
		ro := r.Roles[name]
		if ro.Threshold != w[0] || len(ro.KeyIDs) != w[1] {
			t.Errorf("%s: threshold %d of %d keys, want %d of %d", name, ro.Threshold, len(ro.KeyIDs), w[0], w[1])
		}
		for _, id := range ro.KeyIDs {
			if _, err := parseKey(r.Keys[id]); err != nil {
				t.Errorf("%s key %s: %v", name, id, err)
			}
		}
	}
	// Its signatures are what makes it verify: a changed byte of what is
	// signed does not.
	bad := bytes.Replace(sigstoreRoot, []byte(`"expires": "2026-01-22T13:05:59Z"`), []byte(`"expires": "2036-01-22T13:05:59Z"`), 1)
	if bytes.Equal(bad, sigstoreRoot) {
		t.Fatal("the expiry to change was not found")
	}
	r2, doc2, err := parseRoot(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyRole(doc2, r2, "root", "a changed root"); err == nil || !strings.Contains(err.Error(), "0 valid signature(s)") {
		t.Errorf("a changed root: %v", err)
	}
}

func TestSigstoreOptions(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TUF_ROOT", dir)
	o, err := Sigstore()
	if err != nil {
		t.Fatal(err)
	}
	if o.Mirror != "https://tuf-repo-cdn.sigstore.dev" || o.CacheDir != filepath.Join(dir, "tuf-repo-cdn.sigstore.dev") || !bytes.Equal(o.Root, sigstoreRoot) {
		t.Errorf("with $TUF_ROOT: %+v", o)
	}
	home := t.TempDir()
	t.Setenv("TUF_ROOT", "")
	t.Setenv("HOME", home)
	if o, err = Sigstore(); err != nil || o.CacheDir != filepath.Join(home, ".sigstore", "root", "tuf-repo-cdn.sigstore.dev") {
		t.Errorf("without $TUF_ROOT: %q, %v", o.CacheDir, err)
	}
	if got := mirrorDir("https://Example.com:8443/tuf/"); got != "example.com-8443-tuf-" {
		t.Errorf("mirrorDir: %q", got)
	}
}

// A body without Content-Length is read up to the limit and one byte
// more, and refused.
func TestGetLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush() // chunked: no Content-Length
		w.Write(bytes.Repeat([]byte("x"), 100))
	}))
	defer srv.Close()
	u := &updater{o: Options{HTTPClient: srv.Client()}}
	if _, err := u.get(t.Context(), srv.URL, 99); err == nil || !strings.Contains(err.Error(), "more than the 99 bytes allowed") {
		t.Errorf("99: %v", err)
	}
	if data, err := u.get(t.Context(), srv.URL, 100); err != nil || len(data) != 100 {
		t.Errorf("100: %d bytes, %v", len(data), err)
	}
	if _, err := u.get(t.Context(), srv.URL+"/x\x7f", 100); err == nil {
		t.Error("a bad URL fetched")
	}
}
