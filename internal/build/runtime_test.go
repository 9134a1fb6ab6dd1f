package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/plan"
)

// TestRuntimeSourceIsThePinnedOne serves a runtime's source archive the
// way a hostile or broken mirror would: longer than the pin, shorter,
// other bytes of the same size, not found. Each is refused, saying why,
// and nothing is left in the cache; the pinned bytes are kept once and
// found again without a request.
func TestRuntimeSourceIsThePinnedOne(t *testing.T) {
	good := []byte(strings.Repeat("gcc source ", 1000))
	sum := sha256.Sum256(good)
	pin := plan.RuntimeSource{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(good))}
	var serve []byte
	var status int
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		w.Write(serve)
	}))
	defer srv.Close()
	pin.URL = srv.URL + "/pool/gcc-12_12.2.0.orig.tar.gz"
	cache := t.TempDir()
	r := &runner{opts: Options{Cache: cache}}
	other := append([]byte{}, good...)
	other[7] ^= 1
	for _, c := range []struct {
		name   string
		body   []byte
		status int
		want   string
	}{
		{"longer than the pin", append(append([]byte{}, good...), "and more"...), 0, "sent more than"},
		{"shorter", good[:100], 0, "sent 100 bytes, the pin says"},
		{"other bytes", other, 0, "sha256 "},
		{"not found", nil, http.StatusNotFound, "404 Not Found"},
	} {
		serve, status = c.body, c.status
		_, err := r.fetchRuntimeSource(context.Background(), pin)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
		left, _ := filepath.Glob(filepath.Join(cache, "downloads", "*", "*"))
		if len(left) != 0 {
			t.Errorf("%s: left in the cache: %v", c.name, left)
		}
	}
	serve, status = good, 0
	p, err := r.fetchRuntimeSource(context.Background(), pin)
	if err != nil || filepath.Base(p) != "gcc-12_12.2.0.orig.tar.gz" {
		t.Fatalf("the pinned archive: %q %v", p, err)
	}
	if b, _ := os.ReadFile(p); string(b) != string(good) {
		t.Fatal("kept other bytes")
	}
	n := requests
	if _, err := r.fetchRuntimeSource(context.Background(), pin); err != nil || requests != n {
		t.Errorf("fetched again (%d requests, was %d): %v", requests, n, err)
	}
	// Changed in the cache since: fetched again, not used.
	os.Chmod(p, 0o644)
	os.WriteFile(p, other, 0o644)
	if _, err := r.fetchRuntimeSource(context.Background(), pin); err != nil || requests != n+1 {
		t.Errorf("a changed copy was used (%d requests): %v", requests, err)
	}
}

// TestInstallRuntimeRefusesLinks: a made runtime is directories and
// regular files with the C++ library's headers and archives; one with a
// link (to the build machine's libraries, say) or without its archives is
// refused, and what was installed stays.
func TestInstallRuntimeRefusesLinks(t *testing.T) {
	mk := func(link bool, archives bool) string {
		d := t.TempDir()
		os.MkdirAll(filepath.Join(d, "include", "c++", "12"), 0o755)
		os.MkdirAll(filepath.Join(d, "lib"), 0o755)
		if archives {
			os.WriteFile(filepath.Join(d, "lib", "libstdc++.a"), []byte("!<arch>\n"), 0o644)
			os.WriteFile(filepath.Join(d, "lib", "libgcc_eh.a"), []byte("!<arch>\n"), 0o644)
		}
		if link {
			os.Symlink("/usr/lib/x86_64-linux-gnu", filepath.Join(d, "lib", "host"))
		}
		return d
	}
	dst := filepath.Join(t.TempDir(), "toolchain", "cxxrt")
	if err := installRuntime(mk(false, true), dst, "12"); err != nil {
		t.Fatal(err)
	}
	if err := installRuntime(mk(true, true), dst, "12"); err == nil || !strings.Contains(err.Error(), "lib/host, which is not a regular file or directory") {
		t.Errorf("a runtime with a link: %v", err)
	}
	if err := installRuntime(mk(false, false), dst, "12"); err == nil || !strings.Contains(err.Error(), "has no lib/libstdc++.a") {
		t.Errorf("a runtime without its archives: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "lib", "libstdc++.a")); err != nil {
		t.Errorf("a refused runtime removed the installed one: %v", err)
	}
}
