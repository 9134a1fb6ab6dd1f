package cacheoci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/fault"
	dregistry "github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// rotting serves one blob (by digest) with a byte flipped.
type rotting struct {
	h   http.Handler
	rot atomic.Value
}

func (f *rotting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d, _ := f.rot.Load().(string); d != "" && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+d) {
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		body[len(body)/2] ^= 0xff
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
		return
	}
	f.h.ServeHTTP(w, r)
}

func setup(t *testing.T) (*Repo, *rotting) {
	t.Helper()
	f := &rotting{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://") + "/dorisarm/cache")
	if err != nil {
		t.Fatal(err)
	}
	// The consistency checks are tested on their own: entries are taken
	// unsigned here (TestSignedEntries tests the signatures).
	return &Repo{Repo: repo, Trust: Trust{TrustUnsigned: true}}, f
}

// entry makes a local cache with one entry (a file and a link) under key.
func entry(t *testing.T, key string) *build.Cache {
	t.Helper()
	c := &build.Cache{Dir: t.TempDir()}
	c.Init()
	tree := t.TempDir()
	os.MkdirAll(filepath.Join(tree, "be/lib"), 0o755)
	os.WriteFile(filepath.Join(tree, "be/lib/doris_be"), []byte(strings.Repeat("\x7fELF code ", 1000)), 0o755)
	os.Symlink("doris_be", filepath.Join(tree, "be/lib/be"))
	if err := c.Put(build.Meta{Key: key, Step: "build:be"}, tree, []string{"be", "be/lib", "be/lib/doris_be", "be/lib/be"}); err != nil {
		t.Fatal(err)
	}
	return c
}

const key = "5f0c0ffee0000000000000000000000000000000000000000000000000000001"

// TestPushPull: an entry pushed from one cache is pulled into an empty
// one byte for byte and restores the same tree; a key the registry lacks
// is a plain miss.
func TestPushPull(t *testing.T) {
	r, _ := setup(t)
	ctx := context.Background()
	src := entry(t, key)
	if err := r.Push(ctx, src, key, ""); err != nil {
		t.Fatal(err)
	}
	dst := &build.Cache{Dir: t.TempDir()}
	dst.Init()
	got, err := r.Pull(ctx, dst, key)
	if err != nil || got == nil {
		t.Fatalf("pull: %v %v", got, err)
	}
	if got.Signer != unsignedSigner || !strings.HasPrefix(got.Artifact, r.Repo.String()+"@sha256:") {
		t.Errorf("pulled %+v", got)
	}
	for _, f := range []string{"files.tar", "meta.json"} {
		a, _ := os.ReadFile(filepath.Join(src.EntryDir(key), f))
		b, _ := os.ReadFile(filepath.Join(dst.EntryDir(key), f))
		if string(a) != string(b) {
			t.Errorf("%s differs after a round trip", f)
		}
	}
	m, ok := dst.Get(key)
	if !ok {
		t.Fatal("pulled entry not found")
	}
	tree := t.TempDir()
	if err := dst.Restore(key, tree, m); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(tree, "be/lib/be")); err != nil || !strings.HasPrefix(string(b), "\x7fELF") {
		t.Errorf("restored: %v", err)
	}
	if got, err := r.Pull(ctx, dst, strings.Replace(key, "1", "2", 1)); got != nil || err != nil {
		t.Errorf("a key the registry lacks: %v %v, want a plain miss", got, err)
	}
}

