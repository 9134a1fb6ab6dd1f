package promote

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/sign"
)

// A registry that answers a request for the release's digest with another
// image's manifest, labelled Docker schema 1 (whose digest
// go-containerregistry takes from the header), must not get that image
// promoted under the release's name.
func TestPromoteRefusesSchema1Answers(t *testing.T) {
	e := newEnv(t)
	d := e.push("staging/doris-be:2.1.7-generic-armv8", "2.1.7", e.signer, clean)
	e.pushSpec("staging/doris-be:2.1.8-x86_64", spec{name: "doris-be", version: "2.1.8", target: "x86_64"}, e.signer, clean)
	forged, err := remote.Get(e.ref("staging/doris-be:2.1.8-x86_64"))
	if err != nil {
		t.Fatal(err)
	}
	e.f.hook.Store(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/manifests/"+d.String()) {
			return false
		}
		w.Header().Set("Content-Type", string(types.DockerManifestSchema1Signed))
		w.Header().Set("Docker-Content-Digest", d.String())
		if r.Method == http.MethodGet {
			_, _ = w.Write(forged.Manifest)
		}
		return true
	})
	dst := e.tag("release/doris-be:2.1.8-x86_64")
	_, err = Check(context.Background(), e.ref("staging/doris-be@"+d.String()), dst, Options{Trust: sign.Trust{Key: e.pub}})
	if err == nil || !strings.Contains(err.Error(), "schema 1 manifest") {
		t.Fatalf("check with a schema 1 answer: %v, want a refusal", err)
	}
	if e.digestOf(dst) != "" {
		t.Error("something was tagged at the destination")
	}
}

// checkedRelease pushes and signs staging/doris-be:2.1.8 and checks its
// promotion to release/doris-be:2.1.8.
func checkedRelease(t *testing.T) (*env, v1.Hash, *Plan, Options) {
	t.Helper()
	e := newEnv(t)
	d := e.push("staging/doris-be:2.1.8", "2.1.8", e.signer, clean)
	o := Options{Trust: sign.Trust{Key: e.pub}}
	p, err := Check(context.Background(), e.ref("staging/doris-be:2.1.8"), e.tag("release/doris-be:2.1.8"), o)
	if err != nil {
		t.Fatal(err)
	}
	return e, d, p, o
}

// What is copied beside the release is what was verified: a signature or
// attestation tag rewritten between the check and the copy is not copied.
func TestPromoteCopiesTheVerifiedCompanions(t *testing.T) {
	e, d, p, o := checkedRelease(t)
	ctx := context.Background()
	want := map[string]string{}
	var bundles []string
	for _, c := range p.Companions {
		if c.ReferrerOf != "" {
			bundles = append(bundles, c.Digest)
			continue
		}
		want[c.Tag] = c.Digest
	}
	att := strings.Replace(d.String(), ":", "-", 1) + ".att"
	// Both formats: the .sig and .att tags, and the four Sigstore bundles
	// (the signature and three attestations).
	if len(want) != 2 || want[att] == "" || len(bundles) != 4 {
		t.Fatalf("companions: %+v", p.Companions)
	}
	// Someone rewrites the attestations after the check.
	if err := e.other.Attest(ctx, e.ref("staging/doris-be@"+d.String()).Context().Digest(d.String()), sign.PredicateScan, []byte(`{"summary":{"clean":false}}`)); err != nil {
		t.Fatal(err)
	}
	if now := e.digestOf(e.tag("staging/doris-be:" + att)); now == want[att] {
		t.Fatal("the attestation tag did not change: the test tests nothing")
	}
	if err := Execute(ctx, p, o); err != nil {
		t.Fatal(err)
	}
	for tag, digest := range want {
		if got := e.digestOf(e.tag("release/doris-be:" + tag)); got != digest {
			t.Errorf("release %s is %s, want the verified %s", tag, got, digest)
		}
	}
	// The other key's newer bundle was not verified: it is not copied.
	idx, err := remote.Referrers(e.tag("release/doris-be:x").Context().Digest(d.String()))
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	var got []string
	for _, m := range im.Manifests {
		got = append(got, m.Digest.String())
	}
	slices.Sort(got)
	slices.Sort(bundles)
	if !slices.Equal(got, bundles) {
		t.Errorf("the release's referrers are %v, want the verified bundles %v", got, bundles)
	}
}

