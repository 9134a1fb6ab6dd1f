package image

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// Sources are where a release's dates and borrowed images come from: the
// flags image build and publish share.
type Sources struct {
	// Epoch is seconds since 1970 ("" : $SOURCE_DATE_EPOCH via Getenv, else
	// the last commit of SourceDir).
	Epoch string
	// SourceDir is the git tree whose last commit dates the images and
	// names their revision.
	SourceDir string
	// Revision overrides the revision ("" : SourceDir's commit).
	Revision string
	// SourceURL fills org.opencontainers.image.source.
	SourceURL string
	// Base is a base image for every target: REF, oci:DIR, or scratch; ""
	// uses each target's base_image.
	Base string
	// IndexImages are NAME:OS/ARCH=LOCATION entries: an image of the user's
	// for a platform of a multi-arch index.
	IndexImages []string
	// Registry reaches base and index images in registries.
	Registry registry.Options
	Getenv   func(string) string
}

// Options resolves s into image Options: dates from flags, the environment
// or git, and base and index images opened lazily (each once per platform).
func (s Sources) Options(ctx context.Context) (Options, error) {
	epoch, rev, err := s.dates()
	if err != nil {
		return Options{}, err
	}
	idx, err := s.indexImages(ctx)
	if err != nil {
		return Options{}, err
	}
	return Options{Epoch: epoch, Revision: rev, Source: s.SourceURL, Base: s.bases(ctx), IndexImage: idx}, nil
}

func (s Sources) dates() (time.Time, string, error) {
	rev := s.Revision
	if rev == "" {
		if out, err := exec.Command("git", "-C", s.SourceDir, "log", "-1", "--format=%H", "--", ".").Output(); err == nil {
			rev = strings.TrimSpace(string(out))
		}
	}
	e := s.Epoch
	if e == "" && s.Getenv != nil {
		e = s.Getenv("SOURCE_DATE_EPOCH")
	}
	if e == "" {
		out, err := exec.Command("git", "-C", s.SourceDir, "log", "-1", "--format=%ct", "--", ".").Output()
		if err != nil || strings.TrimSpace(string(out)) == "" {
			return time.Time{}, "", fault.Inputf("no date for the images: %s is not a git checkout; set SOURCE_DATE_EPOCH or --epoch", s.SourceDir)
		}
		e = strings.TrimSpace(string(out))
	}
	sec, err := strconv.ParseInt(e, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, "", fault.Inputf("epoch %q: want seconds since 1970 (SOURCE_DATE_EPOCH)", e)
	}
	return time.Unix(sec, 0).UTC(), rev, nil
}

// open opens the image for p at a location, as bad input when it cannot.
func (s Sources) open(ctx context.Context, where, loc string, p v1.Platform) (v1.Image, error) {
	l, err := registry.ParseLocation(loc)
	if err != nil {
		return nil, fault.Inputf("%s: %w", where, err)
	}
	img, err := s.Registry.ImageFor(ctx, l, p)
	if err != nil {
		return nil, fault.Inputf("%s: %w", where, err)
	}
	return img, nil
}

func (s Sources) bases(ctx context.Context) func(v1.Platform, string) (v1.Image, string, error) {
	cache := map[string]v1.Image{}
	return func(p v1.Platform, ref string) (v1.Image, string, error) {
		where := "base_image " + ref
		if s.Base != "" {
			ref, where = s.Base, "--base "+s.Base
		}
		if ref == "" || ref == "scratch" {
			return nil, "", nil
		}
		key := ref + " " + p.String()
		if img, ok := cache[key]; ok {
			return img, ref, nil
		}
		img, err := s.open(ctx, where+" (offline? use oci:DIR, or --base scratch)", ref, p)
		if err != nil {
			return nil, "", err
		}
		cache[key] = img
		return img, ref, nil
	}
}

func (s Sources) indexImages(ctx context.Context) (func(string, v1.Platform) (v1.Image, string, error), error) {
	refs := map[string]string{}
	for _, e := range s.IndexImages {
		key, ref, ok := strings.Cut(e, "=")
		nm, plat, ok2 := strings.Cut(key, ":")
		if !ok || !ok2 || nm == "" || ref == "" || !strings.Contains(plat, "/") {
			return nil, fault.Inputf("--index-image %q: want NAME:OS/ARCH=REF, e.g. doris-be:linux/amd64=docker.io/apache/doris:be-2.1.8", e)
		}
		if _, dup := refs[nm+":"+plat]; dup {
			return nil, fault.Inputf("--index-image %q: %s is given twice", e, key)
		}
		refs[nm+":"+plat] = ref
	}
	return func(name string, p v1.Platform) (v1.Image, string, error) {
		ref, ok := refs[name+":"+p.OS+"/"+p.Architecture]
		if !ok {
			return nil, "", nil
		}
		img, err := s.open(ctx, fmt.Sprintf("--index-image %s:%s/%s", name, p.OS, p.Architecture), ref, p)
		return img, ref, err
	}, nil
}