// TestPullWhereTheCacheHasTheEntry: when another build stored key's entry
// in the local cache while a pull downloaded it, the local one stays and
// the pull says it brought nothing (the cache's bytes are not the
// registry's, and the record must not say they are).
func TestPullWhereTheCacheHasTheEntry(t *testing.T) {
	r, _ := setup(t)
	ctx := context.Background()
	if err := r.Push(ctx, entry(t, key), key, ""); err != nil {
		t.Fatal(err)
	}
	dst := entry(t, key) // made here, by "another build"
	before, err := os.ReadFile(filepath.Join(dst.EntryDir(key), "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Pull(ctx, dst, key)
	if got != nil || err != nil {
		t.Errorf("pull into a cache that has the entry: (%+v, %v), want (nil, nil): nothing was taken from the registry", got, err)
	}
	after, _ := os.ReadFile(filepath.Join(dst.EntryDir(key), "meta.json"))
	if string(after) != string(before) {
		t.Error("the local entry was replaced")
	}
	if left, _ := filepath.Glob(filepath.Join(dst.Dir, "steps", ".tmp-*", "*")); len(left) != 0 {
		t.Errorf("the download was left behind: %v", left)
	}
}

// TestForeignArtifactsRefused: under a step key, an artifact of another
// key, a plain image, an artifact whose meta.json and manifest disagree,
// and one whose files.tar the registry serves altered are refused, and
// nothing of them enters the local cache.
func TestForeignArtifactsRefused(t *testing.T) {
	ctx := context.Background()
	other := strings.Replace(key, "1", "9", 1)
	cases := map[string]func(t *testing.T, r *Repo, f *rotting){
		"another key's entry": func(t *testing.T, r *Repo, f *rotting) {
			c := entry(t, other)
			if err := r.Push(ctx, c, other, ""); err != nil {
				t.Fatal(err)
			}
			img, _ := remote.Image(r.Repo.Tag(other))
			remote.Write(r.Repo.Tag(key), img)
		},
		"a plain image": func(t *testing.T, r *Repo, f *rotting) {
			img, _ := random.Image(100, 2)
			remote.Write(r.Repo.Tag(key), img)
		},
		"meta.json and manifest disagree": func(t *testing.T, r *Repo, f *rotting) {
			c := entry(t, key)
			meta, _ := os.ReadFile(filepath.Join(c.EntryDir(key), "meta.json"))
			img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
			img = mutate.ConfigMediaType(img, ConfigType)
			img, _ = mutate.Append(img,
				mutate.Addendum{Layer: static.NewLayer(meta, MetaType)},
				mutate.Addendum{Layer: static.NewLayer([]byte("other files"), FilesType)})
			remote.Write(r.Repo.Tag(key), img)
		},
		"files.tar altered in storage": func(t *testing.T, r *Repo, f *rotting) {
			c := entry(t, key)
			if err := r.Push(ctx, c, key, ""); err != nil {
				t.Fatal(err)
			}
			m, _ := c.Get(key)
			f.rot.Store(m.TarSHA256)
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			r, f := setup(t)
			plant(t, r, f)
			dst := &build.Cache{Dir: t.TempDir()}
			dst.Init()
			got, err := r.Pull(ctx, dst, key)
			var fe *ForeignError
			if got != nil || !errors.As(err, &fe) {
				t.Fatalf("pull: %v %v, want a ForeignError", got, err)
			}
			if _, ok := dst.Get(key); ok {
				t.Error("the refused artifact entered the local cache")
			}
			if ents, _ := os.ReadDir(filepath.Join(dst.Dir, "steps")); len(ents) != 0 {
				t.Errorf("left in the cache: %v", ents)
			}
		})
	}
}

// TestPushAllPullAll: PushAll and PullAll count what they did, print it on
// one line, and encode it as the cache commands' JSON always was (the keys
// of a map, sorted).
func TestPushAllPullAll(t *testing.T) {
	r, f := setup(t)
	ctx := context.Background()
	src := entry(t, key)
	ents, _ := src.Entries()
	pushed, err := r.PushAll(ctx, src)
	if err != nil || pushed.Entries != 1 || pushed.Bytes != ents[0].Bytes || pushed.Bytes == 0 || pushed.Repo != r.Repo.String() {
		t.Fatalf("PushAll = %+v, %v; want 1 entry of %d bytes to %s", pushed, err, ents[0].Bytes, r.Repo)
	}
	var b strings.Builder
	pushed.WriteText(&b)
	if want := fmt.Sprintf("pushed 1 entries (%d bytes) to %s\n", ents[0].Bytes, r.Repo); b.String() != want {
		t.Errorf("push text = %q, want %q", b.String(), want)
	}
	sameJSON(t, pushed, map[string]any{"repo": r.Repo.String(), "pushed_entries": 1, "bytes": ents[0].Bytes, "skipped_entries": 0})

	dst := &build.Cache{Dir: t.TempDir()}
	var warned []error
	warn := func(err error) { warned = append(warned, err) }
	if p, err := r.PullAll(ctx, dst, warn); err != nil || p != (Pulled{Pulled: 1, Repo: r.Repo.String()}) {
		t.Errorf("first PullAll = %+v, %v; want 1 pulled", p, err)
	}
	p, err := r.PullAll(ctx, dst, warn)
	if err != nil || p != (Pulled{Present: 1, Repo: r.Repo.String()}) {
		t.Errorf("second PullAll = %+v, %v; want 1 already here", p, err)
	}
	b.Reset()
	p.WriteText(&b)
	if want := fmt.Sprintf("pulled 0 entries from %s (1 already here, 0 refused)\n", r.Repo); b.String() != want {
		t.Errorf("pull text = %q, want %q", b.String(), want)
	}
	sameJSON(t, p, map[string]any{"repo": r.Repo.String(), "pulled": 0, "present": 1, "refused": 0})

	m, _ := src.Get(key)
	f.rot.Store(m.TarSHA256)
	p, err = r.PullAll(ctx, &build.Cache{Dir: t.TempDir()}, warn)
	if p.Refused != 1 || p.Pulled != 0 || !errors.Is(err, fault.ErrGate) || len(warned) != 1 {
		t.Errorf("PullAll of a rotten entry = %+v, %v (warned %v); want 1 refused, a failed gate", p, err, warned)
	}
	closed, _ := name.NewRepository("127.0.0.1:1/cache")
	quick := dregistry.Options{Backoff: &remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1}}
	if p, err := (&Repo{Repo: closed, Registry: quick, Trust: Trust{TrustUnsigned: true}}).PushAll(ctx, src); !errors.Is(err, fault.ErrGate) || p != (Pushed{}) {
		t.Errorf("PushAll to a closed port = %+v, %v; want the zero Pushed and a failed gate", p, err)
	}
	if p, err := (&Repo{Repo: r.Repo.Registry.Repo("no", "registry"), Trust: Trust{TrustUnsigned: true}}).PullAll(ctx, &build.Cache{Dir: "/proc/no-cache-here"}, warn); err == nil || p != (Pulled{}) {
		t.Errorf("PullAll that cannot start = %+v, %v; want the zero Pulled and an error", p, err)
	}
}

