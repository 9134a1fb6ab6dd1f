// Package pkgstatus tabulates what third-party-only builds made of each
// package, per target, from their published build records: built (with its
// time, objects, machines, chosen instructions and flag read-back), failed
// (with the first error its log names) or not built because a package it
// needs failed.
package pkgstatus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/fsutil"
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
	// NotUsed is an entry the target's product does not use (the recipe's
	// thirdparty.not_used): not built, by design; Cause says why and where.
	NotUsed Status = "not-used"
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
	// ISA is the instruction set a package is not used on (NotUsed).
	ISA string `json:"isa,omitempty"`
	// Earlier says the result comes from an earlier table (Merge), not from
	// a build directory read this time.
	Earlier bool `json:"earlier,omitempty"`
	// Text, when set, is the cell as an earlier table printed it, shown as
	// it is: a table carried over from its Markdown, whose counts were not
	// kept as data.
	Text string `json:"text,omitempty"`
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
		for _, nu := range rec.NotUsed {
			row := rows[nu.Entry]
			if row == nil {
				row = &Row{Package: nu.Entry, Version: nu.Version, Archive: nu.Archive, MD5: nu.MD5, Results: map[string]*Result{}}
				rows[nu.Entry] = row
			}
			r := &Result{Status: NotUsed, Cause: fmt.Sprintf("%s (%s)", nu.Why, nu.Where), ISA: rec.Cell.ISA}
			if better(r, row.Results[target]) {
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
		case r.Status == SourceOnly, r.Status == NotUsed:
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

// Merge fills what t's builds say nothing of from prev, an earlier table of
// the same Doris version (dorisarm packages -o json): its targets, its rows
// and, in a row t has, its results for targets t's builds did not try. What
// t's builds say wins; a result taken from prev is marked Earlier. A package
// made from other bytes (md5) than the earlier table's, where an earlier
// cell would be kept, or a target built by another compiler in the two
// tables is an error: merging them would mix builds of different things.
func (t *Table) Merge(prev *Table) error {
	if prev.Doris != t.Doris {
		return fmt.Errorf("the earlier table is of Doris %s, these builds are of %s: merge tables of one Doris version", prev.Doris, t.Doris)
	}
	for _, tg := range prev.Targets {
		c, seen := t.Compilers[tg]
		switch {
		case !seen:
			t.Compilers[tg] = prev.Compilers[tg]
		case c != prev.Compilers[tg]:
			return fmt.Errorf("target %s was built with %s here and with %s in the earlier table: merge builds of one compiler per target", tg, c, prev.Compilers[tg])
		}
	}
	// The earlier table's columns keep their order; new targets follow.
	targets := slices.Clone(prev.Targets)
	for _, tg := range t.Targets {
		if !slices.Contains(targets, tg) {
			targets = append(targets, tg)
		}
	}
	t.Targets = targets
	for _, s := range prev.Sources {
		if !slices.Contains(t.Sources, s) {
			t.Sources = append(t.Sources, s)
		}
	}
	rows := map[string]*Row{}
	for _, r := range t.Rows {
		rows[r.Package] = r
	}
	for _, pr := range prev.Rows {
		row := rows[pr.Package]
		if row == nil {
			row = &Row{Package: pr.Package, Version: pr.Version, Archive: pr.Archive, MD5: pr.MD5, SHA256: pr.SHA256, Results: map[string]*Result{}}
			rows[pr.Package] = row
			t.Rows = append(t.Rows, row)
		} else if row.MD5 != pr.MD5 {
			// Other bytes: the earlier cells are of another package
			// build. Fine when these builds replace every one of them.
			for tg, res := range pr.Results {
				if res != nil && row.Results[tg] == nil {
					return fmt.Errorf("%s was built from %s (md5 %s) here and from md5 %s in the earlier table, which has it for %s: rebuild it for %s too, or leave it out of the earlier table", pr.Package, row.Archive, row.MD5, pr.MD5, tg, tg)
				}
			}
			continue
		}
		for tg, res := range pr.Results {
			if res == nil || row.Results[tg] != nil {
				continue
			}
			c := *res
			c.Earlier = true
			row.Results[tg] = &c
		}
	}
	sort.Slice(t.Rows, func(i, j int) bool { return t.Rows[i].Package < t.Rows[j].Package })
	return nil
}

// maxTableBytes bounds an earlier table read by ReadTable (a real one is
// tens of KiB).
const maxTableBytes = 16 << 20

// ReadTable reads a table written by dorisarm packages -o json.
func ReadTable(path string) (*Table, error) {
	// A regular file only: a named pipe would block, /dev/zero never end.
	data, err := fsutil.ReadFile(path, maxTableBytes)
	if err != nil {
		return nil, fmt.Errorf("%w (want the output of dorisarm packages -o json)", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t Table
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: %w (want the output of dorisarm packages -o json)", path, err)
	}
	if t.Doris == "" || len(t.Targets) == 0 {
		return nil, fmt.Errorf("%s: names no Doris version or no target: want the output of dorisarm packages -o json", path)
	}
	if t.Compilers == nil {
		t.Compilers = map[string]string{}
	}
	for i, r := range t.Rows {
		if r == nil || r.Package == "" {
			return nil, fmt.Errorf("%s: row %d names no package", path, i+1)
		}
		for tg := range r.Results {
			if !slices.Contains(t.Targets, tg) {
				return nil, fmt.Errorf("%s: %s has a result for %s, which is not among its targets %v", path, r.Package, tg, t.Targets)
			}
		}
	}
	return &t, nil
}
