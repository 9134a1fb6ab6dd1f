package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// RefName is the OCI layout annotation that names an image or index.
const RefName = registry.RefName

// Digest is the manifest digest of a tagged image or index.
func (t Tagged) Digest() (v1.Hash, error) {
	if t.Index != nil {
		return t.Index.Digest()
	}
	return t.Image.Digest()
}

// WriteLayout writes the release to an OCI layout at dir, every image and
// index named by its "<repo>:<tag>". The layout is written next to dir and
// renamed into place, so dir is either the old release or the new one.
func WriteLayout(dir string, rel []Tagged) error {
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	for _, t := range rel {
		opt := layout.WithAnnotations(map[string]string{RefName: t.Repo + ":" + t.Tag})
		if t.Index != nil {
			err = p.AppendIndex(t.Index, opt)
		} else {
			err = p.AppendImage(t.Image, opt)
		}
		if err != nil {
			return fmt.Errorf("writing %s:%s: %w", t.Repo, t.Tag, err)
		}
	}
	old := tmp + ".old"
	moved := false
	if _, err := os.Stat(dir); err == nil {
		if err := os.Rename(dir, old); err != nil {
			return err
		}
		moved = true
	}
	if err := os.Rename(tmp, dir); err != nil {
		if moved {
			if rerr := os.Rename(old, dir); rerr != nil {
				// err is the cause callers may test; rerr is only told (%v).
				return fmt.Errorf("%w; the previous layout is at %s (putting it back failed: %v)", err, old, rerr)
			}
		}
		return err
	}
	return os.RemoveAll(old)
}

// PublishOptions are how a release goes to a registry.
type PublishOptions struct {
	// Registry: credentials, plain HTTP, transport, jobs and the retry
	// schedule of 5xx and connection errors (go-containerregistry's).
	Registry registry.Options
	DryRun   bool
}

