package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
	dregistry "github.com/dorisarm/dorisarm/internal/registry"
)

// TestReleaseRows: a row a tag, named under the prefix, with its kind and
// digest; the text lines them up.
func TestReleaseRows(t *testing.T) {
	rel := sampleRelease(t, t.TempDir(), three)
	plain, err := ReleaseRows("", rel)
	if err != nil {
		t.Fatal(err)
	}
	under, _ := ReleaseRows("oci:out/images", rel)
	if len(plain) != len(rel) || len(under) != len(rel) {
		t.Fatalf("%d and %d rows for %d tags", len(plain), len(under), len(rel))
	}
	var b strings.Builder
	if err := plain.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	digestAt := -1
	for i, tg := range rel {
		d, _ := tg.Digest()
		kind := "image"
		if tg.Index != nil {
			kind = "index"
		}
		want := Row{Ref: tg.Repo + ":" + tg.Tag, Kind: kind, Digest: d.String()}
		if plain[i] != want || under[i].Ref != "oci:out/images:"+want.Ref || under[i].Digest != want.Digest {
			t.Errorf("row %d = %+v / %+v, want %+v", i, plain[i], under[i], want)
		}
		if f := strings.Fields(lines[i]); len(f) != 3 || f[0] != want.Ref || f[1] != kind || f[2] != want.Digest {
			t.Errorf("line %d = %q", i, lines[i])
		}
		at := strings.Index(lines[i], "sha256:")
		if digestAt >= 0 && at != digestAt {
			t.Errorf("line %d: digest at column %d, not %d: %q", i, at, digestAt, lines[i])
		}
		digestAt = at
	}
}

// TestPublishLayout: a dry run writes nothing and says so; otherwise the
// layout is written and what it holds can be inspected by location.
func TestPublishLayout(t *testing.T) {
	rel := sampleRelease(t, t.TempDir(), three)
	dir := filepath.Join(t.TempDir(), "images")
	loc := dregistry.Location{Layout: dir}
	dry, err := PublishLayout(loc, rel, true)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	dry.WriteText(&b)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a dry run made %s", dir)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(rel)+1 || lines[len(rel)] != fmt.Sprintf("dry run: %d tags; nothing written to %s", len(rel), dir) {
		t.Errorf("dry run text:\n%s", b.String())
	}

	wr, err := PublishTo(context.Background(), loc, rel, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	wr.WriteText(&b)
	if strings.Count(b.String(), "\n") != len(rel) || strings.Contains(b.String(), "dry run") {
		t.Errorf("publish text:\n%s", b.String())
	}
	// As JSON, each row names where its tag is.
	var rows []Row
	if data, err := json.Marshal(wr); err != nil || json.Unmarshal(data, &rows) != nil || len(rows) != len(rel) ||
		rows[0].Ref != "oci:"+dir+":"+rel[0].Repo+":"+rel[0].Tag || rows[0].Digest != dry.Rows[0].Digest {
		t.Errorf("JSON rows: %+v, %v", rows, err)
	}
	// A registry that cannot be reached fails the publish as a gate.
	o := PublishOptions{Registry: dregistry.Options{Backoff: &remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1}}}
	if _, err := PublishTo(context.Background(), dregistry.Location{Ref: "127.0.0.1:1/doris"}, rel, o); !errors.Is(err, fault.ErrGate) {
		t.Errorf("publish to a closed port: %v, want a failed gate", err)
	}
	idx := byRef(rel)["doris-be:2.1.8"]
	want, _ := idx.Digest()
	ctx := context.Background()
	in, err := InspectLocation(ctx, "oci:"+dir+":doris-be:2.1.8", dregistry.Options{})
	if err != nil || in.Kind != "index" || in.Digest != want.String() || len(in.Manifests) != 2 {
		t.Fatalf("inspect: %+v, %v; want the index %s of 2 platforms", in, err, want)
	}
	b.Reset()
	in.WriteText(&b)
	if !strings.Contains(b.String(), "index "+want.String()+"\n") || !strings.Contains(b.String(), "io.dorisarm.target=x86_64") {
		t.Errorf("inspect text:\n%s", b.String())
	}
	for _, bad := range []string{"oci:", "oci:" + filepath.Join(dir, "none") + ":doris-be:2.1.8", "oci:" + dir + ":doris-be:9.9"} {
		if _, err := InspectLocation(ctx, bad, dregistry.Options{}); !fault.IsInput(err) {
			t.Errorf("inspect %s: %v, want bad input", bad, err)
		}
	}
}

