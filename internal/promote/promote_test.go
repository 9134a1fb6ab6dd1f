package promote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/plan"
	dregistry "github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// faulty fails requests while on, every nth one.
type faulty struct {
	h     http.Handler
	n     atomic.Int64
	count atomic.Int64
	flip  atomic.Bool // corrupt manifests of the flip repository
	// rot alters one blob (by digest) as a disk would: the registry
	// serves other bytes under the same digest.
	rot atomic.Value
	// hook, when set (a func(w, r) bool), may answer a request itself.
	hook atomic.Value
}

func (f *faulty) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, _ := f.hook.Load().(func(http.ResponseWriter, *http.Request) bool); h != nil && h(w, r) {
		return
	}
	if f.flip.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/flip/manifests/sha256:") {
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		body[len(body)/2] ^= 1 // one bit of the manifest, in transit or at rest
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
		return
	}
	if d, _ := f.rot.Load().(string); d != "" && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+d) {
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if len(body) > 0 {
			body[len(body)/2] ^= 0xff
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
		return
	}
	if n := f.n.Load(); n > 0 && f.count.Add(1)%n == 0 {
		http.Error(w, "fault", http.StatusInternalServerError)
		return
	}
	f.h.ServeHTTP(w, r)
}

type env struct {
	t        *testing.T
	host     string
	f        *faulty
	signer   *sign.Signer
	pub      string
	otherPub string
	other    *sign.Signer
}