func sameJSON(t *testing.T, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("JSON = %s, want %s", g, w)
	}
}

func TestRemote(t *testing.T) {
	if rc, err := Remote("--cache-from", "", dregistry.Options{}, Trust{}); rc != nil || err != nil {
		t.Errorf("no value: %#v, %v; want a nil interface", rc, err)
	}
	if _, err := Remote("--cache-to", "127.0.0.1:5000/cache:tag", dregistry.Options{}, Trust{}); !fault.IsInput(err) || !strings.HasPrefix(err.Error(), "--cache-to ") {
		t.Errorf("a tag: %v, want bad input naming --cache-to", err)
	}
	rc, err := Remote("--cache-from", "127.0.0.1:5000/cache", dregistry.Options{}, Trust{TrustUnsigned: true})
	if r, ok := rc.(*Repo); err != nil || !ok || r.Repo.String() != "127.0.0.1:5000/cache" || !r.TrustUnsigned {
		t.Errorf("a repository: %#v, %v", rc, err)
	}
}

// keyPair makes a cosign key pair and returns its signer and cosign.pub.
func keyPair(t *testing.T) (*sign.Signer, string) {
	t.Helper()
	priv, pub, err := sign.Keygen(t.TempDir(), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	return s, pub
}

// TestSignedEntries: an entry pushed with a signer is pulled by a cache
// that trusts its key, and the pull names the artifact and the key; a
// self-consistent entry planted unsigned by anyone who can push, or signed
// by another key, is refused (a *ForeignError) and nothing of it enters
// the cache; without a trust setting neither push nor pull starts.
func TestSignedEntries(t *testing.T) {
	ctx := context.Background()
	signer, pub := keyPair(t)
	other, otherPub := keyPair(t)
	verify := &sign.Trust{Key: pub}

	r, _ := setup(t)
	r.Trust = Trust{Signer: signer}
	if err := r.Push(ctx, entry(t, key), key, ""); err != nil {
		t.Fatal(err)
	}
	dst := &build.Cache{Dir: t.TempDir()}
	dst.Init()
	r.Trust = Trust{Verify: verify}
	got, err := r.Pull(ctx, dst, key)
	if err != nil || got == nil {
		t.Fatalf("pull of a signed entry: %v %v", got, err)
	}
	if !strings.HasPrefix(got.Signer, "key sha256:") || !strings.HasPrefix(got.Artifact, r.Repo.String()+"@sha256:") {
		t.Errorf("pulled %+v", got)
	}
	if _, ok := dst.Get(key); !ok {
		t.Error("the signed entry is not in the cache")
	}

	for what, plant := range map[string]Trust{
		"unsigned":              {TrustUnsigned: true},
		"signed by another key": {Signer: other},
	} {
		t.Run(what, func(t *testing.T) {
			r, _ := setup(t)
			r.Trust = plant
			if err := r.Push(ctx, entry(t, key), key, ""); err != nil {
				t.Fatal(err)
			}
			r.Trust = Trust{Verify: verify}
			dst := &build.Cache{Dir: t.TempDir()}
			dst.Init()
			got, err := r.Pull(ctx, dst, key)
			var fe *ForeignError
			if got != nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), "signature") {
				t.Fatalf("pull: %v %v, want a ForeignError about its signature", got, err)
			}
			if _, ok := dst.Get(key); ok {
				t.Error("the refused entry entered the cache")
			}
			// The same entry is taken by whom it is from (or by a user who
			// trusts anything): the refusal above was the signature's.
			if what == "signed by another key" {
				r.Trust = Trust{Verify: &sign.Trust{Key: otherPub}}
			} else {
				r.Trust = Trust{TrustUnsigned: true}
			}
			if got, err := r.Pull(ctx, dst, key); err != nil || got == nil {
				t.Errorf("pull with the matching trust: %v %v", got, err)
			}
		})
	}

	r, _ = setup(t)
	r.Trust = Trust{}
	if _, err := r.Pull(ctx, dst, key); !fault.IsInput(err) || !strings.Contains(err.Error(), "--cache-trust-unsigned") {
		t.Errorf("pull without a trust setting: %v", err)
	}
	if err := r.Push(ctx, entry(t, key), key, ""); !fault.IsInput(err) || !strings.Contains(err.Error(), "--cache-sign-key") {
		t.Errorf("push without a signer: %v", err)
	}
}

