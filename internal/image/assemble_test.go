package image

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// TestSourcesFromLayout: bases and --index-image entries from an OCI layout
// (offline) give the image of the wanted platform, say so when there is
// none, and bad entries and dates are bad input.
func TestSourcesFromLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "base")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	var adds []mutate.IndexAddendum
	digests := map[string]string{}
	for _, arch := range []string{"arm64", "amd64"} {
		img, _ := random.Image(200, 1)
		cf, _ := img.ConfigFile()
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", arch
		img, _ = mutate.ConfigFile(img, cf)
		d, _ := img.Digest()
		digests[arch] = d.String()
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	if err := p.AppendIndex(mutate.AppendManifests(empty.Index, adds...)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o, err := Sources{Epoch: "1717000000", Base: "oci:" + dir, IndexImages: []string{"doris-be:linux/amd64=oci:" + dir}}.Options(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Epoch.Unix() != 1717000000 {
		t.Errorf("epoch %v", o.Epoch)
	}
	for arch, want := range digests {
		img, ref, err := o.Base(v1.Platform{OS: "linux", Architecture: arch}, "ignored:because-base-wins")
		if err != nil || ref != "oci:"+dir {
			t.Fatal(err, ref)
		}
		if d, _ := img.Digest(); d.String() != want {
			t.Errorf("%s: got %s, want %s", arch, d, want)
		}
	}
	if _, _, err := o.Base(v1.Platform{OS: "linux", Architecture: "riscv64"}, ""); err == nil || !strings.Contains(err.Error(), "has no image for linux/riscv64") || !strings.Contains(err.Error(), "--base oci:") {
		t.Errorf("missing platform: %v", err)
	}
	img, ref, err := o.IndexImage("doris-be", v1.Platform{OS: "linux", Architecture: "amd64"})
	if err != nil || ref != "oci:"+dir {
		t.Fatal(err, ref)
	}
	if d, _ := img.Digest(); d.String() != digests["amd64"] {
		t.Errorf("--index-image gave %s", d)
	}
	if img, _, _ := o.IndexImage("doris-fe", v1.Platform{OS: "linux", Architecture: "amd64"}); img != nil {
		t.Error("--index-image for doris-be applied to doris-fe")
	}
	scratch, err := Sources{Epoch: "1", Base: "scratch"}.Options(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if img, _, err := scratch.Base(v1.Platform{OS: "linux", Architecture: "arm64"}, "docker.io/library/ubuntu:22.04"); img != nil || err != nil {
		t.Errorf("--base scratch gave %v, %v", img, err)
	}
	for _, bad := range []Sources{
		{Epoch: "1", IndexImages: []string{"doris-be=oops"}},
		{Epoch: "1", IndexImages: []string{"doris-be:linux/amd64=a", "doris-be:linux/amd64=b"}},
		{Epoch: "-5"},
		{Epoch: "yesterday"},
		{SourceDir: t.TempDir(), Getenv: func(string) string { return "" }},
	} {
		if _, err := bad.Options(ctx); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
