package scan

import (
	"fmt"
	"path"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/datafs"
)

// Exception is one reviewed exception: findings whose path matches Path (a
// glob; "*" does not cross "/", and "**" alone matches every path), of Kind and, when set,
// of Feature, are waived, for Reason.
type Exception struct {
	Path    string `yaml:"path"`
	Kind    string `yaml:"kind"`
	Feature string `yaml:"feature"`
	Reason  string `yaml:"reason"`
	Pos     datafile.Pos
	Keys    datafile.Keys
}

// AllowUse reports how often an exception was used.
type AllowUse struct {
	Exception string `json:"exception"` // file:line
	Path      string `json:"path"`
	Kind      string `json:"kind"`
	Feature   string `json:"feature,omitempty"`
	Reason    string `json:"reason"`
	Matched   int    `json:"matched"`
}

type allowFile struct {
	Exceptions []Exception `yaml:"exceptions"`
}

var knownKinds = map[string]bool{KindForeignArch: true, KindISA: true, KindGlibc: true, KindGlibcxx: true,
	KindOpenSSLStatic: true, KindOpenSSLShared: true, KindJNIMissing: true, KindPageSize: true, KindUnreadable: true, KindHeaders: true,
	KindFlagsBeyond: true, KindLostTuning: true, KindFlagsUnresolved: true, KindUnrecorded: true}

// LoadAllow reads an allow file.
func LoadAllow(file string) ([]Exception, error) {
	data, err := datafs.ReadFile(file)
	if err != nil {
		return nil, &datafile.Error{Pos: datafile.Pos{File: file}, Msg: fmt.Sprintf("cannot read the allow file: %v", err), Err: err}
	}
	var f allowFile
	if err := datafile.Decode(file, data, &f); err != nil {
		return nil, err
	}
	var errs datafile.List
	for _, e := range f.Exceptions {
		if e.Path == "" {
			errs = append(errs, datafile.Errorf(e.Pos, "exception: path is required (a glob such as be/lib/*.so)"))
		} else if _, err := path.Match(e.Path, ""); err != nil {
			errs = append(errs, datafile.Errorf(e.Keys.At("path", e.Pos), "exception: bad path glob %q: %v", e.Path, err))
		}
		if !knownKinds[e.Kind] {
			errs = append(errs, datafile.Errorf(e.Keys.At("kind", e.Pos), "exception: unknown kind %q (one of foreign-arch, isa-extension, glibc-version, glibcxx-version, openssl-static, openssl-dynamic, jni-missing-arch, page-size, unreadable, elf-headers, flags-beyond-cpu, lost-tuning, flags-unresolved, flags-unrecorded)", e.Kind))
		}
		if e.Reason == "" {
			errs = append(errs, datafile.Errorf(e.Pos, "exception: reason is required: say why this is safe"))
		}
	}
	return f.Exceptions, errs.Err()
}

// applyAllow marks the violations the exceptions waive and reports use.
func applyAllow(r *Report, exc []Exception) {
	for _, e := range exc {
		use := AllowUse{Exception: e.Pos.String(), Path: e.Path, Kind: e.Kind, Feature: e.Feature, Reason: e.Reason}
		for i := range r.Findings {
			f := &r.Findings[i]
			if (f.Severity != SevError && f.Severity != SevWarning) || f.Allowed != "" || f.Kind != e.Kind || (e.Feature != "" && f.Feature != e.Feature) {
				continue
			}
			if ok, _ := path.Match(e.Path, f.Path); !ok && e.Path != "**" {
				continue
			}
			f.Allowed = e.Pos.String() + ": " + e.Reason
			use.Matched++
		}
		r.Allowed = append(r.Allowed, use)
		if use.Matched == 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: exception (%s %s %s) matched nothing; remove it if the problem is gone", e.Pos, e.Kind, e.Path, e.Feature))
		}
	}
}