// Pushed is what publishing did for one tag.
type Pushed struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`   // bytes of all its blobs and manifests
	Upload int64  `json:"upload"` // bytes of blobs not yet in the registry (dry run: would upload)
}

// Report is the result of a publish.
type Report struct {
	Tags []Pushed `json:"tags"`
	// Uploaded counts blob bytes sent; UploadedBlobs the blobs.
	Uploaded      int64 `json:"uploaded_bytes"`
	UploadedBlobs int64 `json:"uploaded_blobs"`
	DryRun        bool  `json:"dry_run,omitempty"`
}

// Publish pushes the release under repo (REGISTRY/PATH): every blob and
// manifest by digest first, then the tags, so a failed publish leaves no new
// tag pointing at something partial. Blobs the registry has are skipped.
func Publish(ctx context.Context, repo string, rel []Tagged, o PublishOptions) (*Report, error) {
	prefix, err := o.Registry.Prefix(repo)
	if err != nil {
		return nil, fault.Inputf("--repo %w", err)
	}
	counter := &countingTransport{base: o.Registry.Transport}
	if counter.base == nil {
		counter.base = remote.DefaultTransport
	}
	ro := o.Registry
	ro.Transport = counter
	ropts := ro.Remote(ctx)
	rep := &Report{DryRun: o.DryRun}
	type target struct {
		t   Tagged
		tag name.Tag
		dig name.Digest
	}
	var ts []target
	for _, t := range rel {
		tag, err := o.Registry.Tag(prefix + "/" + t.Repo + ":" + t.Tag)
		if err != nil {
			return nil, fault.Inputf("--repo %s: %w", repo, err)
		}
		d, err := t.Digest()
		if err != nil {
			return nil, err
		}
		ts = append(ts, target{t: t, tag: tag, dig: tag.Context().Digest(d.String())})
	}
	// What each tag holds and what the registry lacks.
	seen := map[string]bool{}
	for _, x := range ts {
		blobs, err := blobsOf(x.t)
		if err != nil {
			return nil, err
		}
		p := Pushed{Ref: x.tag.String(), Digest: x.dig.DigestStr()}
		for _, b := range blobs {
			p.Size += b.Size
			key := x.tag.Context().String() + "@" + b.Digest.String()
			if seen[key] {
				continue
			}
			seen[key] = true
			ok, err := exists(x.tag.Context().Digest(b.Digest.String()), b.MediaType, ropts)
			if err != nil {
				return nil, err
			}
			if !ok {
				p.Upload += b.Size
			}
		}
		rep.Tags = append(rep.Tags, p)
	}
	if o.DryRun {
		return rep, nil
	}
	counter.reset()
	for _, x := range ts {
		var err error
		if x.t.Index != nil {
			err = remote.WriteIndex(x.dig, x.t.Index, ropts...)
		} else {
			err = remote.Write(x.dig, x.t.Image, ropts...)
		}
		if err != nil {
			return nil, fmt.Errorf("pushing %s (no tag was moved): %w", x.tag, explain(x.tag.RegistryStr(), err))
		}
	}
	// Registries cannot move several tags at once. What each tag points to
	// is read first, so that when a tag write fails the ones already moved
	// are put back; the error says which were and which could not be.
	before := make([]*remote.Descriptor, len(ts))
	for i, x := range ts {
		d, err := remote.Get(x.tag, ropts...)
		switch {
		case err == nil:
			before[i] = d
		case !registry.NotFound(err):
			return nil, fmt.Errorf("reading %s before moving it (no tag was moved): %w", x.tag, explain(x.tag.RegistryStr(), err))
		}
	}
	for i, x := range ts {
		var tg remote.Taggable = x.t.Image
		if x.t.Index != nil {
			tg = x.t.Index
		}
		if err := remote.Tag(x.tag, tg, ropts...); err != nil {
			moved := make([]name.Tag, i)
			for k := range moved {
				moved[k] = ts[k].tag
			}
			return nil, fmt.Errorf("tagging %s: %w; %s", x.tag, explain(x.tag.RegistryStr(), err), restoreTags(moved, before[:i], ropts))
		}
	}
	rep.Uploaded, rep.UploadedBlobs = counter.bytes.Load(), counter.blobs.Load()
	return rep, nil
}

// blobsOf lists the blobs (layers, configs, child manifests) of a tagged
// image or index, each once.
func blobsOf(t Tagged) ([]v1.Descriptor, error) {
	var out []v1.Descriptor
	seen := map[v1.Hash]bool{}
	add := func(d v1.Descriptor) {
		if !seen[d.Digest] {
			seen[d.Digest] = true
			out = append(out, d)
		}
	}
	var imgs []v1.Image
	if t.Index != nil {
		im, err := t.Index.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, d := range im.Manifests {
			add(d)
			img, err := t.Index.Image(d.Digest)
			if err != nil {
				return nil, err
			}
			imgs = append(imgs, img)
		}
	} else {
		imgs = append(imgs, t.Image)
	}
	for _, img := range imgs {
		m, err := img.Manifest()
		if err != nil {
			return nil, err
		}
		add(m.Config)
		for _, l := range m.Layers {
			add(l)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Digest.String() < out[j].Digest.String() })
	return out, nil
}

// exists asks the registry whether it has a blob (HEAD under /blobs/) or a
// child manifest (HEAD under /manifests/); go-containerregistry retries
// transient errors.
func exists(d name.Digest, mt types.MediaType, ropts []remote.Option) (bool, error) {
	var err error
	if mt.IsIndex() || mt.IsImage() {
		_, err = remote.Head(d, ropts...)
	} else {
		var l v1.Layer
		if l, err = remote.Layer(d, ropts...); err == nil {
			_, err = l.Size()
		}
	}
	switch {
	case err == nil:
		return true, nil
	case registry.NotFound(err):
		return false, nil
	}
	return false, explain(d.RegistryStr(), err)
}

// countingTransport counts the bytes of blob uploads (PATCH and PUT bodies
// under /blobs/uploads/).
type countingTransport struct {
	base         http.RoundTripper
	bytes, blobs atomic.Int64
}

func (c *countingTransport) reset() { c.bytes.Store(0); c.blobs.Store(0) }

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	upload := strings.Contains(req.URL.Path, "/blobs/uploads/")
	if upload && req.Body != nil && req.Body != http.NoBody && (req.Method == http.MethodPatch || req.Method == http.MethodPut) {
		req = req.Clone(req.Context())
		req.Body = &countingBody{ReadCloser: req.Body, n: &c.bytes}
	}
	resp, err := c.base.RoundTrip(req)
	// A PUT to the upload URL completes one blob.
	if err == nil && upload && req.Method == http.MethodPut && resp.StatusCode == http.StatusCreated {
		c.blobs.Add(1)
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func authError(registry, status string) error {
	return fmt.Errorf("registry %s rejected the credentials (%s): run docker login %s, or pass --username and --password-stdin", registry, status, registry)
}

// explain turns a registry's 401/403 into what to do about it.
func explain(registry string, err error) error {
	var terr *transport.Error
	switch {
	case errors.As(err, &terr) && terr.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w: %w", authError(registry, http.StatusText(terr.StatusCode)), terr)
	case errors.As(err, &terr) && terr.StatusCode == http.StatusForbidden:
		return fmt.Errorf("registry %s refused the write (Forbidden): the credentials may lack push rights there (docker login %s, or --username and --password-stdin), or the tag is protected (immutable tags): %w", registry, registry, terr)
	}
	return err
}

// restoreTags puts tags that a failed publish had moved back where they
// were (before[i], nil for a tag that did not exist, which is deleted if
// the registry allows it) and says what it did.
func restoreTags(tags []name.Tag, before []*remote.Descriptor, ropts []remote.Option) string {
	if len(tags) == 0 {
		return "no tag was moved"
	}
	var restored, left []string
	for i, tag := range tags {
		var err error
		if before[i] != nil {
			err = remote.Tag(tag, before[i], ropts...)
		} else {
			err = remote.Delete(tag, ropts...)
		}
		switch {
		case err == nil && before[i] != nil:
			restored = append(restored, fmt.Sprintf("%s (back to %s)", tag.TagStr(), before[i].Digest))
		case err == nil:
			restored = append(restored, tag.TagStr()+" (removed: it was new)")
		case before[i] != nil:
			left = append(left, fmt.Sprintf("%s (was %s: %v)", tag.TagStr(), before[i].Digest, err))
		default:
			left = append(left, fmt.Sprintf("%s (new; the registry would not delete it: %v)", tag.TagStr(), err))
		}
	}
	msg := ""
	if len(restored) > 0 {
		msg = "put back: " + strings.Join(restored, ", ")
	}
	if len(left) > 0 {
		if msg != "" {
			msg += "; "
		}
		msg += "STILL MOVED, fix by hand: " + strings.Join(left, ", ")
	}
	return msg
}
