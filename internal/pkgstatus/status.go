// Package pkgstatus tabulates what third-party-only builds made of each
// package, per target, from their published build records: built (with its
// time, objects, machines, chosen instructions and flag read-back), failed
// (with the first error its log names) or not built because a package it
// needs failed.
package pkgstatus

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/build"
)

// Status is what became of one package in one build.
type Status string

const (
	Built   Status = "built"
	Failed  Status = "failed"
	Skipped Status = "skipped"
	// SourceOnly is an entry with no build step of its own: its source is
	// unpacked for another package's build (RAGEL for HYPERSCAN).
	SourceOnly Status = "source-only"
)

// Result is one package in one target's build.
type Result struct {
	Status Status `json:"status"`
	// Seconds is the time of its unpack and build steps (for a step from
	// the step cache, how long it took when it ran, where the cache kept
	// that); Cached says the build step came from the cache.
	Seconds float64 `json:"seconds"`
	Cached  bool    `json:"cached,omitempty"`
	// TimeUnknown: restored from a cache entry that does not say how long
	// the step took (an older dorisarm's); Seconds is then no build time.
	TimeUnknown bool `json:"time_unknown,omitempty"`
	// Scanned says the record holds the scan of its install (a step
	// restored from an older dorisarm's cache entry has none): the counts
	// below mean nothing without it.
	Scanned bool `json:"scanned"`
	// Files and ELF count what it installed; Foreign the ELF objects for
	// another machine than the target's.
	Files   int `json:"files"`
	ELF     int `json:"elf"`
	Foreign int `json:"foreign"`
	// Features counts the instructions of the extensions asked for
	// (Options.Features), guarded ones included.
	Features map[string]int `json:"features,omitempty"`
	// Violations are the scan's findings in its files judged alone.
	Violations int `json:"violations"`
	// AtTarget is the share of its compiled objects whose recorded flags
	// are the target's; FlagObjects how many objects recorded flags.
	AtTarget    float64 `json:"at_target"`
	FlagObjects int     `json:"flag_objects"`
	// Cause is why it failed (the step and first error lines) or what
	// it waited for.
	Cause string `json:"cause,omitempty"`
	Step  string `json:"step,omitempty"`
}

// Row is one package across the targets.
type Row struct {
	Package string             `json:"package"`
	Version string             `json:"version"`
	Archive string             `json:"archive"`
	MD5     string             `json:"md5"`
	SHA256  string             `json:"sha256,omitempty"`
	Results map[string]*Result `json:"results"`
}

// Table is the package × target table of a set of builds.
type Table struct {
	Doris string `json:"doris"`
	// Sources are the digests of the Doris trees built from (copies of one
	// tree may differ in the MD5 lines substitute archives need).
	Sources []string `json:"source_digests"`
	Targets []string `json:"targets"`
	// Compilers names each target's compiler.
	Compilers map[string]string `json:"compilers"`
	Rows      []*Row            `json:"rows"`
}

// Options say what to count.
type Options struct {
	// Features are the instruction-set extensions to count per package
	// (names as the scan reports them, e.g. from the matrix).
	Features []string
}

