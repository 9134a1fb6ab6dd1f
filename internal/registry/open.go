package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// RefName is the OCI layout annotation naming an entry (NAME:TAG).
const RefName = "org.opencontainers.image.ref.name"

// Opened is an image or an index (exactly one is set) and the name it was
// opened by.
type Opened struct {
	Ref   string
	Index v1.ImageIndex
	Image v1.Image
}

// Open reads the image or index loc names: an OCI layout entry
// (oci:DIR:NAME:TAG) or a registry reference.
func (o Options) Open(ctx context.Context, loc Location) (Opened, error) {
	if loc.IsLayout() {
		return openLayoutEntry(loc)
	}
	ref, err := o.Reference(loc.Ref)
	if err != nil {
		return Opened{}, err
	}
	desc, err := remote.Get(ref, o.Remote(ctx)...)
	if err != nil {
		return Opened{}, fmt.Errorf("%s: %w", ref, err)
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		return Opened{Ref: ref.String(), Index: idx}, err
	}
	img, err := desc.Image()
	return Opened{Ref: ref.String(), Image: img}, err
}

// Layout opens an OCI layout directory's top index.
func Layout(dir string) (v1.ImageIndex, error) {
	lp, err := LayoutPath(dir)
	if err != nil {
		return nil, err
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("oci:%s: %w", dir, err)
	}
	return idx, nil
}

func openLayoutEntry(loc Location) (Opened, error) {
	if loc.Name == "" {
		return Opened{}, fmt.Errorf("%w: %s names a whole layout; want oci:DIR:NAME:TAG (e.g. oci:out/images:doris-be:2.1.8)", ErrLocation, loc)
	}
	top, err := Layout(loc.Layout)
	if err != nil {
		return Opened{}, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return Opened{}, fmt.Errorf("%s: %w", loc, err)
	}
	var names []string
	for _, d := range im.Manifests {
		n := d.Annotations[RefName]
		names = append(names, n)
		if n != loc.Name {
			continue
		}
		if d.MediaType.IsIndex() {
			idx, err := top.ImageIndex(d.Digest)
			return Opened{Ref: loc.String(), Index: idx}, err
		}
		img, err := top.Image(d.Digest)
		return Opened{Ref: loc.String(), Image: img}, err
	}
	slices.Sort(names)
	return Opened{}, fmt.Errorf("%s: no %s in the layout (it has %s)", loc, loc.Name, strings.Join(names, ", "))
}

// ImageFor opens the image for platform p that loc names: from a registry
// reference (an index resolves to its platform's image), or the first
// image for p anywhere in an OCI layout (nested indexes searched depth
// first) or in its NAME:TAG entry.
func (o Options) ImageFor(ctx context.Context, loc Location, p v1.Platform) (v1.Image, error) {
	if !loc.IsLayout() {
		ref, err := o.Reference(loc.Ref)
		if err != nil {
			return nil, err
		}
		img, err := remote.Image(ref, o.Remote(ctx, remote.WithPlatform(p))...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (offline? use oci:DIR)", ref, err)
		}
		return img, nil
	}
	var idx v1.ImageIndex
	if loc.Name != "" {
		op, err := openLayoutEntry(loc)
		if err != nil {
			return nil, err
		}
		if op.Image != nil {
			if ok, err := imageIs(op.Image, p); err != nil || !ok {
				return nil, orNoImage(err, loc, p)
			}
			return op.Image, nil
		}
		idx = op.Index
	} else {
		var err error
		if idx, err = Layout(loc.Layout); err != nil {
			return nil, err
		}
	}
	img, err := findImage(idx, p, 0)
	if err != nil || img == nil {
		return nil, orNoImage(err, loc, p)
	}
	return img, nil
}

func orNoImage(err error, loc Location, p v1.Platform) error {
	if err != nil {
		return fmt.Errorf("%s: %w", loc, err)
	}
	return fmt.Errorf("%s has no image for %s", loc, p.String())
}

// maxDepth bounds nested indexes (a layout that lists itself is a cycle).
const maxDepth = 8

func findImage(idx v1.ImageIndex, p v1.Platform, depth int) (v1.Image, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("indexes nested more than %d deep (a cycle?)", maxDepth)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.MediaType.IsIndex() {
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("index %s: %w", d.Digest, err)
			}
			img, err := findImage(child, p, depth+1)
			if err != nil || img != nil {
				return img, err
			}
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", d.Digest, err)
		}
		ok, err := imageIs(img, p)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", d.Digest, err)
		}
		if ok {
			return img, nil
		}
	}
	return nil, nil
}

func imageIs(img v1.Image, p v1.Platform) (bool, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return false, err
	}
	return cf.OS == p.OS && cf.Architecture == p.Architecture, nil
}

// IndexOf reads the index a registry descriptor names and its manifest.
func IndexOf(desc *remote.Descriptor) (v1.ImageIndex, *v1.IndexManifest, error) {
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	return idx, im, nil
}

// LayoutPath opens the OCI layout directory dir, after checking that what
// it will read are regular files: index.json within maxIndexJSON bytes and
// every blob. A named pipe or a link to a device there would make a read
// block for ever or never end.
func LayoutPath(dir string) (layout.Path, error) {
	if err := checkLayout(dir); err != nil {
		return "", fmt.Errorf("oci:%s: %w", dir, err)
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return "", fmt.Errorf("oci:%s: not an OCI layout (%w); write one with dorisarm image build --out oci:DIR", dir, err)
	}
	return lp, nil
}

// maxIndexJSON bounds a layout's index.json: dorisarm's hold a few entries
// per release and target.
const maxIndexJSON = 16 << 20

func checkLayout(dir string) error {
	for _, f := range []string{"oci-layout", "index.json"} {
		st, err := os.Stat(filepath.Join(dir, f))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // layout.FromPath says what is missing
		case err != nil:
			return err
		case !st.Mode().IsRegular():
			return fmt.Errorf("%s is not a regular file; an OCI layout holds files only", f)
		case f == "index.json" && st.Size() > maxIndexJSON:
			return fmt.Errorf("index.json is %d bytes, more than %d: not a layout dorisarm wrote", st.Size(), maxIndexJSON)
		}
	}
	algs, err := os.ReadDir(filepath.Join(dir, "blobs"))
	if err != nil {
		return nil // no blobs yet: reading one fails with its own error
	}
	for _, a := range algs {
		blobs, err := os.ReadDir(filepath.Join(dir, "blobs", a.Name()))
		if err != nil {
			continue
		}
		for _, b := range blobs {
			rel := filepath.Join("blobs", a.Name(), b.Name())
			if b.Type().IsRegular() {
				continue
			}
			// A link is followed, as a read would.
			if st, err := os.Stat(filepath.Join(dir, rel)); err == nil && st.Mode().IsRegular() {
				continue
			}
			return fmt.Errorf("%s is not a regular file; an OCI layout holds files only", rel)
		}
	}
	return nil
}
