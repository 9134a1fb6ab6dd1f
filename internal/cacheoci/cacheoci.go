// Package cacheoci shares dorisarm's step cache through an OCI registry, in
// the spirit of BuildKit's registry cache: each entry is an OCI artifact in
// one repository, tagged with its step key, so builds on other machines
// restore a step instead of running it.
//
// An artifact is a manifest whose config media type names the format and
// whose two layers are the entry's meta.json and files.tar. Nothing pulled
// is trusted: the manifest is fetched by tag but every blob is checked
// against its digest while it is read, meta.json must name the key it was
// pulled for, and files.tar must have the digest and size meta.json
// records (and the local cache checks every path again on restore).
//
// Consistency is not trust: anyone who can push to the repository can push
// a self-consistent entry. So every entry pushed is signed (cosign's
// signature format, by the release key machinery of internal/sign) and an
// entry is pulled only when its manifest, by the digest of the bytes read,
// carries a signature the configured key or keyless identity verifies, or
// when the user chose to take unsigned entries (Trust).
package cacheoci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// Media types of a cache artifact.
const (
	ConfigType = types.MediaType("application/vnd.dorisarm.step-cache.config.v1+json")
	MetaType   = types.MediaType("application/vnd.dorisarm.step-cache.meta.v1+json")
	FilesType  = types.MediaType("application/vnd.dorisarm.step-cache.files.v1.tar")
)

// maxManifest bounds a cache artifact's manifest (it lists two layers).
const maxManifest = 64 << 10

// Repo is a registry repository that holds step-cache entries.
type Repo struct {
	Repo     name.Repository
	Registry registry.Options
	Trust

	// checker is Trust.Verify (checkerFor) loaded once, its key or
	// trusted root, for every entry pulled while Verify stays the same.
	mu         sync.Mutex
	checkerFor *sign.Trust
	checker    *sign.SignatureChecker
}

// signatureChecker is the checker of r.Verify, loaded on first use.
func (r *Repo) signatureChecker(ctx context.Context) (*sign.SignatureChecker, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.checker != nil && r.checkerFor == r.Verify {
		return r.checker, nil
	}
	if r.loaded != nil && r.loadedFor == r.Verify {
		r.checker, r.checkerFor = r.loaded, r.Verify
		return r.checker, nil
	}
	c, err := sign.NewSignatureChecker(ctx, *r.Verify)
	if err != nil {
		return nil, err
	}
	r.checker, r.checkerFor = c, r.Verify
	return c, nil
}

// Trust is whom a shared cache's entries are trusted from. Anyone who can
// push to the repository can push a self-consistent entry (its meta.json
// naming the step's own key), so an entry is taken only when it carries a
// signature Verify accepts (cosign's verification, as for releases), or,
// with TrustUnsigned, unsigned: the user's explicit choice. Signer signs
// each entry pushed; without one, only TrustUnsigned lets an entry go out
// unsigned.
type Trust struct {
	Verify        *sign.Trust
	TrustUnsigned bool
	Signer        Signer

	// loaded is Verify (loadedFor) as LoadVerify read it.
	loaded    *sign.SignatureChecker
	loadedFor *sign.Trust
}

// LoadVerify reads and checks Verify's key or trusted root now, once for
// every entry pulled: a file that cannot serve (missing, unreadable, not a
// regular file, not a key) is then bad input before anything runs,
// instead of a warning for every step and a shared cache silently unused.
// Keyless trust in Sigstore's own root is left for the first pull: that
// root is fetched over the network.
func (t *Trust) LoadVerify(ctx context.Context) error {
	if t.Verify == nil || (t.Verify.Key == "" && t.Verify.TrustedRoot == "") {
		return nil
	}
	c, err := sign.NewSignatureChecker(ctx, *t.Verify)
	if err != nil {
		return fault.Input(err)
	}
	t.loaded, t.loadedFor = c, t.Verify
	return nil
}

// Signer signs an artifact by digest (sign.Signer, sign.KeylessSigner).
type Signer interface {
	Sign(ctx context.Context, ref name.Reference) ([]name.Digest, error)
}

// unsignedSigner is the signer recorded for an entry taken unsigned.
const unsignedSigner = "unsigned (--cache-trust-unsigned)"