// Load reads and verifies the build record of each published build
// directory (<out>/<doris>/<target>, or its .partial) and tabulates them.
// All builds must be of one Doris version (their trees may differ, as the
// table's sources say); several builds of one target
// (the package list in parts) merge, each package by its best result.
func Load(dirs []string, opt Options) (*Table, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no build directory given: pass the published builds (<out>/<doris>/<target> or <target>.partial)")
	}
	t := &Table{Compilers: map[string]string{}}
	rows := map[string]*Row{}
	for _, d := range dirs {
		rec, err := build.Verify(d)
		if err != nil {
			return nil, err
		}
		if rec.Slice != nil || len(rec.Packages) == 0 {
			return nil, fmt.Errorf("%s: not a third-party build (its record lists no packages)", d)
		}
		if t.Doris == "" {
			t.Doris = rec.Cell.Doris
		} else if rec.Cell.Doris != t.Doris {
			return nil, fmt.Errorf("%s: a build of Doris %s, but %s is of %s: tabulate one Doris version at a time", d, rec.Cell.Doris, dirs[0], t.Doris)
		}
		if !slices.Contains(t.Sources, rec.Source.Digest) {
			t.Sources = append(t.Sources, rec.Source.Digest)
		}
		target := rec.Cell.Target
		compiler := strings.TrimSpace(rec.Compiler.Name + " " + rec.Compiler.Version)
		if c, seen := t.Compilers[target]; !seen {
			t.Targets = append(t.Targets, target)
			t.Compilers[target] = compiler
		} else if c != compiler {
			return nil, fmt.Errorf("%s: target %s built with %s here and with %s in another build: tabulate one compiler per target", d, target, compiler, c)
		}
		for _, p := range rec.Packages {
			row := rows[p.Entry]
			if row == nil {
				row = &Row{Package: p.Entry, Version: p.Version, Archive: p.Archive, MD5: p.MD5, SHA256: p.SHA256, Results: map[string]*Result{}}
				rows[p.Entry] = row
			} else if row.MD5 != p.MD5 {
				return nil, fmt.Errorf("%s: %s was built from %s (md5 %s) here and md5 %s elsewhere: tabulate builds of the same archives", filepath.Join(d, build.RecordFile), p.Entry, p.Archive, p.MD5, row.MD5)
			}
			// Several builds of one target (a package list split in
			// parts) merge: a package built in one counts as built, by
			// the build that ran it rather than restored it.
			if r := result(rec, p.Entry, opt); better(r, row.Results[target]) {
				row.Results[target] = r
			}
		}
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, r)
	}
	sort.Slice(t.Rows, func(i, j int) bool { return t.Rows[i].Package < t.Rows[j].Package })
	return t, nil
}

// better reports whether r says more of a package than old: built over
// anything else, a run over a cache restore, a failure over a skip.
func better(r, old *Result) bool {
	rank := func(r *Result) int {
		switch {
		case r == nil:
			return 0
		case r.Status == Built && !r.Cached:
			return 5
		case r.Status == Built:
			return 4
		case r.Status == Failed:
			return 3
		case r.Status == SourceOnly:
			return 2
		}
		return 1
	}
	return rank(r) > rank(old)
}

// result is what rec says of package pkg.
func result(rec *build.Record, pkg string, opt Options) *Result {
	r := &Result{Status: Built}
	if p := rec.Partial; p != nil {
		for _, e := range p.Errors {
			if e.Package == pkg {
				r.Status, r.Step, r.Cause = Failed, e.Step, cause(e)
				return r
			}
		}
		for _, f := range p.Failed {
			if f == pkg {
				r.Status = Failed
				return r
			}
		}
		for _, s := range p.Skipped {
			// "NAME (needs OTHER)"
			if name, why, ok := strings.Cut(s, " "); ok && name == pkg || s == pkg {
				r.Status, r.Cause = Skipped, strings.TrimPrefix(strings.Trim(why, "()"), "needs ")
				return r
			}
		}
	}
	r.Status = SourceOnly
	for _, s := range rec.Steps {
		if s.ID == "unpack:"+pkg || s.ID == "thirdparty:"+pkg {
			if s.Cached && s.RanSeconds > 0 {
				r.Seconds += s.RanSeconds // when it ran, not its restore
			} else {
				r.Seconds += s.Seconds
			}
		}
		if s.ID == "thirdparty:"+pkg {
			r.Status, r.Cached = Built, s.Cached
			r.TimeUnknown = s.Cached && s.RanSeconds == 0
		}
	}
	if ps := rec.PackageScans[pkg]; ps != nil {
		r.Scanned, r.Files, r.ELF, r.Violations = true, ps.Files, ps.ELF, ps.Violations
		for m, n := range ps.Machines {
			if m != rec.Cell.ISA {
				r.Foreign += n
			}
		}
		for _, f := range opt.Features {
			if n := ps.Features[f]; n > 0 {
				if r.Features == nil {
					r.Features = map[string]int{}
				}
				r.Features[f] = n
			}
		}
	}
	if fs := rec.PackageFlags[pkg]; fs != nil {
		r.AtTarget, r.FlagObjects = fs.AtTarget, fs.Objects
	}
	return r
}

// cause is one line for a failure: its first error line when the log
// named one, else the step's error.
func cause(e build.PackageError) string {
	if len(e.First) > 0 {
		return e.First[0]
	}
	return e.Error
}