// A destination tag that someone else writes while the release is copied
// is left as they wrote it.
func TestPromoteLeavesADestinationMovedMeanwhile(t *testing.T) {
	e, _, p, o := checkedRelease(t)
	ctx := context.Background()
	dst := p.Dst
	theirs := e.push("release/doris-be:2.1.8", "2.1.8", nil, "")
	err := Execute(ctx, p, o)
	var ge *GateError
	if !errors.As(err, &ge) || !strings.Contains(err.Error(), "changed while the release was copied") {
		t.Fatalf("execute: %v, want a refusal", err)
	}
	if got := e.digestOf(dst); got != theirs.String() {
		t.Errorf("destination is %s, want the other writer's %s", got, theirs)
	}
}

// An unsigned manifest's blobs are not read: its sizes vouch for nothing,
// and a registry can serve an endless blob under a terabyte size.
func TestUnsignedBlobsAreNotRead(t *testing.T) {
	e := newEnv(t)
	l := static.NewLayer([]byte("endless"), types.OCILayer)
	ld, _ := l.Digest()
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
		Config: v1.Descriptor{MediaType: types.OCIConfigJSON, Size: 2, Digest: emptyJSON(t, e)},
		Layers: []v1.Descriptor{{MediaType: types.OCILayer, Size: 1 << 40, Digest: ld}}}
	tag := e.tag("staging/doris-be:2.1.9")
	putManifest(t, tag, m, l)
	d := e.digestOf(tag)
	stop := make(chan struct{})
	defer close(stop)
	e.f.hook.Store(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+ld.String()) {
			return false
		}
		w.WriteHeader(http.StatusOK)
		zero := make([]byte, 1<<16)
		for r.Context().Err() == nil {
			select {
			case <-stop: // the test is over: let the server close
				return true
			default:
			}
			if _, err := w.Write(zero); err != nil {
				break
			}
		}
		return true
	})
	done := make(chan error, 1)
	go func() {
		_, err := Check(context.Background(), e.ref("staging/doris-be@"+d), e.tag("release/doris-be:2.1.9"), Options{Trust: sign.Trust{Key: e.pub}})
		done <- err
	}()
	select {
	case err := <-done:
		var ge *GateError
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), "signature") {
			t.Fatalf("unsigned: %v, want a signature refusal", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still reading the unsigned manifest's endless blob after 20 s")
	}
}

// The signatures under one tag are held in memory together: their count
// and total size are bounded before any is read.
func TestSignatureLayersBounded(t *testing.T) {
	e := newEnv(t)
	e.signer.WithFormat(sign.FormatLegacy) // the .sig tag alone carries the signature
	d := e.push("staging/doris-be:2.1.8", "2.1.8", e.signer, clean)
	sig := e.tag("staging/doris-be:" + strings.Replace(d.String(), ":", "-", 1) + ".sig")
	l := static.NewLayer([]byte("x"), types.MediaType("application/vnd.dev.cosign.simplesigning.v1+json"))
	ldig, _ := l.Digest()
	for _, c := range []struct {
		n    int
		size int64
		want string
	}{
		{1001, 1, "1001 layers"},
		{5, 60 << 20, "in all"},
	} {
		m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
			Config: v1.Descriptor{MediaType: types.OCIConfigJSON, Size: 2, Digest: emptyJSON(t, e)}}
		for range c.n {
			m.Layers = append(m.Layers, v1.Descriptor{MediaType: "application/vnd.dev.cosign.simplesigning.v1+json", Size: c.size, Digest: ldig})
		}
		putManifest(t, sig, m, l)
		_, err := Check(context.Background(), e.ref("staging/doris-be@"+d.String()), e.tag("release/doris-be:2.1.8"), Options{Trust: sign.Trust{Key: e.pub}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d layers of %d bytes: %v, want %q", c.n, c.size, err, c.want)
		}
	}
}

// emptyJSON stores the config blob {} in the staging repository.
func emptyJSON(t *testing.T, e *env) v1.Hash {
	t.Helper()
	l := static.NewLayer([]byte("{}"), types.OCIConfigJSON)
	if err := remote.WriteLayer(e.ref("staging/doris-be:x").Context(), l); err != nil {
		t.Fatal(err)
	}
	h, _ := l.Digest()
	return h
}

// rawManifest is a manifest written as given.
type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.b, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// putManifest stores l's blob and writes m under tag.
func putManifest(t *testing.T, ref name.Tag, m v1.Manifest, l v1.Layer) {
	t.Helper()
	if err := remote.WriteLayer(ref.Context(), l); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(ref, rawManifest{b: b, mt: m.MediaType}); err != nil {
		t.Fatal(err)
	}
}