// CheckPull says what is missing before entries can be pulled.
func (t Trust) CheckPull(flag string) error {
	if t.Verify == nil && !t.TrustUnsigned {
		return fault.Inputf("%s: say whom the shared cache's entries must be signed by (--cache-verify-key cosign.pub, or --cache-identity and --cache-issuer), or pass --cache-trust-unsigned to take unsigned entries from anyone who can push to it", flag)
	}
	return nil
}

// CheckPush says what is missing before entries can be pushed.
func (t Trust) CheckPush(flag string) error {
	if t.Signer == nil && !t.TrustUnsigned {
		return fault.Inputf("%s: entries pushed to a shared cache are signed: give --cache-sign-key cosign.key (with $COSIGN_PASSWORD) or --cache-keyless, or pass --cache-trust-unsigned to push them unsigned", flag)
	}
	return nil
}

// Open parses REGISTRY/PATH as a cache repository.
func Open(s string, ro registry.Options) (*Repo, error) {
	r, err := ro.Repository(s)
	if err != nil {
		return nil, fault.Input(err)
	}
	return &Repo{Repo: r, Registry: ro}, nil
}

// Remote opens s, the value of the build flag flag (--cache-from,
// --cache-to), as a build's remote cache: none (a nil interface) when s is
// empty.
func Remote(flag, s string, ro registry.Options, t Trust) (build.RemoteCache, error) {
	if s == "" {
		return nil, nil
	}
	r, err := Open(s, ro)
	if err != nil {
		return nil, fmt.Errorf("%s %w", flag, err)
	}
	r.Trust = t
	return r, nil
}

// ForeignError is an artifact under a step key that is not that step's
// entry, or whose bytes do not match their digests.
type ForeignError struct {
	Ref    string
	Reason string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("cache artifact %s refused: %s", e.Ref, e.Reason)
}

func (r *Repo) ro(ctx context.Context) []remote.Option { return r.Registry.Remote(ctx) }

// Pushed is what PushAll did (as dorisarm cache push prints it).
type Pushed struct {
	Bytes   int64  `json:"bytes"`
	Entries int    `json:"pushed_entries"`
	Repo    string `json:"repo"`
	// Skipped are the entries not offered: pulled ones (the registry's,
	// vouched for by their own signer) and ones no build step of this
	// machine stored (an older dorisarm's, or put there by hand).
	Skipped int `json:"skipped_entries"`
}

// WriteText prints p for people, on one line.
func (p Pushed) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "pushed %d entries (%d bytes) to %s", p.Entries, p.Bytes, p.Repo)
	if err == nil && p.Skipped > 0 {
		_, err = fmt.Fprintf(w, "; %d not offered: pulled, or not stored by a build step of this machine", p.Skipped)
	}
	if err == nil {
		_, err = fmt.Fprintln(w)
	}
	return err
}

// PushAll uploads every entry of the local cache c that a build step of
// this machine stored (never a pulled one, nor one of unknown origin); it stops at the first
// failure, and then returns the zero Pushed. It returns the entries pushed
// and their bytes.
func (r *Repo) PushAll(ctx context.Context, c *build.Cache) (Pushed, error) {
	if err := r.CheckPush("cache push"); err != nil {
		return Pushed{}, err
	}
	ents, err := c.Entries()
	if err != nil {
		return Pushed{}, err
	}
	p := Pushed{Repo: r.Repo.String()}
	for _, e := range ents {
		if !c.Built(e.Key) {
			p.Skipped++
			continue
		}
		if err := r.Push(ctx, c, e.Key, ""); err != nil {
			return Pushed{}, fault.Gate(err)
		}
		p.Entries++
		p.Bytes += e.Bytes
	}
	return p, nil
}

// Pulled counts what PullAll did (as dorisarm cache pull prints it); the
// zero Pulled, with an error, means nothing could be tried.
type Pulled struct {
	Present int    `json:"present"`
	Pulled  int    `json:"pulled"`
	Refused int    `json:"refused"`
	Repo    string `json:"repo"`
}

// WriteText prints p for people, on one line.
func (p Pulled) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "pulled %d entries from %s (%d already here, %d refused)\n", p.Pulled, p.Repo, p.Present, p.Refused)
	return err
}