func newEnv(t *testing.T) *env {
	f := &faulty{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	priv, pub, _ := sign.Keygen(dir, []byte("pw"))
	opriv, opub, _ := sign.Keygen(filepath.Join(dir, "o"), []byte("pw"))
	s, err := sign.LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	o, _ := sign.LoadSigner(opriv, []byte("pw"))
	return &env{t: t, host: strings.TrimPrefix(srv.URL, "http://"), f: f, signer: s, pub: pub, otherPub: opub, other: o}
}

func (e *env) ref(s string) name.Reference {
	r, err := name.ParseReference(e.host + "/" + s)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) tag(s string) name.Tag {
	r, err := name.NewTag(e.host + "/" + s)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// push writes a release image of version ver made from a build, signs it
// with s and attests it; scan is the scan predicate ("" for none).
func (e *env) push(ref, ver string, s *sign.Signer, scan string) v1.Hash {
	e.t.Helper()
	return e.pushSpec(ref, spec{name: "doris-be", version: ver}, s, scan)
}

// spec is what a pushed image says it is and what its provenance says
// (provTarget and provDoris default to target and version).
type spec struct {
	name, version, target string
	provTarget, provDoris string
	build                 string // the build digest annotation (a fixed one when "")
}

func (e *env) pushSpec(ref string, sp spec, s *sign.Signer, scan string) v1.Hash {
	e.t.Helper()
	img, _ := random.Image(300, 1)
	if sp.build == "" {
		sp.build = "sha256:" + strings.Repeat("a", 64)
	}
	ann := map[string]string{VersionAnnotation: sp.version, TitleAnnotation: sp.name, image.AnnBuild: sp.build}
	if sp.target != "" {
		ann[image.AnnTarget] = sp.target
	}
	img = mutate.Annotations(img, ann).(v1.Image)
	if sp.provTarget == "" {
		sp.provTarget = sp.target
	}
	if sp.provDoris == "" {
		sp.provDoris = sp.version
	}
	prov := fmt.Sprintf(`{"buildDefinition":{"externalParameters":{"target":%q,"doris":%q}}}`, sp.provTarget, sp.provDoris)
	r := e.ref(ref)
	if err := remote.Write(r, img); err != nil {
		e.t.Fatal(err)
	}
	d, _ := img.Digest()
	ctx := context.Background()
	if s != nil {
		if _, err := s.Sign(ctx, r); err != nil {
			e.t.Fatal(err)
		}
		preds := map[string]string{sign.PredicateSPDX: `{}`, sign.PredicateSLSA1: prov}
		if scan != "" {
			preds[sign.PredicateScan] = scan
		}
		for typ, p := range preds {
			if err := s.Attest(ctx, r.Context().Digest(d.String()), typ, []byte(p)); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	return d
}

const clean = `{"summary":{"clean":true,"violations":0}}`

func (e *env) digestOf(t name.Tag) string {
	desc, err := remote.Get(t)
	if err != nil {
		return ""
	}
	return desc.Digest.String()
}

func TestPromoteCopiesByDigestWithSignatures(t *testing.T) {
	e := newEnv(t)
	d := e.push("staging/doris-be:2.1.8-rc1", "2.1.8", e.signer, clean)
	ctx := context.Background()
	dst := e.tag("release/doris-be:2.1.8")
	p, err := Check(ctx, e.ref("staging/doris-be:2.1.8-rc1"), dst, Options{Trust: sign.Trust{Key: e.pub}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Companions) != 6 { // .sig, .att and four bundles
		t.Errorf("companions: %v", p.Companions)
	}
	if p.Bytes < 300 { // the random layer alone is 300 bytes
		t.Errorf("plan bytes: %d", p.Bytes)
	}
	// The source tag moves after the check: the verified digest is promoted.
	e.push("staging/doris-be:2.1.8-rc1", "2.1.8", nil, "")
	if err := Execute(ctx, p, Options{Trust: sign.Trust{Key: e.pub}}); err != nil {
		t.Fatal(err)
	}
	if got := e.digestOf(dst); got != d.String() {
		t.Fatalf("destination has %s, want the verified %s", got, d)
	}
	// Signatures and attestations came along: the destination verifies.
	if _, err := Check(ctx, dst, dst, Options{Trust: sign.Trust{Key: e.pub}}); err != nil {
		t.Errorf("verify at the destination: %v", err)
	}
}

func TestGates(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.push("staging/unsigned:1", "2.1.8", nil, "")
	e.push("staging/otherkey:1", "2.1.8", e.other, clean)
	e.push("staging/noscan:1", "2.1.8", e.signer, "")
	e.push("staging/badscan:1", "2.1.8", e.signer, `{"summary":{"clean":false,"violations":3}}`)
	e.push("staging/rc:1", "2.1.9-rc1", e.signer, clean)
	e.push("staging/old:1", "2.1.7", e.signer, clean)
	e.push("staging/good:1", "2.1.8", e.signer, clean)
	taken := e.push("release/doris-be:2.1.8", "2.1.8", e.signer, clean)
	newer := e.push("release/doris-be:2.1", "2.1.8", e.signer, clean)

	for _, c := range []struct {
		src, dst, want string
	}{
		{"staging/unsigned:1", "release/doris-be:x1", "no signatures found"},
		{"staging/otherkey:1", "release/doris-be:x2", "no signature by this key"},
		{"staging/noscan:1", "release/doris-be:x3", "missing"},
		{"staging/badscan:1", "release/doris-be:x4", "3 violation(s)"},
		{"staging/rc:1", "release/doris-be:latest", "pre-releases never become latest"},
		{"staging/old:1", "release/doris-be:2.1", "backwards from 2.1.8 to 2.1.7"},
		{"staging/good:1", "release/doris-be:2.1.8", "immutable"},
	} {
		dst := e.tag(c.dst)
		before := e.digestOf(dst)
		_, err := Check(ctx, e.ref(c.src), dst, Options{Trust: sign.Trust{Key: e.pub}})
		var ge *GateError
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: %v, want a refusal with %q", c.src, c.dst, err, c.want)
		}
		if after := e.digestOf(dst); after != before {
			t.Errorf("%s -> %s: the destination moved", c.src, c.dst)
		}
	}
	if e.digestOf(e.tag("release/doris-be:2.1.8")) != taken.String() || e.digestOf(e.tag("release/doris-be:2.1")) != newer.String() {
		t.Error("a refused promotion moved a tag")
	}
	// A deliberate roll-back moves a floating tag back, never a release tag,
	// and never past the signature gates.
	opts := Options{Trust: sign.Trust{Key: e.pub}, Rollback: true}
	if _, err := Check(ctx, e.ref("staging/good:1"), e.tag("release/doris-be:2.1.8"), opts); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("roll-back of a release tag: %v", err)
	}
	if _, err := Check(ctx, e.ref("staging/unsigned:1"), e.tag("release/doris-be:2.1"), opts); err == nil {
		t.Error("roll-back to an unsigned image was allowed")
	}
	p, err := Check(ctx, e.ref("staging/old:1"), e.tag("release/doris-be:2.1"), opts)
	if err != nil || p.RollsBack != "2.1.8" {
		t.Fatalf("roll-back: %v %+v", err, p)
	}
	if err := Execute(ctx, p, opts); err != nil {
		t.Fatal(err)
	}
	if e.digestOf(e.tag("release/doris-be:2.1")) != e.digestOf(e.tag("staging/old:1")) {
		t.Error("the roll-back did not move 2.1")
	}

	// Forward on a floating tag, and a release to latest, are allowed.
	e.push("staging/next:1", "2.1.9", e.signer, clean)
	for _, dst := range []string{"release/doris-be:2.1", "release/doris-be:latest"} {
		p, err := Check(ctx, e.ref("staging/next:1"), e.tag(dst), Options{Trust: sign.Trust{Key: e.pub}})
		if err != nil {
			t.Fatalf("%s: %v", dst, err)
		}
		if err := Execute(ctx, p, Options{Trust: sign.Trust{Key: e.pub}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFaults: with requests failing, a promotion completes or leaves the
// destination tag as it was.
func TestFaults(t *testing.T) {
	for n := int64(2); n <= 9; n++ {
		e := newEnv(t)
		ctx := context.Background()
		old := e.push("release/doris-be:2.1", "2.1.7", e.signer, clean)
		d := e.push("staging/doris-be:rc", "2.1.8", e.signer, clean)
		dst := e.tag("release/doris-be:2.1")
		p, err := Check(ctx, e.ref("staging/doris-be:rc"), dst, Options{Trust: sign.Trust{Key: e.pub}})
		if err != nil {
			t.Fatal(err)
		}
		e.f.n.Store(n)
		err = Execute(ctx, p, Options{Trust: sign.Trust{Key: e.pub}, Registry: dregistry.Options{Backoff: &remote.Backoff{Steps: 1}}})
		e.f.n.Store(0)
		got := e.digestOf(dst)
		if err == nil && got != d.String() {
			t.Errorf("n=%d: promotion succeeded but the tag is %s", n, got)
		}
		if err != nil && got != old.String() {
			t.Errorf("n=%d: failed promotion (%v) left the tag at %s, not the old %s", n, err, got, old)
		}
	}
}

// TestFlippedManifestBit: a manifest that does not match its digest is
// refused before anything is written.
func TestFlippedManifestBit(t *testing.T) {
	e := newEnv(t)
	e.push("staging/flip:1", "2.1.8", e.signer, clean)
	e.f.flip.Store(true)
	dst := e.tag("release/doris-be:2.1.8")
	_, err := Check(context.Background(), e.ref("staging/flip:1"), dst, Options{Trust: sign.Trust{Key: e.pub}})
	if err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("a corrupted manifest: %v, want a digest mismatch", err)
	}
	e.f.flip.Store(false)
	if e.digestOf(dst) != "" {
		t.Error("something was written at the destination")
	}
}

// TestTagNamesTheImage: a signed, attested image is promoted only to a tag
// that names it: its image name, its Doris version (or a shorter series of
// it, or latest) and, for a per-target image, its target. An image whose
// annotations and signed provenance or scan disagree is refused.
func TestTagNamesTheImage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	scanFor := func(target string) string {
		return fmt.Sprintf(`{"target":%q,"summary":{"clean":true,"violations":0}}`, target)
	}
	// The two images of the index below, from builds with records.
	recs := map[string]*build.Record{}
	for _, target := range []string{"kunpeng920", "graviton3"} {
		recs[target] = &build.Record{Cell: plan.CellInfo{Doris: "2.1.8", Target: target}, Steps: []build.StepRecord{{ID: "be", Key: target}}}
	}
	e.pushSpec("staging/doris-be:kp", spec{name: "doris-be", version: "2.1.8", target: "kunpeng920", build: recs["kunpeng920"].ContentDigest()}, e.signer, scanFor("kunpeng920"))
	e.pushSpec("staging/doris-be:g3", spec{name: "doris-be", version: "2.1.8", target: "graviton3", build: recs["graviton3"].ContentDigest()}, e.signer, scanFor("graviton3"))
	e.pushSpec("staging/doris-be:old", spec{name: "doris-be", version: "2.1.7", target: "kunpeng920"}, e.signer, scanFor("kunpeng920"))
	e.pushSpec("staging/doris-be:liar", spec{name: "doris-be", version: "2.1.8", target: "kunpeng920", provTarget: "graviton3"}, e.signer, scanFor("kunpeng920"))
	e.pushSpec("staging/doris-be:liar2", spec{name: "doris-be", version: "2.1.8", target: "kunpeng920", provDoris: "2.1.7"}, e.signer, scanFor("kunpeng920"))
	e.pushSpec("staging/doris-be:scanliar", spec{name: "doris-be", version: "2.1.8", target: "kunpeng920"}, e.signer, scanFor("graviton3"))
	opts := Options{Trust: sign.Trust{Key: e.pub}}
	for _, c := range []struct {
		src, dst, want string
	}{
		{"kp", "release/doris-be:2.1.8-graviton3", "does not name"},
		{"g3", "release/doris-be:2.1.8-kunpeng920", "does not name"},
		{"kp", "release/doris-be:9.9.9", "does not name"},
		{"kp", "release/doris-be:2.1.8", "does not name"}, // the multi-arch tag
		{"kp", "release/doris-be:2.0", "does not name"},
		{"kp", "release/doris-be:latest", "does not name"},
		{"kp", "release/doris-fe:2.1.8-kunpeng920", "doris-fe repository"},
		{"old", "release/doris-be:2.1.9-kunpeng920", "does not name"},
		{"liar", "release/doris-be:2.1.8-kunpeng920", "signed provenance is a build of 2.1.8 for \"graviton3\""},
		{"liar2", "release/doris-be:2.1.8-kunpeng920", "signed provenance is a build of 2.1.7"},
		{"scanliar", "release/doris-be:2.1.8-kunpeng920", "scan attestation"},
	} {
		dst := e.tag(c.dst)
		_, err := Check(ctx, e.ref("staging/doris-be:"+c.src), dst, opts)
		var ge *GateError
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: %v, want a refusal with %q", c.src, c.dst, err, c.want)
		}
	}
	for _, dst := range []string{"release/doris-be:2.1.8-kunpeng920", "release/doris-be:2.1-kunpeng920", "release/doris-be:2-kunpeng920", "release/doris-be:latest-kunpeng920"} {
		p, err := Check(ctx, e.ref("staging/doris-be:kp"), e.tag(dst), opts)
		if err != nil {
			t.Errorf("kp -> %s: %v", dst, err)
			continue
		}
		if want := dst != "release/doris-be:2.1.8-kunpeng920"; p.Floating != want {
			t.Errorf("kp -> %s: floating %v, want %v", dst, p.Floating, want)
		}
	}

	// An index of the two: the multi-arch tag and its series, never a target's.
	kp, _ := remote.Image(e.ref("staging/doris-be:kp"))
	g3, _ := remote.Image(e.ref("staging/doris-be:g3"))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: kp, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: g3, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}}})
	idx = mutate.Annotations(idx, map[string]string{VersionAnnotation: "2.1.8"}).(v1.ImageIndex)
	ir := e.ref("staging/doris-be:multi")
	if err := remote.WriteIndex(ir, idx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.signer.Sign(ctx, ir); err != nil {
		t.Fatal(err)
	}
	// Signed, its platforms attested, the index not: refused.
	if _, err := Check(ctx, ir, e.tag("release/doris-be:2.1.8"), opts); err == nil || !strings.Contains(err.Error(), "missing (sign it with dorisarm sign --build)") {
		t.Errorf("an index without attestations: %v", err)
	}
	idig, _ := idx.Digest()
	attestIndex := func(ix sign.Index) {
		t.Helper()
		sbom, err1 := sign.IndexSBOM(ix, "staging/doris-be")
		prov, err2 := sign.IndexProvenance(ix, "b")
		sc, err3 := sign.IndexScan(ix)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		for typ, p := range map[string][]byte{sign.PredicateSPDX: sbom, sign.PredicateSLSA1: prov, sign.PredicateScan: sc} {
			if err := e.signer.Attest(ctx, ir.Context().Digest(idig.String()), typ, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	im, _ := idx.IndexManifest()
	var children []sign.IndexChild
	for i, target := range []string{"kunpeng920", "graviton3"} {
		children = append(children, sign.IndexChild{Digest: im.Manifests[i].Digest.String(), Platform: *im.Manifests[i].Platform, Record: recs[target], Scan: []byte(scanFor(target))})
	}
	// Index attestations that are not this index's: refused.
	for _, c := range []struct {
		ix   sign.Index
		want string
	}{
		{sign.Index{Name: "doris-be", Version: "2.1.8", Children: children[:1]}, "does not name " + children[1].Digest},
		{sign.Index{Name: "doris-be", Version: "2.1.7", Children: children}, "its signed provenance is of doris-be 2.1.7"},
		{sign.Index{Name: "doris-fe", Version: "2.1.8", Children: children}, "its signed provenance is of doris-fe 2.1.8"},
	} {
		attestIndex(c.ix)
		_, err := Check(ctx, ir, e.tag("release/doris-be:2.1.8"), opts)
		var ge *GateError
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("index attested as %s %s with %d platforms: %v, want a refusal with %q", c.ix.Name, c.ix.Version, len(c.ix.Children), err, c.want)
		}
	}
	attestIndex(sign.Index{Name: "doris-be", Version: "2.1.8", Children: children})
	for dst, ok := range map[string]bool{"release/doris-be:2.1.8": true, "release/doris-be:2.1": true, "release/doris-be:latest": true,
		"release/doris-be:2.1.8-kunpeng920": false, "release/doris-fe:2.1.8": false} {
		p, err := Check(ctx, ir, e.tag(dst), opts)
		if (err == nil) != ok {
			t.Errorf("index -> %s: %v, want ok=%v", dst, err, ok)
		}
		if err == nil && (!p.Identity.Index || p.Identity.Name != "doris-be") {
			t.Errorf("index identity: %+v", p.Identity)
		}
	}
}

// TestAlteredBlobRefused: a layer whose bytes in the registry no longer
// match its digest (altered in storage) is refused by the gates, before
// anything is written, although signatures and attestations verify.
func TestAlteredBlobRefused(t *testing.T) {
	e := newEnv(t)
	e.push("staging/doris-be:1", "2.1.8", e.signer, clean)
	img, err := remote.Image(e.ref("staging/doris-be:1"))
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	lsize, _ := layers[0].Size()
	e.f.rot.Store(ld.String())
	dst := e.tag("release/doris-be:2.1.8")
	_, err = Check(context.Background(), e.ref("staging/doris-be:1"), dst, Options{Trust: sign.Trust{Key: e.pub}})
	e.f.rot.Store("")
	var ge *GateError
	if !errors.As(err, &ge) || !strings.Contains(err.Error(), fmt.Sprintf("not the %d bytes with digest %s", lsize, ld)) {
		t.Fatalf("an altered layer: %v, want a refusal naming the layer", err)
	}
	if e.digestOf(dst) != "" {
		t.Error("something was written at the destination")
	}
}
