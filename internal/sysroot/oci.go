package sysroot

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

type imageSource struct {
	spec     Spec
	ref      name.Digest // by digest, also when the Spec named a tag
	platform string
	plat     v1.Platform
	ropts    []remote.Option
}

func newImageSource(ctx context.Context, s Spec, o *options) (*imageSource, error) {
	var nopts []name.Option
	if o.insecure {
		nopts = append(nopts, name.Insecure)
	}
	ref, err := name.ParseReference(s.Image, nopts...)
	if err != nil {
		return nil, fmt.Errorf("%s: image %q: %w; fix %s.image", s.label(), s.Image, err, s.where())
	}
	ropts := append([]remote.Option{remote.WithContext(ctx), remote.WithPlatform(o.platform)}, o.remote...)
	src := &imageSource{spec: s, platform: o.platform.String(), plat: o.platform, ropts: ropts}
	switch r := ref.(type) {
	case name.Digest:
		src.ref = r
	default:
		if !o.allowTags {
			return nil, fmt.Errorf("%s: image %q is not pinned by digest, so the sysroot could change under the same matrix.yaml; write it as %s@sha256:<digest> in %s.image (`crane digest %s` prints the digest)",
				s.label(), s.Image, ref.Context().Name(), s.where(), s.Image)
		}
		desc, err := remote.Head(ref, ropts...)
		if err != nil {
			return nil, fmt.Errorf("%s: resolving the tag of image %q: %w", s.label(), s.Image, err)
		}
		src.ref = ref.Context().Digest(desc.Digest.String())
	}
	return src, nil
}

func (s *imageSource) key() any {
	return struct {
		Image    string `json:"image"`
		Platform string `json:"platform"`
	}{s.ref.String(), s.platform}
}

func (s *imageSource) fill(ctx context.Context, u *unpacker, _ string) (filled, error) {
	desc, err := remote.Get(s.ref, s.ropts...)
	if err != nil {
		return filled{}, fmt.Errorf("fetching image %s: %w; check %s.image and that the registry is reachable", s.ref, err, s.spec.where())
	}
	img, err := desc.Image() // picks the platform's image from an index
	if err != nil {
		return filled{}, fmt.Errorf("image %s for %s: %w", s.ref, s.platform, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return filled{}, fmt.Errorf("image %s: config: %w", s.ref, err)
	}
	if cf.Architecture != "" && cf.Architecture != s.plat.Architecture {
		return filled{}, fmt.Errorf("image %s is %s/%s, not %s; use the digest of the %s image in %s.image",
			s.ref, cf.OS, cf.Architecture, s.platform, s.platform, s.spec.where())
	}
	mdig, err := img.Digest()
	if err != nil {
		return filled{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return filled{}, fmt.Errorf("image %s: layers: %w", s.ref, err)
	}
	for i, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return filled{}, err
		}
		label := fmt.Sprintf("image %s layer %d (%s)", s.ref, i+1, d)
		rc, err := l.Uncompressed()
		if err != nil {
			return filled{}, fmt.Errorf("%s: %w", label, err)
		}
		err = u.apply(ctx, rc, label)
		if cerr := rc.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%s: %w", label, cerr)
		}
		if err != nil {
			return filled{}, err
		}
	}
	src := "image " + s.ref.String()
	if mdig.String() != s.ref.DigestStr() {
		src += fmt.Sprintf(" (%s: %s)", s.platform, mdig)
	}
	return filled{source: src}, nil
}