// PullAll downloads every entry of the repository that c lacks. An entry
// that fails its checks is refused (reported to warn, not written) and the
// others still come; refusals make the error a failed gate.
func (r *Repo) PullAll(ctx context.Context, c *build.Cache, warn func(error)) (Pulled, error) {
	var p Pulled
	if err := r.CheckPull("cache pull"); err != nil {
		return p, err
	}
	if err := c.Init(); err != nil {
		return p, err
	}
	tags, err := remote.List(r.Repo, r.ro(ctx)...)
	if err != nil {
		return p, fault.Gatef("%s: %w", r.Repo, err)
	}
	p.Repo = r.Repo.String()
	for _, key := range tags {
		// Cosign's signature tags (sha256-<hex>.sig) live beside the entries.
		if !build.ValidKey(key) || strings.HasPrefix(key, "sha256-") {
			continue
		}
		if _, ok := c.Get(key); ok {
			p.Present++
			continue
		}
		got, err := r.Pull(ctx, c, key)
		switch {
		case err != nil:
			warn(err)
			p.Refused++
		case got != nil:
			p.Pulled++
		}
	}
	if p.Refused > 0 {
		return p, fault.Gatef("%d entries of %s were refused", p.Refused, r.Repo)
	}
	return p, nil
}

// Push uploads the local entry of key (skipping blobs the registry has).
func (r *Repo) Push(ctx context.Context, c *build.Cache, key, files string) error {
	dir := c.EntryDir(key)
	metaBytes, err := fsutil.ReadFile(filepath.Join(dir, "meta.json"), build.MaxMeta)
	if err != nil {
		return err
	}
	var m build.Meta
	if err := json.Unmarshal(metaBytes, &m); err != nil || m.Key != key || m.TarSHA256 == "" {
		return fmt.Errorf("local cache entry %s has no usable meta.json; prune it", key)
	}
	if files != "" && m.TarSHA256 != files {
		return fmt.Errorf("local cache entry %s holds files %s, not the %s this build stored: something changed the cache; not pushed", key, m.TarSHA256, files)
	}
	layer, err := newFileLayer(filepath.Join(dir, "files.tar"), m.TarSHA256, m.TarSize)
	if err != nil {
		return err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ConfigType)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: static.NewLayer(metaBytes, MetaType)},
		mutate.Addendum{Layer: layer})
	if err != nil {
		return err
	}
	if err := r.CheckPush("pushing cache entry " + key); err != nil {
		return err
	}
	tag := r.Repo.Tag(key)
	if err := remote.Write(tag, img, r.ro(ctx)...); err != nil {
		return fmt.Errorf("pushing cache entry %s to %s: %w", key, r.Repo, err)
	}
	if r.Signer == nil {
		return nil
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	if _, err := r.Signer.Sign(ctx, r.Repo.Digest(d.String())); err != nil {
		return fmt.Errorf("signing cache entry %s in %s: %w", key, r.Repo, err)
	}
	return nil
}

// Pull brings the entry of key into c when the repository has it and its
// signature is trusted; nil when it has none, or when another build
// stored key's entry in c while this one downloaded. An artifact that is not
// key's entry, or not signed by whom r.Verify names, is a *ForeignError
// and nothing of it is kept.
func (r *Repo) Pull(ctx context.Context, c *build.Cache, key string) (*build.RemoteEntry, error) {
	got, err := r.pull(ctx, c, key)
	if err != nil || !got.ok {
		return nil, err
	}
	return &got.RemoteEntry, nil
}

type pulled struct {
	build.RemoteEntry
	ok bool
}

