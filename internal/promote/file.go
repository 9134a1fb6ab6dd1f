package promote

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// Promotion is one reviewed entry of a promotions file: a source by digest
// and the tags it gets.
type Promotion struct {
	Source string   `yaml:"source"`
	Tags   []string `yaml:"tags"`
	Pos    datafile.Pos
	Keys   datafile.Keys

	Src name.Digest `yaml:"-"`
	Dst []name.Tag  `yaml:"-"`
}

type promotionsFile struct {
	Promotions []*Promotion `yaml:"promotions"`
}

// LoadFile reads a promotions file (promotions: [{source: REPO@sha256:…,
// tags: [REPO:TAG, …]}]), like the Kubernetes promoter's manifests: sources
// by digest only, so what is promoted is what was reviewed.
func LoadFile(path string, ro registry.Options) ([]*Promotion, error) {
	data, err := fsutil.ReadFile(path, datafile.MaxSize)
	if err != nil {
		return nil, &datafile.Error{Pos: datafile.Pos{File: path}, Msg: fmt.Sprintf("cannot read the promotions file: %v", err), Err: err}
	}
	var f promotionsFile
	if err := datafile.Decode(path, data, &f); err != nil {
		return nil, err
	}
	var errs datafile.List
	if len(f.Promotions) == 0 {
		errs = append(errs, datafile.Errorf(datafile.Pos{File: path, Line: 1}, "promotions: at least one entry is required"))
	}
	for _, p := range f.Promotions {
		if !strings.Contains(p.Source, "@sha256:") {
			errs = append(errs, datafile.Errorf(p.Keys.At("source", p.Pos), "source %q must name a digest (REPO@sha256:...): promotions are reviewed by digest", p.Source))
		} else if r, err := ro.Reference(p.Source); err != nil {
			errs = append(errs, datafile.Errorf(p.Keys.At("source", p.Pos), "source %q: %v", p.Source, err))
		} else if d, ok := r.(name.Digest); !ok {
			errs = append(errs, datafile.Errorf(p.Keys.At("source", p.Pos), "source %q must name a digest (REPO@sha256:...)", p.Source))
		} else {
			p.Src = d
		}
		if len(p.Tags) == 0 {
			errs = append(errs, datafile.Errorf(p.Pos, "promotion of %s: tags: at least one destination tag is required", p.Source))
		}
		for _, t := range p.Tags {
			tag, err := ro.Tag(t)
			if err != nil || !strings.Contains(t[strings.LastIndex(t, "/")+1:], ":") || strings.Contains(t, "@") {
				errs = append(errs, datafile.Errorf(p.Keys.At("tags", p.Pos), "destination %q must be REPO:TAG", t))
				continue
			}
			p.Dst = append(p.Dst, tag)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return f.Promotions, nil
}
