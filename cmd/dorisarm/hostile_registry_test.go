package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// TestHostileRegistryFront: the real binary against a real docker-registry
// behind a front that lies. Answering a request for a signed release's
// digest with another image's manifest labelled Docker schema 1 (whose
// digest go-containerregistry takes from the header) is refused by verify
// and promote, and nothing is tagged; a front that never answers fails
// after --registry-timeout, exit 3 (the network or the registry, not the
// image).
func TestHostileRegistryFront(t *testing.T) {
	slow(t, "signs and promotes against a real docker-registry")
	addr := startRegistry(t)
	push := func(tag string, ann map[string]string) v1.Hash {
		img, err := random.Image(200, 1)
		if err != nil {
			t.Fatal(err)
		}
		img = mutate.Annotations(img, ann).(v1.Image)
		if err := remote.Write(mustRef(t, addr+"/staging/doris-be:"+tag), img); err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		return d
	}
	d := push("2.1.7-generic-armv8", map[string]string{image.AnnBuild: "sha256:abc", "org.opencontainers.image.version": "2.1.7"})
	push("2.1.8-x86_64", map[string]string{"org.opencontainers.image.version": "2.1.8"})
	keys := t.TempDir()
	priv, pub, err := sign.Keygen(keys, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sign(context.Background(), mustRef(t, addr+"/staging/doris-be@"+d.String())); err != nil {
		t.Fatal(err)
	}
	forged, err := remote.Get(mustRef(t, addr+"/staging/doris-be:2.1.8-x86_64"))
	if err != nil {
		t.Fatal(err)
	}

	real, _ := url.Parse("http://" + addr)
	proxy := httputil.NewSingleHostReverseProxy(real)
	hang := make(chan struct{})
	defer close(hang)
	var hanging atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case hanging.Load():
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		case strings.HasSuffix(r.URL.Path, "/manifests/"+d.String()):
			w.Header().Set("Content-Type", string(types.DockerManifestSchema1Signed))
			w.Header().Set("Docker-Content-Digest", d.String())
			if r.Method == http.MethodGet {
				_, _ = w.Write(forged.Manifest)
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	host := strings.TrimPrefix(front.URL, "http://")

	_, errOut, code := run(t, "verify", "--key", pub, host+"/staging/doris-be@"+d.String())
	if code != 2 || !strings.Contains(errOut, "schema 1 manifest") {
		t.Errorf("verify through the front: exit %d, %s", code, errOut)
	}
	dst := host + "/release/doris-be:2.1.8-x86_64"
	_, errOut, code = run(t, "promote", "--key", pub, "--yes", host+"/staging/doris-be@"+d.String(), dst)
	if code == 0 || !strings.Contains(errOut, "schema 1 manifest") {
		t.Errorf("promote through the front: exit %d, %s", code, errOut)
	}
	if _, err := remote.Head(mustRef(t, addr+"/release/doris-be:2.1.8-x86_64")); err == nil {
		t.Error("promote through the front tagged the release")
	}
	// The same digest straight from the registry verifies its signature:
	// what failed above was the front.
	stdout, _, _ := run(t, "verify", "--key", pub, addr+"/staging/doris-be@"+d.String())
	if !strings.Contains(stdout, "ok    signature of") {
		t.Errorf("verify straight from the registry:\n%s", stdout)
	}

	hanging.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "verify", "--registry-timeout", "1s", "--key", pub, host+"/staging/doris-be:2.1.8-x86_64")
	var e bytes.Buffer
	cmd.Stderr = &e
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("verify against a front that never answers: still running after %s with --registry-timeout 1s", took)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(e.String(), "sent nothing for 1s") {
		t.Errorf("verify against a front that never answers: %v, %s", err, e.String())
	}
}
