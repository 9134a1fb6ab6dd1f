package registry

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/fault"
)

func TestParseLocation(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Location
		err  string
	}{
		{in: "oci:out/images", want: Location{Layout: "out/images"}},
		{in: "oci:out/images:doris-be:2.1.8", want: Location{Layout: "out/images", Name: "doris-be:2.1.8"}},
		{in: "127.0.0.1:5000/doris/doris-be:2.1.8", want: Location{Ref: "127.0.0.1:5000/doris/doris-be:2.1.8"}},
		{in: "oci:", err: "no directory"},
		{in: "oci::doris-be:1", err: "no directory"},
		{in: "oci:out:doris-be", err: "want oci:DIR:NAME:TAG"},
		{in: "oci:out:doris-be:", err: "want oci:DIR:NAME:TAG"},
		{in: "", err: "empty"},
	} {
		got, err := ParseLocation(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrLocation) {
				t.Errorf("%q: error %v, want one containing %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if got.String() != c.in {
			t.Errorf("%q: String() = %q", c.in, got.String())
		}
	}
}

func TestOptionsParse(t *testing.T) {
	var o Options
	if _, err := o.Repository("reg.example.com/doris:1"); err == nil {
		t.Error("a tag in a repository was accepted")
	}
	if _, err := o.Repository("reg.example.com/doris@sha256:00"); err == nil {
		t.Error("a digest in a repository was accepted")
	}
	r, err := o.Repository("127.0.0.1:5000/doris/")
	if err != nil || r.String() != "127.0.0.1:5000/doris" || r.Scheme() != "http" {
		t.Errorf("loopback repository: %v %v %s", r, err, r.Scheme())
	}
	r, err = o.Repository("reg.example.com/doris")
	if err != nil || r.Scheme() != "https" {
		t.Errorf("remote repository: %v, scheme %s", err, r.Scheme())
	}
	r, err = Options{Insecure: true}.Repository("reg.example.com/doris")
	if err != nil || r.Scheme() != "http" {
		t.Errorf("--insecure: %v, scheme %s", err, r.Scheme())
	}
	for in, want := range map[string]string{
		"127.0.0.1:5000":               "127.0.0.1:5000", // a registry's root
		"127.0.0.1:5000/release/":      "127.0.0.1:5000/release",
		"ghcr.io/org/doris":            "ghcr.io/org/doris",
		"127.0.0.1:5000/doris:2.1":     "",
		"ghcr.io/org/doris@sha256:abc": "",
		"Not A Registry/UPPER":         "",
	} {
		got, err := o.Prefix(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("Prefix(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := o.Tag("reg.example.com/doris"); err == nil {
		t.Error("a tag without a tag was accepted")
	}
}

func platformImage(t *testing.T, arch string) v1.Image {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestLayoutOpenAndImageFor(t *testing.T) {
	dir := t.TempDir()
	arm, amd := platformImage(t, "arm64"), platformImage(t, "amd64")
	nested := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: arm})
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(amd, layout.WithAnnotations(map[string]string{RefName: "doris-be:1-amd"})); err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(nested, layout.WithAnnotations(map[string]string{RefName: "doris-be:1"})); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var o Options
	op, err := o.Open(ctx, Location{Layout: dir, Name: "doris-be:1"})
	if err != nil || op.Index == nil || op.Image != nil {
		t.Fatalf("index entry: %+v %v", op, err)
	}
	op, err = o.Open(ctx, Location{Layout: dir, Name: "doris-be:1-amd"})
	if err != nil || op.Image == nil {
		t.Fatalf("image entry: %+v %v", op, err)
	}
	if _, err := o.Open(ctx, Location{Layout: dir, Name: "doris-be:2"}); err == nil || !strings.Contains(err.Error(), "it has doris-be:1, doris-be:1-amd") {
		t.Errorf("missing entry: %v", err)
	}
	if _, err := o.Open(ctx, Location{Layout: dir}); !errors.Is(err, ErrLocation) {
		t.Errorf("a whole layout opened as one image: %v", err)
	}
	// The arm64 image sits in a nested index: found by platform.
	img, err := o.ImageFor(ctx, Location{Layout: dir}, v1.Platform{OS: "linux", Architecture: "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := digest(t, img), digest(t, arm); got != want {
		t.Errorf("arm64 image %s, want %s", got, want)
	}
	if _, err := o.ImageFor(ctx, Location{Layout: dir, Name: "doris-be:1-amd"}, v1.Platform{OS: "linux", Architecture: "arm64"}); err == nil || !strings.Contains(err.Error(), "no image for linux/arm64") {
		t.Errorf("wrong-platform entry: %v", err)
	}
	if _, err := o.ImageFor(ctx, Location{Layout: dir}, v1.Platform{OS: "linux", Architecture: "riscv64"}); err == nil || !strings.Contains(err.Error(), "no image for linux/riscv64") {
		t.Errorf("absent platform: %v", err)
	}
	// A nested index whose blob is gone is an error, not "no image".
	d, err := nested.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "blobs", "sha256", d.Hex)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ImageFor(ctx, Location{Layout: dir}, v1.Platform{OS: "linux", Architecture: "arm64"}); err == nil || strings.Contains(err.Error(), "no image for") {
		t.Errorf("a broken nested index was reported as a missing platform: %v", err)
	}
}

func digest(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func TestRegistryOpenHonoursContext(t *testing.T) {
	s := httptest.NewServer(ggcrregistry.New())
	defer s.Close()
	host := strings.TrimPrefix(s.URL, "http://")
	arm := platformImage(t, "arm64")
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	ref, err := name.ParseReference(host + "/doris/doris-be:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	var o Options
	ctx := context.Background()
	op, err := o.Open(ctx, Location{Ref: ref.String()})
	if err != nil || op.Index == nil {
		t.Fatalf("open: %+v %v", op, err)
	}
	img, err := o.ImageFor(ctx, Location{Ref: ref.String()}, v1.Platform{OS: "linux", Architecture: "arm64"})
	if err != nil || digest(t, img) != digest(t, arm) {
		t.Fatalf("platform image: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := o.Open(cancelled, Location{Ref: ref.String()}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context did not stop the request: %v", err)
	}
}

func TestReadPassword(t *testing.T) {
	var o Options
	if err := o.ReadPassword("", strings.NewReader("pw\n")); !fault.IsInput(err) || o.Auth != nil {
		t.Errorf("no username: %v, auth %v; want bad input and no credentials", err, o.Auth)
	}
	if err := o.ReadPassword("ci", strings.NewReader("s3cret\r\n")); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Auth.Authorization()
	if err != nil || cfg.Username != "ci" || cfg.Password != "s3cret" {
		t.Errorf("credentials = %+v, %v; want ci / s3cret without the line end", cfg, err)
	}
}
