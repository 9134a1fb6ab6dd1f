package registry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// hostile is a registry in front of an honest one: its rewrite, when set,
// may answer a request itself (true) instead of passing it on. A test
// changes it between cases while a request of the last case may still be
// served: mu guards it.
type hostile struct {
	honest  http.Handler
	mu      sync.Mutex
	rewrite func(w http.ResponseWriter, r *http.Request) bool
}

func (h *hostile) set(rewrite func(w http.ResponseWriter, r *http.Request) bool) {
	h.mu.Lock()
	h.rewrite = rewrite
	h.mu.Unlock()
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	rewrite := h.rewrite
	h.mu.Unlock()
	if rewrite != nil && rewrite(w, r) {
		return
	}
	h.honest.ServeHTTP(w, r)
}

// pushed starts an honest in-memory registry behind a hostile front and
// pushes two different images and an index of both to it.
func pushed(t *testing.T) (h *hostile, host string, a, b v1.Image) {
	t.Helper()
	h = &hostile{honest: ggcrregistry.New()}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	host = u.Host
	a, b = platformImage(t, "arm64"), platformImage(t, "amd64")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: a, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: b, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	for tag, img := range map[string]v1.Image{"a": a, "b": b} {
		if err := remote.Write(mustRef(t, host+"/r:"+tag), img); err != nil {
			t.Fatal(err)
		}
	}
	if err := remote.WriteIndex(mustRef(t, host+"/r:idx"), idx); err != nil {
		t.Fatal(err)
	}
	return h, host, a, b
}

// answerWith answers a manifest GET for the digest of target with the
// manifest bytes of other, under mediaType and a Docker-Content-Digest
// header that names what was asked for.
func answerWith(t *testing.T, target, other interface {
	Digest() (v1.Hash, error)
	RawManifest() ([]byte, error)
}, mediaType types.MediaType) func(w http.ResponseWriter, r *http.Request) bool {
	d, _ := target.Digest()
	body, err := other.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/manifests/"+d.String()) {
			return false
		}
		w.Header().Set("Content-Type", string(mediaType))
		w.Header().Set("Docker-Content-Digest", d.String())
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
		return true
	}
}

func TestGuardRefusesOtherBytesForADigest(t *testing.T) {
	h, host, a, b := pushed(t)
	da, _ := a.Digest()
	ro := Options{}.Remote(context.Background())
	ref := mustRef(t, host+"/r@"+da.String())
	if _, err := remote.Get(ref, ro...); err != nil {
		t.Fatalf("honest registry: %v", err)
	}
	for _, c := range []struct {
		name string
		mt   types.MediaType
		want string
	}{
		// go-containerregistry takes a schema 1 manifest's digest from the
		// header: without the guard, b's bytes pass as a's.
		{"schema 1", types.DockerManifestSchema1Signed, "schema 1 manifest"},
		{"schema 1 unsigned", types.DockerManifestSchema1, "schema 1 manifest"},
		{"OCI", types.OCIManifestSchema1, "other bytes than the digest names"},
	} {
		h.set(answerWith(t, a, b, c.mt))
		_, err := remote.Get(ref, ro...)
		var ge *GuardError
		if err == nil || !errors.As(err, &ge) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want a GuardError containing %q", c.name, err, c.want)
		}
		if fault.IsEnv(err) {
			t.Errorf("%s: a registry's lie counts as the environment failing (exit 3), not as a failed check: %v", c.name, err)
		}
	}
	// A child of an index is fetched by digest inside go-containerregistry:
	// the guard checks it too.
	h.set(answerWith(t, a, b, types.DockerManifestSchema1Signed))
	desc, err := remote.Get(mustRef(t, host+"/r:idx"), append(ro, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "arm64"}))...)
	if err != nil {
		t.Fatal(err)
	}
	img, err := desc.Image()
	if err == nil {
		_, err = img.RawManifest()
	}
	if err == nil || !strings.Contains(err.Error(), "schema 1 manifest") {
		t.Errorf("index child answered with schema 1 bytes: err = %v", err)
	}
	// By tag, a schema 1 answer is refused too (its digest would be the header's).
	h.set(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/manifests/a") {
			return false
		}
		w.Header().Set("Content-Type", string(types.DockerManifestSchema1Signed))
		w.Header().Set("Docker-Content-Digest", da.String())
		if r.Method == http.MethodGet {
			raw, _ := b.RawManifest()
			_, _ = w.Write(raw)
		}
		return true
	})
	if _, err := remote.Get(mustRef(t, host+"/r:a"), ro...); err == nil || !strings.Contains(err.Error(), "schema 1 manifest") {
		t.Errorf("schema 1 by tag: err = %v", err)
	}
	if _, err := remote.Head(mustRef(t, host+"/r:a"), ro...); err == nil || !strings.Contains(err.Error(), "schema 1 manifest") {
		t.Errorf("schema 1 by tag, HEAD: err = %v", err)
	}
}