func (r *Repo) pull(ctx context.Context, c *build.Cache, key string) (pulled, error) {
	var none pulled
	if !build.ValidKey(key) {
		return none, fmt.Errorf("invalid cache key %q", key)
	}
	if err := r.CheckPull("pulling cache entry " + key); err != nil {
		return none, err
	}
	tag := r.Repo.Tag(key)
	desc, err := remote.Get(tag, r.ro(ctx)...)
	if err != nil {
		if registry.NotFound(err) {
			return none, nil
		}
		return none, fmt.Errorf("%s: %w", tag, err)
	}
	foreign := func(format string, a ...any) error {
		return &ForeignError{Ref: tag.String(), Reason: fmt.Sprintf(format, a...)}
	}
	if len(desc.Manifest) > maxManifest {
		return none, foreign("a %d-byte manifest", len(desc.Manifest))
	}
	// The artifact is the manifest bytes read, by their own digest (not
	// the registry's word for it): that digest is what must be signed.
	h, _, err := v1.SHA256(bytes.NewReader(desc.Manifest))
	if err != nil {
		return none, err
	}
	artifact := r.Repo.Digest(h.String())
	got := pulled{RemoteEntry: build.RemoteEntry{Artifact: artifact.String(), Signer: unsignedSigner}, ok: true}
	if r.Verify != nil {
		checker, err := r.signatureChecker(ctx)
		if err != nil {
			return none, err
		}
		if got.Signer, err = checker.Check(ctx, artifact, r.ro(ctx)...); err != nil {
			if ctx.Err() != nil {
				return none, ctx.Err()
			}
			return none, foreign("its signature (%s) is not trusted: %v", artifact.DigestStr(), err)
		}
	}
	var mf v1.Manifest
	if err := json.Unmarshal(desc.Manifest, &mf); err != nil {
		return none, foreign("the manifest does not parse: %v", err)
	}
	if mf.Config.MediaType != ConfigType || len(mf.Layers) != 2 || mf.Layers[0].MediaType != MetaType || mf.Layers[1].MediaType != FilesType {
		return none, foreign("not a dorisarm step-cache artifact (config %s, %d layers)", mf.Config.MediaType, len(mf.Layers))
	}
	if mf.Layers[0].Size > build.MaxMeta {
		return none, foreign("meta.json of %d bytes", mf.Layers[0].Size)
	}
	metaBytes, err := r.blob(ctx, mf.Layers[0], io.Discard)
	if err != nil {
		return none, foreign("%v", err)
	}
	var m build.Meta
	if err := json.Unmarshal(metaBytes, &m); err != nil {
		return none, foreign("meta.json does not parse: %v", err)
	}
	switch {
	case m.Key != key:
		return none, foreign("it is the entry of step key %s", m.Key)
	case m.TarSHA256 != mf.Layers[1].Digest.String() || m.TarSize != mf.Layers[1].Size:
		return none, foreign("meta.json records files.tar as %s (%d bytes), the manifest as %s (%d bytes)", m.TarSHA256, m.TarSize, mf.Layers[1].Digest, mf.Layers[1].Size)
	}
	tmp, err := c.TempDir()
	if err != nil {
		return none, err
	}
	defer os.RemoveAll(tmp) // a no-op once adopted
	f, err := os.Create(filepath.Join(tmp, "files.tar"))
	if err != nil {
		return none, err
	}
	_, err = r.blob(ctx, mf.Layers[1], f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return none, foreign("%v", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "meta.json"), metaBytes, 0o644); err != nil {
		return none, err
	}
	adopted, err := c.Adopt(key, tmp)
	if err != nil || !adopted {
		// Another build stored key's entry while this one downloaded: the
		// cache holds its bytes, not the repository's, and says so.
		return none, err
	}
	return got, nil
}

// blob reads the blob d describes to w (and, when w is io.Discard, returns
// it), checking its size and sha256 as it goes.
func (r *Repo) blob(ctx context.Context, d v1.Descriptor, w io.Writer) ([]byte, error) {
	if d.Digest.Algorithm != "sha256" {
		return nil, fmt.Errorf("digest algorithm %q", d.Digest.Algorithm)
	}
	l, err := remote.Layer(r.Repo.Digest(d.Digest.String()), r.ro(ctx)...)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	h := sha256.New()
	var keep []byte
	dst := io.MultiWriter(h, w)
	if w == io.Discard {
		keep = make([]byte, 0, d.Size)
		dst = io.MultiWriter(h, &appender{&keep})
	}
	n, err := io.Copy(dst, io.LimitReader(rc, d.Size+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Digest, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); n != d.Size || got != d.Digest.String() {
		return nil, fmt.Errorf("blob %s: the registry served %d bytes with digest %s", d.Digest, n, got)
	}
	return keep, nil
}

type appender struct{ b *[]byte }

func (a *appender) Write(p []byte) (int, error) { *a.b = append(*a.b, p...); return len(p), nil }
