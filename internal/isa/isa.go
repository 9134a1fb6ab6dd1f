// Package isa classifies AArch64 instruction words into the optional ISA
// extension each needs, from a table of encoding masks kept as data
// (rules.yaml). It needs no disassembler: one table look-up by the word's top
// eleven bits narrows the rules to the few that can match.
package isa

import (
	_ "embed"
	"fmt"
	"path"
	"sync"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

//go:embed rules.yaml
var rulesYAML []byte

//go:embed dispatched.yaml
var dispatchedYAML []byte

// Rule is one row of rules.yaml.
type Rule struct {
	Feature string `yaml:"feature"`
	Mask    int64  `yaml:"mask"`
	Value   int64  `yaml:"value"`
	What    string `yaml:"what"`
	Hint    bool   `yaml:"hint"`
	// Group names a refinement table (groups.bin) that decides, within the
	// rule's encodings, the exact feature or that the word is unallocated.
	Group string `yaml:"group"`
	Pos   datafile.Pos
}

// Guard names functions that reach feature instructions only after a
// run-time check; Feature, when set, limits the guard to that feature.
type Guard struct {
	Match   string `yaml:"match"`  // function name glob
	Soname  string `yaml:"soname"` // or: every function of a library (DT_SONAME glob)
	Feature string `yaml:"feature"`
	Why     string `yaml:"why"`
	// Package is where the code was seen; Evidence the source that shows
	// the check and what was measured.
	Package  string `yaml:"package"`
	Evidence string `yaml:"evidence"`
	Pos      datafile.Pos
}

type dispatchedFile struct {
	Schema     int     `yaml:"schema"`
	Dispatched []Guard `yaml:"dispatched"`
}

type rulesFile struct {
	Schema  int     `yaml:"schema"`
	Rules   []Rule  `yaml:"rules"`
	Guarded []Guard `yaml:"guarded"`
}

type compiled struct {
	mask, value uint32
	feat        uint8
	hint        bool
	group       *groupTable
}

// Table is a compiled rule set.
type Table struct {
	// Features are the feature names; index 0 is "" (base instruction set).
	Features []string
	Rules    []Rule
	Guarded  []Guard
	rules    []compiled
	keyTable
	index  map[string]uint8
	groups []*groupTable
}

var (
	defaultOnce  sync.Once
	defaultTable *Table
)

// Default returns the table from the embedded rules.yaml and groups.bin,
// built on first use.
func Default() *Table {
	defaultOnce.Do(func() { defaultTable = mustLoad() })
	return defaultTable
}

func mustLoad() *Table {
	t, err := ParseWithGroups("internal/isa/rules.yaml", rulesYAML, groupsData)
	if err != nil {
		panic(err) // the embedded data is tested; a bad edit fails the tests
	}
	if err := t.LoadDispatched("internal/isa/dispatched.yaml", dispatchedYAML); err != nil {
		panic(err)
	}
	return t
}

// ParseWithGroups compiles a rules file and the group refinement tables
// (none when groups is nil).
func ParseWithGroups(file string, rules, groups []byte) (*Table, error) {
	return parse(file, rules, groups)
}

func parse(file string, data, groups []byte) (*Table, error) {
	var f rulesFile
	if err := datafile.Decode(file, data, &f); err != nil {
		return nil, err
	}
	return compile(file, f, groups)
}

// compile builds the table from a decoded rules file: the refinement groups,
// the rules, and the key table.
func compile(file string, f rulesFile, groups []byte) (*Table, error) {
	var errs datafile.List
	t := &Table{Features: []string{""}, index: map[string]uint8{"": 0}, Rules: f.Rules, Guarded: f.Guarded}
	if groups != nil {
		if err := t.loadGroups(groups); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	for _, r := range f.Rules {
		if r.Mask <= 0 || r.Mask > 0xffffffff || r.Value < 0 || r.Value > 0xffffffff || r.Value&^r.Mask != 0 {
			errs = append(errs, datafile.Errorf(r.Pos, "rule %s: mask %#x / value %#x: value has bits outside the mask, or either is not a 32-bit word", r.Feature, r.Mask, r.Value))
			continue
		}
		id, ok := t.index[r.Feature]
		if !ok {
			if len(t.Features) == 255 {
				return nil, fmt.Errorf("%s: too many features", file)
			}
			id = uint8(len(t.Features))
			t.index[r.Feature] = id
			t.Features = append(t.Features, r.Feature)
		}
		c := compiled{mask: uint32(r.Mask), value: uint32(r.Value), feat: id, hint: r.Hint}
		if r.Group != "" && groups != nil {
			for _, g := range t.groups {
				if g.name == r.Group {
					c.group = g
				}
			}
			if c.group == nil {
				errs = append(errs, datafile.Errorf(r.Pos, "rule %s: no refinement table %q", r.Feature, r.Group))
			}
		}
		t.rules = append(t.rules, c)
	}
	errs = append(errs, checkGuards(file, f.Guarded, false)...)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	if len(t.rules) > 255 {
		return nil, fmt.Errorf("%s: %d rules; the key table holds at most 255", file, len(t.rules))
	}
	t.buildKeys()
	return t, nil
}

func checkGuards(file string, gs []Guard, needEvidence bool) datafile.List {
	var errs datafile.List
	for _, g := range gs {
		pos := g.Pos
		if pos.File == "" {
			pos = datafile.Pos{File: file}
		}
		if (g.Match == "") == (g.Soname == "") {
			errs = append(errs, datafile.Errorf(pos, "guarded entry %q/%q: give exactly one of match and soname", g.Match, g.Soname))
		}
		if _, err := path.Match(g.Match+g.Soname, ""); err != nil {
			errs = append(errs, datafile.Errorf(pos, "guarded pattern %q: %v", g.Match+g.Soname, err))
		}
		if g.Why == "" {
			errs = append(errs, datafile.Errorf(pos, "guarded entry %q: why is required (the check, in a few words)", g.Match+g.Soname))
		}
		if needEvidence && (g.Package == "" || g.Evidence == "") {
			errs = append(errs, datafile.Errorf(pos, "dispatched entry %q: package and evidence are required (where it was seen, and the source or measurement that shows the check)", g.Match+g.Soname))
		}
	}
	return errs
}

// LoadDispatched adds the known runtime-dispatched functions of a
// dispatched.yaml file to the table's guards.
func (t *Table) LoadDispatched(file string, data []byte) error {
	var f dispatchedFile
	if err := datafile.Decode(file, data, &f); err != nil {
		return err
	}
	if f.Schema != 1 {
		return datafile.Errorf(datafile.Pos{File: file}, "schema %d: this dorisarm reads schema 1", f.Schema)
	}
	if err := checkGuards(file, f.Dispatched, true).Err(); err != nil {
		return err
	}
	t.Guarded = append(t.Guarded, f.Dispatched...)
	return nil
}

// Feature returns the id of a feature name (0 when unknown).
func (t *Table) Feature(name string) uint8 { return t.index[name] }

// Classify returns the feature a word needs (0: none) and whether it is a
// HINT-space encoding (a NOP where the feature is missing). Unallocated
// encodings inside refined groups need nothing: they are data.
func (t *Table) Classify(w uint32) (feat uint8, hint bool) {
	for _, r := range t.candidates(w) {
		if w&r.mask == r.value {
			if r.group != nil {
				return r.group.lookup(w), false
			}
			return r.feat, r.hint
		}
	}
	return 0, false
}

// GuardFor returns why a function's use of feature is guarded, or "".
func (t *Table) GuardFor(function, feature string) string { return t.GuardIn("", function, feature) }

// GuardIn is GuardFor for a function of the library with the given soname.
func (t *Table) GuardIn(soname, function, feature string) string {
	for _, g := range t.Guarded {
		if g.Feature != "" && g.Feature != feature {
			continue
		}
		if g.Match != "" {
			if ok, _ := path.Match(g.Match, function); ok {
				return g.Why
			}
		}
		if g.Soname != "" && soname != "" {
			if ok, _ := path.Match(g.Soname, soname); ok {
				return g.Why
			}
		}
	}
	return ""
}