func TestGuardFollowsRedirects(t *testing.T) {
	h, host, a, b := pushed(t)
	da, _ := a.Digest()
	raw, _ := b.RawManifest()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", string(types.DockerManifestSchema1Signed))
		w.Header().Set("Docker-Content-Digest", da.String())
		_, _ = w.Write(raw)
	}))
	defer other.Close()
	h.set(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/manifests/"+da.String()) {
			return false
		}
		http.Redirect(w, r, other.URL+"/elsewhere", http.StatusTemporaryRedirect)
		return true
	})
	_, err := remote.Get(mustRef(t, host+"/r@"+da.String()), Options{}.Remote(context.Background())...)
	if err == nil || !strings.Contains(err.Error(), "schema 1 manifest") {
		t.Errorf("redirected to another host's schema 1 bytes: err = %v", err)
	}
}

func TestGuardBoundsStalls(t *testing.T) {
	h, host, a, _ := pushed(t)
	layers, _ := a.Layers()
	ld, _ := layers[0].Digest()
	stall := 300 * time.Millisecond
	ro := Options{Stall: stall}.Remote(context.Background())
	release := make(chan struct{})
	defer close(release)
	for _, c := range []struct {
		name    string
		rewrite func(w http.ResponseWriter, r *http.Request) bool
		do      func() error
	}{
		{"no answer", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.Contains(r.URL.Path, "/manifests/") {
				<-release
				return true
			}
			return false
		}, func() error {
			_, err := remote.Get(mustRef(t, host+"/r:a"), ro...)
			return err
		}},
		{"a byte at a time", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/blobs/"+ld.String()) {
				return false
			}
			w.Header().Set("Content-Length", "1000000")
			w.WriteHeader(http.StatusOK)
			for range 1000000 {
				if _, err := w.Write([]byte{0}); err != nil {
					return true
				}
				w.(http.Flusher).Flush()
				select {
				case <-release:
					return true
				case <-r.Context().Done():
					return true
				case <-time.After(20 * time.Millisecond):
				}
			}
			return true
		}, func() error {
			l, err := remote.Layer(mustRef(t, host+"/r@"+ld.String()).(name.Digest), ro...)
			if err != nil {
				return err
			}
			rc, err := l.Compressed()
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(io.Discard, rc)
			return err
		}},
	} {
		h.set(c.rewrite)
		done := make(chan error, 1)
		go func() { done <- c.do() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "sent nothing for 300ms") || !fault.IsEnv(err) {
				t.Errorf("%s: err = %v, want the stall error, an environment failure", c.name, err)
			}
		case <-time.After(20 * stall):
			t.Errorf("%s: still waiting after %s, stall is %s", c.name, 20*stall, stall)
		}
	}
}

