package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// RefName is the OCI layout annotation that names an image or index.
const RefName = "org.opencontainers.image.ref.name"

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
			return fmt.Errorf("writing %s:%s: %v", t.Repo, t.Tag, err)
		}
	}
	old := tmp + ".old"
	if _, err := os.Stat(dir); err == nil {
		if err := os.Rename(dir, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.Rename(old, dir)
		return err
	}
	return os.RemoveAll(old)
}

// PublishOptions are how a release goes to a registry.
type PublishOptions struct {
	Auth      authn.Authenticator // nil: the docker-config keychain
	Insecure  bool                // plain HTTP beyond loopback
	Jobs      int                 // blobs in flight
	Transport http.RoundTripper   // nil: remote.DefaultTransport
	DryRun    bool
	// Backoff between retries of 5xx and connection errors; zero: the
	// go-containerregistry default (1 s, x3, 3 tries).
	Backoff remote.Backoff
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
	var nopts []name.Option
	if o.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	counter := &countingTransport{base: o.Transport}
	if counter.base == nil {
		counter.base = remote.DefaultTransport
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(counter)}
	if o.Auth != nil {
		ropts = append(ropts, remote.WithAuth(o.Auth))
	} else {
		ropts = append(ropts, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	if o.Jobs > 0 {
		ropts = append(ropts, remote.WithJobs(o.Jobs))
	}
	if o.Backoff.Steps > 0 {
		ropts = append(ropts, remote.WithRetryBackoff(o.Backoff))
	}
	rep := &Report{DryRun: o.DryRun}
	type target struct {
		t   Tagged
		tag name.Tag
		dig name.Digest
	}
	var ts []target
	for _, t := range rel {
		tag, err := name.NewTag(strings.TrimSuffix(repo, "/")+"/"+t.Repo+":"+t.Tag, nopts...)
		if err != nil {
			return nil, fmt.Errorf("--repo %s: %v", repo, err)
		}
		d, err := t.Digest()
		if err != nil {
			return nil, err
		}
		ts = append(ts, target{t: t, tag: tag, dig: tag.Context().Digest(d.String())})
	}
	// What each tag holds and what the registry lacks.
	seen := map[string]bool{}
	checker := &blobChecker{rt: counter, auth: o.Auth}
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
			var ok bool
			err := retry(ctx, func() (err error) {
				ok, err = checker.exists(ctx, x.tag.Context().Digest(b.Digest.String()))
				return err
			})
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
			return nil, fmt.Errorf("pushing %s (no tag was moved): %v", x.tag, explain(x.tag.RegistryStr(), err))
		}
	}
	for _, x := range ts {
		var tg remote.Taggable = x.t.Image
		if x.t.Index != nil {
			tg = x.t.Index
		}
		if err := remote.Tag(x.tag, tg, ropts...); err != nil {
			return nil, fmt.Errorf("tagging %s: %v", x.tag, explain(x.tag.RegistryStr(), err))
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

// blobChecker asks registries which blobs they have, with one
// authenticated client per repository.
type blobChecker struct {
	rt      http.RoundTripper
	auth    authn.Authenticator
	clients map[string]*http.Client
}

func (c *blobChecker) client(ctx context.Context, repo name.Repository) (*http.Client, error) {
	if cl, ok := c.clients[repo.String()]; ok {
		return cl, nil
	}
	auth := c.auth
	if auth == nil {
		a, err := authn.DefaultKeychain.Resolve(repo)
		if err != nil {
			return nil, err
		}
		auth = a
	}
	tr, err := transport.NewWithContext(ctx, repo.Registry, auth, c.rt, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, &transientError{fmt.Sprintf("%s: %v", repo.Registry, err)}
	}
	if c.clients == nil {
		c.clients = map[string]*http.Client{}
	}
	cl := &http.Client{Transport: tr}
	c.clients[repo.String()] = cl
	return cl, nil
}

// exists asks the registry (HEAD /v2/<repo>/blobs/<digest>) whether it
// has a blob. Manifests are asked for under /manifests/.
func (c *blobChecker) exists(ctx context.Context, d name.Digest) (bool, error) {
	client, err := c.client(ctx, d.Context())
	if err != nil {
		return false, err
	}
	for _, kind := range []string{"blobs", "manifests"} {
		u := fmt.Sprintf("%s://%s/v2/%s/%s/%s", d.Context().Registry.Scheme(), d.Context().RegistryStr(), d.Context().RepositoryStr(), kind, d.DigestStr())
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
		if err != nil {
			return false, err
		}
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json")
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true, nil
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			return false, authError(d.Context().RegistryStr(), resp.Status)
		}
		if resp.StatusCode >= 500 {
			return false, &transientError{fmt.Sprintf("HEAD %s: %s", u, resp.Status)}
		}
	}
	return false, nil
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

type transientError struct{ msg string }

func (e *transientError) Error() string { return e.msg }

// retry runs fn up to five times, backing off from 100 ms, while it fails
// with a server error or a connection error.
func retry(ctx context.Context, fn func() error) error {
	wait := 100 * time.Millisecond
	var err error
	for i := 0; i < 5; i++ {
		if err = fn(); err == nil {
			return nil
		}
		var te *transientError
		var terr *transport.Error
		var nerr net.Error
		if !errors.As(err, &te) && !(errors.As(err, &terr) && terr.StatusCode >= 500) && !errors.As(err, &nerr) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	return err
}

func authError(registry, status string) error {
	return fmt.Errorf("registry %s rejected the credentials (%s): run docker login %s, or pass --username and --password-stdin", registry, status, registry)
}

// explain turns a registry's 401/403 into what to do about it.
func explain(registry string, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden) {
		return authError(registry, http.StatusText(terr.StatusCode))
	}
	return err
}
