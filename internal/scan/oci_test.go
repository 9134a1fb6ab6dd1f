package scan

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testImage is an arm64 image whose layer holds an aarch64 and an x86-64 library.
func testImage(t *testing.T) v1.Image {
	t.Helper()
	need(t, "aarch64-linux-gnu-gcc", "gcc")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "l.c"), cFunc)
	for _, c := range [][]string{{"aarch64-linux-gnu-gcc", "arm.so"}, {"gcc", "x86.so"}} {
		if out, err := exec.Command(c[0], "-shared", "-fPIC", filepath.Join(dir, "l.c"), "-o", filepath.Join(dir, c[1])).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range [][2]string{{"arm.so", "opt/apache-doris/be/lib/libgood.so"}, {"x86.so", "opt/apache-doris/be/lib/libbad.so"}} {
		data, _ := os.ReadFile(filepath.Join(dir, f[0]))
		tw.WriteHeader(&tar.Header{Name: f[1], Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf.OS, cf.Architecture, cf.Variant = "linux", "arm64", "v8"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestOCILayoutAndRegistry(t *testing.T) {
	img := testImage(t)
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"})); err != nil {
		t.Fatal(err)
	}
	r := scan(t, policy(t, "graviton2"), "oci:"+dir)
	want := "oci:" + dir + "[linux/arm64/v8]!/layer0!/opt/apache-doris/be/lib/libbad.so"
	if !hasViolation(r, KindForeignArch, want) || r.Summary.Violations != 1 || r.Summary.ELF != 2 {
		t.Errorf("layout: %+v\n%+v", r.Summary, r.Findings)
	}

	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/doris/doris-be:2.1.8-graviton2"
	tag, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	r, err = Scan(context.Background(), []string{ref}, policy(t, "graviton2"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasViolation(r, KindForeignArch, ref+"!/layer0!/opt/apache-doris/be/lib/libbad.so") {
		t.Errorf("registry: %+v", r.Findings)
	}
	if _, err := Scan(context.Background(), []string{strings.TrimPrefix(srv.URL, "http://") + "/doris/missing:1"}, nil, Options{}); err == nil {
		t.Error("a missing image is an input error")
	}
}

// A registry that never answers fails the scan of its image once
// RegistryStall has passed, instead of holding it.
func TestRegistryScanStallBounded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/doris/doris-be:2.1.8"
	done := make(chan error, 1)
	go func() {
		_, err := Scan(context.Background(), []string{ref}, nil, Options{RegistryStall: 300 * time.Millisecond})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "sent nothing for 300ms") {
			t.Errorf("scan of a registry that never answers: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the scan still waits for the registry after 20 s")
	}
}