// TestPushOffersOnlyWhatABuildStored: cache push offers no entry it
// pulled (the registry's, under its own signer: re-signing it would turn
// an entry taken under --cache-trust-unsigned into a trusted one), and a
// build's push of an entry whose files are no longer the ones it stored
// is refused before anything is uploaded or signed.
func TestPushOffersOnlyWhatABuildStored(t *testing.T) {
	r, _ := setup(t)
	ctx := context.Background()
	src := entry(t, key)
	if _, err := r.PushAll(ctx, src); err != nil {
		t.Fatal(err)
	}
	dst := &build.Cache{Dir: t.TempDir()}
	dst.Init()
	if got, err := r.Pull(ctx, dst, key); got == nil || err != nil {
		t.Fatalf("pull: %v %v", got, err)
	}
	if dst.Built(key) {
		t.Fatal("a pulled entry is marked as built here")
	}
	p, err := r.PushAll(ctx, dst)
	if err != nil || p.Entries != 0 || p.Skipped != 1 {
		t.Errorf("PushAll of a pulled entry = %+v, %v; want it skipped", p, err)
	}
	m, _ := src.Get(key)
	if err := r.Push(ctx, src, key, "sha256:"+strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "not pushed") {
		t.Errorf("a push of other files than stored: %v", err)
	}
	if err := r.Push(ctx, src, key, m.TarSHA256); err != nil {
		t.Errorf("a push of the stored files: %v", err)
	}
}

// LoadVerify reads the key once, before any pull: a key that cannot serve
// is bad input then, and the pulls use what it read (the file may be gone
// by then). Keyless trust in Sigstore's own root is left for the first
// pull (its root comes over the network).
func TestLoadVerify(t *testing.T) {
	ctx := context.Background()
	signer, pub := keyPair(t)
	r, _ := setup(t)
	r.Trust = Trust{Signer: signer}
	if err := r.Push(ctx, entry(t, key), key, ""); err != nil {
		t.Fatal(err)
	}
	tr := Trust{Verify: &sign.Trust{Key: pub}}
	if err := tr.LoadVerify(ctx); err != nil {
		t.Fatal(err)
	}
	os.Remove(pub)
	r.Trust = tr
	dst := &build.Cache{Dir: t.TempDir()}
	dst.Init()
	if got, err := r.Pull(ctx, dst, key); err != nil || got == nil {
		t.Errorf("pull with the key loaded before it was removed: %v %v", got, err)
	}

	for _, bad := range []string{"/dev/null", t.TempDir(), pub} {
		tr := Trust{Verify: &sign.Trust{Key: bad}}
		if err := tr.LoadVerify(ctx); !fault.IsInput(err) || !strings.Contains(err.Error(), bad) {
			t.Errorf("LoadVerify with key %s: %v, want bad input naming it", bad, err)
		}
	}
	keyless := Trust{Verify: &sign.Trust{Identity: "a@example.com", Issuer: "https://issuer.example.com"}}
	if err := keyless.LoadVerify(ctx); err != nil || keyless.loaded != nil {
		t.Errorf("keyless with Sigstore's root: %v, loaded %v", err, keyless.loaded)
	}
}