// An upload that takes longer than the stall period but keeps moving is
// not a stall, nor is a download that does.
func TestGuardSlowButMoving(t *testing.T) {
	if raceDetector {
		// The registry's hashing after the body's end takes several
		// times as long under the race detector, beyond any stall a
		// test can time against on a loaded machine (make test runs it).
		t.Skip("times a server: not under -race")
	}
	stall, size := 500*time.Millisecond, int64(8<<20)
	honest := ggcrregistry.New()
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && (r.Method == http.MethodPatch || r.Method == http.MethodPut) {
			// Read the upload 256 KiB every 25 ms into memory, then
			// hand it on: 8 MiB take 0.8 s. (On loopback the client
			// may hand all of it to the connection at once, so this is
			// the wait after the body's end, not the resets on the way.)
			var buf bytes.Buffer
			for {
				n, err := io.CopyN(&buf, r.Body, 256<<10)
				if err != nil || n < 256<<10 {
					break
				}
				time.Sleep(25 * time.Millisecond)
			}
			r.Body = io.NopCloser(&buf)
			r.ContentLength = int64(buf.Len())
		}
		honest.ServeHTTP(w, r)
	})
	s := httptest.NewServer(slow)
	defer s.Close()
	u, _ := url.Parse(s.URL)
	img, err := random.Image(size, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := mustRef(t, u.Host+"/slow:1")
	start := time.Now()
	if err := remote.Write(ref, img, Options{Stall: stall}.Remote(context.Background())...); err != nil {
		t.Fatalf("a slow but moving upload failed: %v", err)
	}
	if took := time.Since(start); took < stall {
		t.Fatalf("the upload took %s: the test did not exercise a long upload", took)
	}
	// And the same bytes downloaded slowly, through a proxy that sends
	// 64 KiB every 20 ms: 2.6 s in all.
	target, _ := url.Parse(s.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		resp.Body = &slowReader{rc: resp.Body}
		return nil
	}
	ps := httptest.NewServer(proxy)
	defer ps.Close()
	pu, _ := url.Parse(ps.URL)
	got, err := remote.Image(mustRef(t, pu.Host+"/slow:1"), Options{Stall: stall}.Remote(context.Background())...)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := got.Layers()
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatalf("a slow but moving download failed: %v", err)
	}
}

type slowReader struct {
	rc   io.ReadCloser
	sent int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.sent >= stallBytes {
		time.Sleep(20 * time.Millisecond)
		s.sent = 0
	}
	n, err := s.rc.Read(p[:min(len(p), stallBytes-s.sent)])
	s.sent += n
	return n, err
}

func (s *slowReader) Close() error { return s.rc.Close() }

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A body that never stalls but arrives slower than the minimum average
// rate fails, naming the registry, the blob and the rate: at the deadline
// its declared size gives, or, without a declared size, as it is read.
func TestGuardBoundsSlowReads(t *testing.T) {
	h, host, a, _ := pushed(t)
	layers, _ := a.Layers()
	ld, _ := layers[0].Digest()
	stall := 300 * time.Millisecond
	ro := Options{Stall: stall, MinRate: 4 << 20}.Remote(context.Background())
	release := make(chan struct{})
	defer close(release)
	for _, declared := range []bool{true, false} {
		// 64 KiB + 1 every 100 ms: never a stall, about 640 KiB/s, 1.6 s for 1 MiB.
		h.set(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/blobs/"+ld.String()) {
				return false
			}
			if declared {
				w.Header().Set("Content-Length", strconv.Itoa(1<<20))
			}
			w.WriteHeader(http.StatusOK)
			chunk := make([]byte, 64<<10+1)
			for sent := 0; sent < 1<<20; sent += len(chunk) {
				if _, err := w.Write(chunk[:min(len(chunk), 1<<20-sent)]); err != nil {
					return true
				}
				w.(http.Flusher).Flush()
				select {
				case <-release:
					return true
				case <-r.Context().Done():
					return true
				case <-time.After(100 * time.Millisecond):
				}
			}
			return true
		})
		start := time.Now()
		l, err := remote.Layer(mustRef(t, host+"/r@"+ld.String()).(name.Digest), ro...)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := l.Compressed()
		if err == nil {
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
		}
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "slower than the minimum of 4096 KiB/s") || !strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), ld.Hex) {
			t.Errorf("declared size %v: err = %v, want the rate error naming the registry and blob", declared, err)
		}
		if !fault.IsEnv(err) {
			t.Errorf("declared size %v: a slow registry is not an environment failure: %v", declared, err)
		}
		if took > 1200*time.Millisecond {
			t.Errorf("declared size %v: failed after %s; the deadline was about 0.55 s", declared, took)
		}
	}
}

// TestGuardStallIsTheEnvironment: a registry that never answers its ping
// (/v2/) fails after the stall as the environment (exit 3), though
// go-containerregistry joins the ping's two attempts (HTTPS, then HTTP on
// loopback) in an error that does not Unwrap.
func TestGuardStallIsTheEnvironment(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	ref := mustRef(t, strings.TrimPrefix(srv.URL, "http://")+"/doris/doris-be:2.1.8")
	_, err := remote.Get(ref, Options{Stall: 300 * time.Millisecond}.Remote(context.Background())...)
	if err == nil || !strings.Contains(err.Error(), "sent nothing for 300ms") || !fault.IsEnv(err) {
		t.Errorf("a registry that never answers: %v (environment: %v)", err, fault.IsEnv(err))
	}
}
