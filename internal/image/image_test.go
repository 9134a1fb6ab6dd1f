package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/recipe"
	dregistry "github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sample"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

const repo = "../.."

func loadData(t *testing.T) (*matrix.Matrix, *recipe.Recipe) {
	t.Helper()
	in := sample.Load(t, repo, "", "")
	return in.Matrix, in.Recipe
}

// fakeBuild writes a published build of target with the given files and a
// record that lists them, as dorisarm build would.
func fakeBuild(t *testing.T, m *matrix.Matrix, out, target string, files map[string]string) {
	t.Helper()
	cell, err := m.Cell("2.1", target)
	if err != nil {
		t.Fatal(err)
	}
	dir := build.Dir(out, "2.1.8", target)
	rec := build.Record{Schema: 1, Recipe: plan.RecipeInfo{Name: "minidoris"}, Cell: plan.CellInfo{Doris: "2.1.8", Target: target, CPU: cell.CPU.Name, ISA: cell.ISA.Name, March: cell.Target.March, PGO: cell.Target.PGO},
		Compiler: toolchain.Identity{Name: "gcc", Version: "12.2.0"}, Patches: []plan.PatchRef{{ID: "bitshuffle/0001-scalar-bitshuffle", SHA256: "ab"}}}
	for p, content := range files {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(content))
		rec.Outputs = append(rec.Outputs, build.OutputFile{Path: p, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])})
	}
	data, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(dir, build.RecordFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func sampleRelease(t *testing.T, out string, beFor map[string]string) []Tagged {
	t.Helper()
	m, r := loadData(t)
	for target, be := range beFor {
		fakeBuild(t, m, out, target, map[string]string{"be/lib/doris_be": be, "be/bin/start_be.sh": "#!/bin/sh\n", "fe/lib/doris-fe.jar": "the same FE everywhere"})
	}
	bs, err := FindBuilds(out)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := Release(m, r, bs, Options{Epoch: time.Unix(1700000000, 0), Revision: "abc123", Source: "https://example.invalid/doris"})
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

var three = map[string]string{"generic-armv8": "be for armv8", "kunpeng920": "be for kunpeng", "x86_64": "be for x86"}

func byRef(rel []Tagged) map[string]Tagged {
	m := map[string]Tagged{}
	for _, t := range rel {
		m[t.Repo+":"+t.Tag] = t
	}
	return m
}

func TestReleaseLayout(t *testing.T) {
	rel := byRef(sampleRelease(t, t.TempDir(), three))
	for _, want := range []string{"doris-be:2.1.8-generic-armv8", "doris-be:2.1.8-kunpeng920", "doris-be:2.1.8-x86_64", "doris-be:2.1.8", "doris-fe:2.1.8"} {
		if _, ok := rel[want]; !ok {
			t.Errorf("release has no %s (has %v)", want, keys(rel))
		}
	}
	if len(rel) != 5 {
		t.Errorf("release has %d tags, want 5: %v", len(rel), keys(rel))
	}
	// The index: amd64 from x86_64, arm64/v8 from generic-armv8, annotated.
	im, err := rel["doris-be:2.1.8"].Index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range im.Manifests {
		got[d.Platform.String()] = d.Annotations[AnnTarget]
	}
	if got["linux/arm64/v8"] != "generic-armv8" || got["linux/amd64"] != "x86_64" || len(got) != 2 {
		t.Errorf("index platforms: %v", got)
	}
	// The kunpeng image says what is inside, in annotations and labels.
	kp := rel["doris-be:2.1.8-kunpeng920"].Image
	m, _ := kp.Manifest()
	cf, _ := kp.ConfigFile()
	for k, want := range map[string]string{AnnTarget: "kunpeng920", AnnCPU: "tsv110", AnnMarch: "armv8.2-a+crypto+fp16+dotprod+fp16fml", AnnPGO: "true",
		"org.opencontainers.image.version": "2.1.8", "org.opencontainers.image.revision": "abc123", "org.opencontainers.image.created": "2023-11-14T22:13:20Z"} {
		if m.Annotations[k] != want || cf.Config.Labels[k] != want {
			t.Errorf("%s: annotation %q label %q, want %q", k, m.Annotations[k], cf.Config.Labels[k], want)
		}
	}
	if !strings.HasPrefix(m.Annotations[AnnBuild], "sha256:") || !strings.HasPrefix(m.Annotations[AnnPatches], "sha256:") {
		t.Errorf("record/patch digests: %v", m.Annotations)
	}
	if cf.Architecture != "arm64" || cf.Variant != "v8" || cf.OS != "linux" || cf.Config.WorkingDir != "/opt/apache-doris" ||
		cf.Config.Entrypoint[0] != "/opt/apache-doris/be/bin/start_be.sh" {
		t.Errorf("config: %+v", cf)
	}
	if _, ok := cf.Config.ExposedPorts["9060/tcp"]; !ok {
		t.Errorf("ports: %v", cf.Config.ExposedPorts)
	}
	// The layer holds be/ under /opt/apache-doris/be, owned by root, dated the epoch.
	files := layerFiles(t, kp)
	if files["opt/apache-doris/be/lib/doris_be"] != "be for kunpeng" {
		t.Errorf("layer files: %v", keys2(files))
	}
	// FE: one image for all, the same layer in both index entries.
	fe, _ := rel["doris-fe:2.1.8"].Index.IndexManifest()
	var layers []string
	for _, d := range fe.Manifests {
		img, _ := rel["doris-fe:2.1.8"].Index.Image(d.Digest)
		ls, _ := img.Layers()
		dg, _ := ls[len(ls)-1].Digest()
		layers = append(layers, dg.String())
	}
	if len(layers) != 2 || layers[0] != layers[1] {
		t.Errorf("FE layers: %v", layers)
	}
}

func TestReproducible(t *testing.T) {
	a := sampleRelease(t, t.TempDir(), three)
	time.Sleep(1100 * time.Millisecond) // other file mtimes
	b := sampleRelease(t, t.TempDir(), three)
	for i := range a {
		da, _ := a[i].Digest()
		db, _ := b[i].Digest()
		if da != db {
			t.Errorf("%s:%s: %s then %s", a[i].Repo, a[i].Tag, da, db)
		}
	}
	// A different epoch gives different digests: the epoch is really used.
	m, r := loadData(t)
	out := t.TempDir()
	fakeBuild(t, m, out, "kunpeng920", map[string]string{"be/lib/doris_be": "x", "fe/lib/doris-fe.jar": "y"})
	bs, _ := FindBuilds(out)
	r1, _ := Release(m, r, bs, Options{Epoch: time.Unix(1, 0)})
	r2, _ := Release(m, r, bs, Options{Epoch: time.Unix(2, 0)})
	d1, _ := r1[0].Digest()
	d2, _ := r2[0].Digest()
	if d1 == d2 {
		t.Error("the epoch does not change the digest")
	}
}

func TestBadBuilds(t *testing.T) {
	m, r := loadData(t)
	if _, err := FindBuilds(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no builds") {
		t.Errorf("empty dir: %v", err)
	}
	// A partial build (--keep-going) is never a release, alone or beside one.
	part := t.TempDir()
	fakeBuild(t, m, part, "kunpeng920", map[string]string{"thirdparty/installed/lib/libz.a": "x"})
	if err := os.Rename(filepath.Join(part, "2.1.8", "kunpeng920"), filepath.Join(part, "2.1.8", "kunpeng920"+build.PartialSuffix)); err != nil {
		t.Fatal(err)
	}
	if _, err := FindBuilds(part); err == nil || !strings.Contains(err.Error(), "holds only partial builds") {
		t.Errorf("only a partial build: %v", err)
	}
	fakeBuild(t, m, part, "graviton3", map[string]string{"be/lib/doris_be": "x", "fe/lib/doris-fe.jar": "y"})
	if bs, err := FindBuilds(part); err != nil || len(bs) != 1 || filepath.Base(bs[0].Dir) != "graviton3" {
		t.Errorf("a partial build beside a full one: %v, %v", bs, err)
	}
	out := t.TempDir()
	fakeBuild(t, m, out, "kunpeng920", map[string]string{"be/lib/doris_be": "x", "fe/lib/doris-fe.jar": "y"})
	os.WriteFile(filepath.Join(out, "2.1.8", "kunpeng920", "be", "lib", "doris_be"), []byte("tampered"), 0o755)
	if _, err := FindBuilds(out); err == nil || !strings.Contains(err.Error(), "changed since it was built") {
		t.Errorf("tampered build: %v", err)
	}
	// A target directory without its record, beside a good build.
	out = t.TempDir()
	fakeBuild(t, m, out, "kunpeng920", map[string]string{"be/lib/doris_be": "x", "fe/lib/doris-fe.jar": "y"})
	os.MkdirAll(filepath.Join(out, "2.1.8", "graviton3", "be"), 0o755)
	if _, err := FindBuilds(out); err == nil || !strings.Contains(err.Error(), "graviton3 has no build record") {
		t.Errorf("directory without a record: %v", err)
	}
	// A build for a target the matrix does not define.
	out = t.TempDir()
	fakeBuild(t, m, out, "kunpeng920", map[string]string{"be/lib/doris_be": "x", "fe/lib/doris-fe.jar": "y"})
	bs, _ := FindBuilds(out)
	bs[0].Record.Cell.Target = "kunpeng930"
	if _, err := Release(m, r, bs, Options{}); err == nil || !strings.Contains(err.Error(), `target "kunpeng930", which`) {
		t.Errorf("unknown target: %v", err)
	}
	// A shared image whose content differs between targets.
	out = t.TempDir()
	fakeBuild(t, m, out, "kunpeng920", map[string]string{"be/lib/doris_be": "x", "fe/lib/doris-fe.jar": "one"})
	fakeBuild(t, m, out, "graviton2", map[string]string{"be/lib/doris_be": "x", "fe/lib/doris-fe.jar": "two"})
	bs, err := FindBuilds(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Release(m, r, bs, Options{}); err == nil || !strings.Contains(err.Error(), "shared by all targets") {
		t.Errorf("differing FE: %v", err)
	}
}

func TestWriteLayout(t *testing.T) {
	rel := sampleRelease(t, t.TempDir(), three)
	dir := filepath.Join(t.TempDir(), "oci")
	for i := 0; i < 2; i++ { // the second write replaces the first
		if err := WriteLayout(dir, rel); err != nil {
			t.Fatal(err)
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := p.ImageIndex()
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != len(rel) {
		t.Fatalf("layout holds %d, want %d", len(im.Manifests), len(rel))
	}
	for i, d := range im.Manifests {
		want, _ := rel[i].Digest()
		if d.Digest != want || d.Annotations[RefName] != rel[i].Repo+":"+rel[i].Tag {
			t.Errorf("layout entry %d: %s %v", i, d.Digest, d.Annotations)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".oci-*")); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// flaky fails every nth request with 503 and counts them.
type flaky struct {
	h        http.Handler
	n, count atomic.Int64
	failPUT  atomic.Bool // fail every manifest PUT instead
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := f.count.Add(1)
	if f.failPUT.Load() && r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
		http.Error(w, "manifest store down", http.StatusInternalServerError)
		return
	}
	if n := f.n.Load(); n > 0 && c%n == 0 {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	f.h.ServeHTTP(w, r)
}

func TestPublishInMemory(t *testing.T) {
	rel := sampleRelease(t, t.TempDir(), three)
	f := &flaky{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	f.n.Store(7) // every 7th request fails: retries must carry the push
	srv := httptest.NewServer(f)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	o := PublishOptions{Registry: dregistry.Options{Auth: authn.Anonymous, Transport: http.DefaultTransport, Backoff: &remote.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5}}}

	dry, err := Publish(ctx, host+"/doris", rel, PublishOptions{Registry: o.Registry, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var wouldUpload int64
	for _, p := range dry.Tags {
		wouldUpload += p.Upload
	}
	first, err := Publish(ctx, host+"/doris", rel, o)
	if err != nil {
		t.Fatal(err)
	}
	if first.Uploaded == 0 || wouldUpload == 0 {
		t.Fatalf("first publish uploaded %d bytes (dry run said %d)", first.Uploaded, wouldUpload)
	}
	// Every tag resolves to the digest we made, the index with both platforms.
	for _, tg := range rel {
		ref, _ := name.NewTag(host + "/doris/" + tg.Repo + ":" + tg.Tag)
		desc, err := remote.Get(ref)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := tg.Digest()
		if desc.Digest != want {
			t.Errorf("%s: registry has %s, want %s", ref, desc.Digest, want)
		}
	}
	if f.count.Load() < 14 {
		t.Fatalf("only %d requests: the flaky registry never failed one", f.count.Load())
	}
	again, err := Publish(ctx, host+"/doris", rel, o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Uploaded != 0 {
		t.Errorf("re-publishing an unchanged release uploaded %d bytes", again.Uploaded)
	}
	// The FE layer goes up once for all targets: the dry run of a fresh
	// repository counts it once.
	fresh, _ := Publish(ctx, host+"/other", rel, PublishOptions{Registry: o.Registry, DryRun: true})
	// A registry's root is a prefix too: images land at host/doris-be.
	root, err := Publish(ctx, host, rel, PublishOptions{Registry: o.Registry, DryRun: true})
	if err != nil || !strings.HasPrefix(root.Tags[0].Ref, host+"/doris-") {
		t.Errorf("publishing to the registry's root: %v %+v", err, root)
	}
	var feLayers int
	for _, p := range fresh.Tags {
		if strings.Contains(p.Ref, "doris-fe") && p.Upload > 0 {
			feLayers++
		}
	}
	if feLayers != 1 {
		t.Errorf("FE would be uploaded for %d tags", feLayers)
	}

	// A registry that refuses manifests: the publish fails and no tag moves.
	before, _ := remote.Get(mustTag(t, host+"/doris/doris-be:2.1.8-kunpeng920"))
	changed := sampleRelease(t, t.TempDir(), map[string]string{"generic-armv8": "new", "kunpeng920": "new kunpeng", "x86_64": "new x86"})
	f.n.Store(0)
	f.failPUT.Store(true)
	if _, err := Publish(ctx, host+"/doris", changed, o); err == nil || !strings.Contains(err.Error(), "no tag was moved") {
		t.Fatalf("failing registry: %v", err)
	}
	after, _ := remote.Get(mustTag(t, host+"/doris/doris-be:2.1.8-kunpeng920"))
	if before.Digest != after.Digest {
		t.Error("a failed publish moved a tag")
	}
}

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	tg, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func layerFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ls[len(ls)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]string{}
	epoch := time.Unix(1700000000, 0)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(epoch) || len(h.PAXRecords) > 0 && h.PAXRecords["SCHILY.xattr.security.capability"] != "" {
			t.Errorf("%s: uid %d gid %d mtime %v pax %v", h.Name, h.Uid, h.Gid, h.ModTime, h.PAXRecords)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = string(data)
	}
	return out
}

func keys(m map[string]Tagged) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func keys2(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestPublishAuthRejected(t *testing.T) {
	rel := sampleRelease(t, t.TempDir(), map[string]string{"kunpeng920": "be"})
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var tagged atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "doris" || p != "right" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/2.1.8") {
			tagged.Add(1)
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	_, err := Publish(context.Background(), host+"/doris", rel, PublishOptions{Registry: dregistry.Options{Auth: &authn.Basic{Username: "doris", Password: "wrong"}}})
	if err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("wrong password: %v", err)
	}
	if tagged.Load() != 0 {
		t.Error("a tag was written with wrong credentials")
	}
	if _, err := Publish(context.Background(), host+"/doris", rel, PublishOptions{Registry: dregistry.Options{Auth: &authn.Basic{Username: "doris", Password: "right"}}}); err != nil {
		t.Errorf("right password: %v", err)
	}
}

func TestIndexImageOfTheUsers(t *testing.T) {
	m, r := loadData(t)
	out := t.TempDir()
	fakeBuild(t, m, out, "generic-armv8", map[string]string{"be/lib/doris_be": "arm", "fe/lib/doris-fe.jar": "fe"})
	bs, _ := FindBuilds(out)
	x86, _ := random.Image(100, 1)
	rel, err := Release(m, r, bs, Options{IndexImage: func(name string, p v1.Platform) (v1.Image, string, error) {
		if name == "doris-be" && p.Architecture == "amd64" {
			return x86, "docker.io/apache/doris:be-2.1.8", nil
		}
		return nil, "", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	im, _ := byRef(rel)["doris-be:2.1.8"].Index.IndexManifest()
	want, _ := x86.Digest()
	got := map[string]string{}
	for _, d := range im.Manifests {
		got[d.Platform.String()] = d.Digest.String() + " " + d.Annotations[AnnImported] + d.Annotations[AnnTarget]
	}
	if got["linux/amd64"] != want.String()+" docker.io/apache/doris:be-2.1.8" || !strings.HasSuffix(got["linux/arm64/v8"], " generic-armv8") {
		t.Errorf("index: %v", got)
	}
}
