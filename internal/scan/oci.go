package scan

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// looksLikeReference reports whether an input that is not a path is meant
// as a registry reference (host:port/repo:tag, repo@sha256:…).
func looksLikeReference(in string) bool {
	if _, err := os.Stat(in); err == nil {
		return false
	}
	if !strings.Contains(in, "/") {
		return false
	}
	_, err := name.ParseReference(in)
	return err == nil
}

// ociLayout scans every image of an OCI layout directory (oci:DIR).
func (w *walker) ociLayout(in string) error {
	dir := strings.TrimPrefix(in, "oci:")
	p, err := layout.FromPath(dir)
	if err != nil {
		return fmt.Errorf("%w %s: not an OCI layout: %v", ErrInput, in, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return fmt.Errorf("%w %s: %v", ErrInput, in, err)
	}
	w.index(idx, in, 0)
	return nil
}

// remote scans an image or index in a registry.
func (w *walker) remote(in string) error {
	var opts []name.Option
	if w.opts.Insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(in, opts...)
	if err != nil {
		return fmt.Errorf("%w %s: neither a path nor an image reference: %v", ErrInput, in, err)
	}
	desc, err := remote.Get(ref, remote.WithContext(w.ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return fmt.Errorf("%w %s: %v", ErrInput, in, err)
	}
	switch desc.MediaType {
	case types.OCIImageIndex, types.DockerManifestList:
		idx, err := desc.ImageIndex()
		if err != nil {
			return fmt.Errorf("%w %s: %v", ErrInput, in, err)
		}
		w.index(idx, in, 0)
	default:
		img, err := desc.Image()
		if err != nil {
			return fmt.Errorf("%w %s: %v", ErrInput, in, err)
		}
		w.image(img, in)
	}
	return nil
}

func (w *walker) index(idx v1.ImageIndex, name string, depth int) {
	if depth > w.opts.MaxDepth {
		w.add(unreadable(name, "image indexes nested too deep"))
		return
	}
	im, err := idx.IndexManifest()
	if err != nil {
		w.add(unreadable(name, "malformed image index: "+err.Error()))
		return
	}
	for _, d := range im.Manifests {
		label := name + "@" + d.Digest.String()
		if d.Platform != nil {
			label = name + "[" + d.Platform.String() + "]"
		}
		switch d.MediaType {
		case types.OCIImageIndex, types.DockerManifestList:
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				w.add(unreadable(label, err.Error()))
				continue
			}
			w.index(child, label, depth+1)
		case types.OCIManifestSchema1, types.DockerManifestSchema2:
			img, err := idx.Image(d.Digest)
			if err != nil {
				w.add(unreadable(label, err.Error()))
				continue
			}
			w.image(img, label)
		default:
			// Signatures, attestations and other artifacts carry no code.
		}
	}
}

// image scans every layer of one image.
func (w *walker) image(img v1.Image, name string) {
	layers, err := img.Layers()
	if err != nil {
		w.add(unreadable(name, "image: "+err.Error()))
		return
	}
	for i, l := range layers {
		label := fmt.Sprintf("%s!/layer%d", name, i)
		if mt, err := l.MediaType(); err == nil && !strings.Contains(string(mt), "tar") && !strings.Contains(string(mt), "layer") {
			continue
		}
		rc, err := l.Uncompressed()
		if err != nil {
			w.add(unreadable(label, err.Error()))
			continue
		}
		w.tar(&limited{r: bufio.NewReaderSize(rc, 1<<20), w: w, name: label}, label, 1, nil)
		rc.Close()
	}
}
