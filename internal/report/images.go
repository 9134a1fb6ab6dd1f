package report

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// Store is where a release's images are: a registry repository prefix
// (host/path, holding host/path/doris-be and so on) or an OCI layout.
type Store interface {
	String() string
	// Tags lists the tags of an image name (doris-be).
	Tags(ctx context.Context, image string) ([]string, error)
	// Get reads one tag.
	Get(ctx context.Context, image, tag string) (*Found, error)
	// Digest is the registry reference of a digest in image's repository;
	// false for stores that cannot hold signatures.
	Digest(image, digest string) (name.Digest, bool)
}

// Found is an image or index read from a store.
type Found struct {
	Ref         string
	Digest      string
	Size        int64
	Platforms   int
	Annotations map[string]string
}

// OpenStore opens oci:DIR or a registry prefix (host[:port]/path).
func OpenStore(loc string, ro registry.Options) (Store, error) {
	l, err := registry.ParseLocation(loc)
	if err != nil {
		return nil, err
	}
	if l.IsLayout() {
		if l.Name != "" {
			return nil, fmt.Errorf("%s: want a whole layout, oci:DIR, not one of its entries", loc)
		}
		lp, err := registry.LayoutPath(l.Layout)
		if err != nil {
			return nil, err
		}
		return &layoutStore{loc: loc, path: lp}, nil
	}
	prefix, err := ro.Prefix(loc)
	if err != nil {
		return nil, fmt.Errorf("%w, or oci:DIR", err)
	}
	return &registryStore{prefix: prefix, ro: ro}, nil
}

type registryStore struct {
	prefix string
	ro     registry.Options
}

func (s *registryStore) String() string { return s.prefix }

func (s *registryStore) repo(img string) (name.Repository, error) {
	return s.ro.Repository(s.prefix + "/" + img)
}

func (s *registryStore) Tags(ctx context.Context, img string) ([]string, error) {
	r, err := s.repo(img)
	if err != nil {
		return nil, err
	}
	tags, err := remote.List(r, s.ro.Remote(ctx)...)
	if registry.NotFound(err) {
		return nil, nil
	}
	return tags, err
}

func (s *registryStore) Get(ctx context.Context, img, tag string) (*Found, error) {
	r, err := s.repo(img)
	if err != nil {
		return nil, err
	}
	ref := r.Tag(tag)
	desc, err := remote.Get(ref, s.ro.Remote(ctx)...)
	if err != nil {
		return nil, err
	}
	f := &Found{Ref: ref.String(), Digest: desc.Digest.String()}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		return f, f.fromIndex(idx)
	}
	img1, err := desc.Image()
	if err != nil {
		return nil, err
	}
	return f, f.fromImage(img1)
}

func (s *registryStore) Digest(img, digest string) (name.Digest, bool) {
	r, err := s.repo(img)
	if err != nil {
		return name.Digest{}, false
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return name.Digest{}, false
	}
	return r.Digest(h.String()), true
}

type layoutStore struct {
	loc  string
	path layout.Path
}

func (s *layoutStore) String() string { return s.loc }

func (s *layoutStore) entries() ([]v1.Descriptor, v1.ImageIndex, error) {
	top, err := s.path.ImageIndex()
	if err != nil {
		return nil, nil, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	return im.Manifests, top, nil
}

func (s *layoutStore) Tags(_ context.Context, img string) ([]string, error) {
	ds, _, err := s.entries()
	if err != nil {
		return nil, err
	}
	var tags []string
	for _, d := range ds {
		if n, t, ok := strings.Cut(d.Annotations[image.RefName], ":"); ok && n == img {
			tags = append(tags, t)
		}
	}
	return tags, nil
}

func (s *layoutStore) Get(_ context.Context, img, tag string) (*Found, error) {
	ds, top, err := s.entries()
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.Annotations[image.RefName] != img+":"+tag {
			continue
		}
		f := &Found{Ref: s.loc + ":" + img + ":" + tag, Digest: d.Digest.String()}
		if d.MediaType.IsIndex() {
			idx, err := top.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			return f, f.fromIndex(idx)
		}
		i, err := top.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		return f, f.fromImage(i)
	}
	return nil, fmt.Errorf("%s has no %s:%s", s.loc, img, tag)
}

func (s *layoutStore) Digest(string, string) (name.Digest, bool) { return name.Digest{}, false }

func (f *Found) fromImage(img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	f.Size += int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		f.Size += l.Size
	}
	if f.Annotations == nil {
		f.Annotations = m.Annotations
	}
	return nil
}

func (f *Found) fromIndex(idx v1.ImageIndex) error {
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	f.Size += int64(len(raw))
	f.Annotations = im.Annotations
	if f.Annotations == nil {
		f.Annotations = map[string]string{}
	}
	for _, d := range im.Manifests {
		child, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		var c Found
		if err := c.fromImage(child); err != nil {
			return err
		}
		f.Size += c.Size
		f.Platforms++
	}
	return nil
}

// releaseTags are the tags of one Doris version: v itself and v-<target>.
func releaseTags(tags []string, v string) []string {
	var out []string
	for _, t := range tags {
		if t == v || strings.HasPrefix(t, v+"-") {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// manifestTarget is the target a per-target image says it was built for.
func manifestTarget(ann map[string]string) string { return ann[image.AnnTarget] }

func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}