func TestDestination(t *testing.T) {
	for in, want := range map[string]dregistry.Location{
		"oci:out/images":            {Layout: "out/images"},
		"127.0.0.1:5000/doris":      {Ref: "127.0.0.1:5000/doris"},
		"":                          {},
		"oci:out/images:doris-be:1": {},
		"oci:":                      {},
	} {
		got, err := Destination(in)
		if got != want || (want == dregistry.Location{}) != fault.IsInput(err) {
			t.Errorf("Destination(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
}

func TestPublishReportText(t *testing.T) {
	rep := &Report{Tags: []Pushed{{Ref: "r/doris-be:2.1.8", Digest: "sha256:aa", Size: 1000, Upload: 600}, {Ref: "r/doris-fe:2.1.8", Digest: "sha256:bb", Size: 20, Upload: 0}},
		Uploaded: 600, UploadedBlobs: 3}
	var b strings.Builder
	rep.WriteText(&b)
	want := "r/doris-be:2.1.8  sha256:aa  1000 bytes  600 to upload\n" +
		"r/doris-fe:2.1.8  sha256:bb  20 bytes    0 to upload\n" +
		"published 2 tags: uploaded 3 blobs, 600 bytes\n"
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	rep.DryRun = true
	b.Reset()
	rep.WriteText(&b)
	if !strings.HasSuffix(b.String(), "\ndry run: 2 tags, 600 blob bytes to upload; nothing pushed\n") {
		t.Errorf("dry run text:\n%s", b.String())
	}
}

// TestAssemble: a request finds the builds, their recipe and the options,
// and makes the release Release makes from the same inputs.
func TestAssemble(t *testing.T) {
	out := t.TempDir()
	want := sampleRelease(t, out, three)
	var asked string
	req := Request{Builds: out, Matrix: func() (*matrix.Matrix, error) { return matrix.Load(filepath.Join(repo, "matrix.yaml")) },
		RecipeFor:  func(name string) string { asked = name; return filepath.Join(repo, "recipes", name+".yaml") },
		SampleTree: func() (string, error) { return t.TempDir(), nil },
		Sources:    Sources{Epoch: "1700000000", Revision: "abc123", SourceURL: "https://example.invalid/doris", Base: "scratch"}}
	got, err := Assemble(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if asked != "minidoris" || len(got) != len(want) {
		t.Fatalf("recipe asked for %q, %d tags (want minidoris, %d)", asked, len(got), len(want))
	}
	for i := range want {
		g, _ := got[i].Digest()
		w, _ := want[i].Digest()
		if got[i].Repo+got[i].Tag != want[i].Repo+want[i].Tag || g != w {
			t.Errorf("tag %d: %s:%s %s, want %s:%s %s", i, got[i].Repo, got[i].Tag, g, want[i].Repo, want[i].Tag, w)
		}
	}
	req.Builds = t.TempDir()
	if _, err := Assemble(context.Background(), req); !fault.IsInput(err) {
		t.Errorf("no builds: %v, want bad input", err)
	}
}

// TestPublishRelease: the destination is checked first, then the password
// read, then the release assembled and written (a layout gets *Written).
func TestPublishRelease(t *testing.T) {
	out := t.TempDir()
	sampleRelease(t, out, three)
	dir := filepath.Join(t.TempDir(), "images")
	req := PublishRequest{Repo: "oci:" + dir, Request: Request{Builds: out,
		Matrix:     func() (*matrix.Matrix, error) { return matrix.Load(filepath.Join(repo, "matrix.yaml")) },
		RecipeFor:  func(name string) string { return filepath.Join(repo, "recipes", name+".yaml") },
		SampleTree: func() (string, error) { return t.TempDir(), nil },
		Sources:    Sources{Epoch: "1700000000", Revision: "abc123", Base: "scratch"}}}
	res, err := PublishRelease(context.Background(), req)
	wr, ok := res.(*Written)
	if err != nil || !ok || len(wr.Rows) != 5 || wr.DryRun {
		t.Fatalf("PublishRelease = %#v, %v; want 5 tags written", res, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		t.Errorf("no layout written: %v", err)
	}
	wr, err = BuildLayout(context.Background(), req.Request, "oci:"+dir+"2")
	if err != nil || len(wr.Rows) != 5 {
		t.Errorf("BuildLayout = %+v, %v", wr, err)
	}
	for _, out := range []string{"127.0.0.1:5000/doris", "oci:" + dir + ":doris-be:1", ""} {
		if _, err := BuildLayout(context.Background(), req.Request, out); !fault.IsInput(err) || !strings.Contains(err.Error(), "want oci:DIR") {
			t.Errorf("BuildLayout to %q: %v, want bad input", out, err)
		}
	}
	bad := req
	bad.Repo = ""
	bad.Password = strings.NewReader("pw")
	if _, err := PublishRelease(context.Background(), bad); !fault.IsInput(err) || !strings.Contains(err.Error(), "--repo is required") {
		t.Errorf("no --repo: %v", err)
	}
	bad.Repo = "oci:" + dir
	bad.Builds = t.TempDir()
	if _, err := PublishRelease(context.Background(), bad); !fault.IsInput(err) || !strings.Contains(err.Error(), "--username") {
		t.Errorf("a password without a user: %v, want bad input naming --username before the builds are read", err)
	}
}
