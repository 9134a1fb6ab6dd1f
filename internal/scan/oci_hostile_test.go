package scan

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// rawLayout writes OCI layouts by hand, so tests can make them wrong.
type rawLayout struct {
	t   *testing.T
	dir string
}

func newRawLayout(t *testing.T) rawLayout {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755)
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	return rawLayout{t, dir}
}

type desc struct {
	MediaType string `json:"mediaType,omitempty"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

func (l rawLayout) blob(mt string, b []byte) desc {
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(l.dir, "blobs", "sha256", h), b, 0o644); err != nil {
		l.t.Fatal(err)
	}
	return desc{mt, "sha256:" + h, int64(len(b))}
}

func (l rawLayout) manifest(mt string, layers ...desc) desc {
	cfg := l.blob("application/vnd.oci.image.config.v1+json", []byte(`{"architecture":"arm64","os":"linux"}`))
	b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mt, "config": cfg, "layers": layers})
	return l.blob(mt, b)
}

func (l rawLayout) index(manifests ...desc) {
	b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": manifests})
	os.WriteFile(filepath.Join(l.dir, "index.json"), b, 0o644)
}

func tarOf(name string, data []byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg})
	tw.Write(data)
	tw.Close()
	return buf.Bytes()
}

// TestOCIMediaTypesDoNotHideLayers: a descriptor without a media type, and
// a layer typed application/octet-stream holding a bare x86 ELF, are
// scanned by their content.
func TestOCIMediaTypesDoNotHideLayers(t *testing.T) {
	obj := x86Object(t)
	l := newRawLayout(t)
	noType := l.manifest("", l.blob("", tarOf("lib/a.o", obj)))
	noType.MediaType = ""
	octet := l.manifest("application/vnd.oci.image.manifest.v1+json", l.blob("application/octet-stream", obj))
	l.index(noType, octet)
	r := scan(t, policy(t, "graviton2"), "oci:"+l.dir)
	if !hasViolation(r, KindForeignArch, "@"+noType.Digest+"!/layer0!/lib/a.o") || !hasViolation(r, KindForeignArch, "@"+octet.Digest+"!/layer0") {
		t.Errorf("%+v", r.Findings)
	}
}

// TestOCIDigests: a layout blob whose content is not what its digest says
// is a finding (the layer's content is still scanned), read to its end even
// when the altered bytes lie after the tar's end; an index blob that lists
// itself does not loop.
func TestOCIDigests(t *testing.T) {
	obj := x86Object(t)
	l := newRawLayout(t)
	layer := l.blob("application/vnd.oci.image.layer.v1.tar", tarOf("lib/a.o", obj))
	m := l.manifest("application/vnd.oci.image.manifest.v1+json", layer)
	l.index(m)
	p := filepath.Join(l.dir, "blobs", "sha256", strings.TrimPrefix(layer.Digest, "sha256:"))
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 1 // in the tar's trailing padding: a reader that stops at the end marker never sees it
	os.WriteFile(p, b, 0o644)
	r := scan(t, nil, "oci:"+l.dir)
	if !unreadableWith(r, "!/layer0", "does not match its digest") {
		t.Errorf("altered layer: %+v", r.Findings)
	}
	// A manifest altered in storage is not followed.
	mp := filepath.Join(l.dir, "blobs", "sha256", strings.TrimPrefix(m.Digest, "sha256:"))
	mb, _ := os.ReadFile(mp)
	os.WriteFile(mp, append(mb, ' '), 0o644)
	r = scan(t, nil, "oci:"+l.dir)
	if !unreadableWith(r, "@"+m.Digest, "does not match its descriptor") {
		t.Errorf("altered manifest: %+v", r.Findings)
	}

	// An index blob that names itself (its file is named for a digest its
	// content does not have, as only an edited layout can be).
	c := newRawLayout(t)
	self := "sha256:" + strings.Repeat("ab", 32)
	body, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []desc{{"application/vnd.oci.image.index.v1+json", self, 0}}})
	os.WriteFile(filepath.Join(c.dir, "blobs", "sha256", strings.Repeat("ab", 32)), body, 0o644)
	c.index(desc{"application/vnd.oci.image.index.v1+json", self, int64(len(body))})
	r, err := scanWithin(t, 10*time.Second, nil, Options{}, "oci:"+c.dir)
	if err != nil || r.Summary.Unreadable == 0 {
		t.Errorf("self-listing index: %v %+v", err, r.Findings)
	}
	// With digests out of the way (a store that trusts its content), the
	// cycle itself is caught.
	w := &walker{opts: Options{MaxDepth: 8, MaxBytes: 1 << 30, MaxEntries: 1000, MaxMember: 1 << 20}, ctx: context.Background(), rep: &Report{}, seen: map[string]bool{}}
	sum := sha256.Sum256(body)
	selfOK := "sha256:" + hex.EncodeToString(sum[:])
	cyc, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []desc{{"application/vnd.oci.image.index.v1+json", selfOK, int64(len(body))}}})
	w.node(loopStore{body}, cyc, "", "oci:x", 0, map[string]bool{selfOK: true})
	found := false
	for _, f := range w.rep.Findings {
		if strings.Contains(f.Detail, "index cycle") {
			found = true
		}
	}
	if !found {
		t.Errorf("cycle: %+v", w.rep.Findings)
	}
}

// loopStore serves one blob for every digest.
type loopStore struct{ b []byte }

func (s loopStore) open(v1.Hash) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(s.b)), nil
}

func pushImage(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryLayerAlteredInStorage: the registry serves a layer whose
// bytes after the tar's end were changed; the scan reads to the end of the
// blob and says so.
func TestRegistryLayerAlteredInStorage(t *testing.T) {
	img := testImage(t)
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	reg := registry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+ld.String()) {
			rc, _ := layers[0].Compressed()
			var b bytes.Buffer
			b.ReadFrom(rc)
			raw := b.Bytes()
			raw[len(raw)-5] ^= 0xff // the gzip trailer: CRC32/size, checked only at the end
			w.Header().Set("Content-Length", fmt.Sprint(len(raw)))
			w.Write(raw)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/doris/doris-be:altered"
	pushImage(t, ref, img)
	r, err := Scan(context.Background(), []string{ref}, policy(t, "graviton2"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.Clean || r.Summary.Unreadable == 0 || !unreadableWith(r, "!/layer0", "checksum") {
		t.Errorf("altered registry layer: %+v %+v", r.Summary, r.Findings)
	}
}

// TestOCILayerAfterEnd: what follows an uncompressed tar layer's end is
// looked at, as after any other tar (a jar appended to the layer). The
// uncompressed layer was read by the tar reader alone, which stops there.
func TestOCILayerAfterEnd(t *testing.T) {
	obj := x86Object(t)
	l := newRawLayout(t)
	plain := append(tarOf("etc/motd", []byte("hello\n")), x86Zip(t, obj)...)
	m := l.manifest("application/vnd.oci.image.manifest.v1+json", l.blob("application/vnd.oci.image.layer.v1.tar", plain))
	l.index(m)
	r := scan(t, policy(t, "graviton2"), "oci:"+l.dir)
	if !hasViolation(r, KindForeignArch, "@"+m.Digest+"!/layer0(trailing)!/lib/libx.so") {
		t.Errorf("the jar after an uncompressed layer's end: %+v", r.Findings)
	}
}
