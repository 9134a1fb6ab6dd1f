// Package isa classifies AArch64 instruction words into the optional ISA
// extension each needs, from a table of encoding masks kept as data
// (rules.yaml). It needs no disassembler: one table look-up by the word's top
// eleven bits narrows the rules to the few that can match.
package isa

import (
	_ "embed"
	"fmt"
	"path"
	"sort"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

//go:embed rules.yaml
var rulesYAML []byte

// Rule is one row of rules.yaml.
type Rule struct {
	Feature string `yaml:"feature"`
	Mask    int64  `yaml:"mask"`
	Value   int64  `yaml:"value"`
	What    string `yaml:"what"`
	Hint    bool   `yaml:"hint"`
	Pos     datafile.Pos
}

// Guard names functions that reach feature instructions only after a
// run-time check; Feature, when set, limits the guard to that feature.
type Guard struct {
	Match   string `yaml:"match"`  // function name glob
	Soname  string `yaml:"soname"` // or: every function of a library (DT_SONAME glob)
	Feature string `yaml:"feature"`
	Why     string `yaml:"why"`
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
}

// Table is a compiled rule set.
type Table struct {
	// Features are the feature names; index 0 is "" (base instruction set).
	Features []string
	Rules    []Rule
	Guarded  []Guard
	rules    []compiled
	// byTop lists, for each value of bits 31:21, the rules that can match
	// (in order); an empty list means every such word is base v8.0.
	byTop [2048][]compiled
	index map[string]uint8
}

// Default is the table from the embedded rules.yaml.
var Default = mustLoad()

func mustLoad() *Table {
	t, err := Parse("internal/isa/rules.yaml", rulesYAML)
	if err != nil {
		panic(err) // the embedded data is tested; a bad edit fails the tests
	}
	return t
}

// Parse compiles a rules file.
func Parse(file string, data []byte) (*Table, error) {
	var f rulesFile
	if err := datafile.Decode(file, data, &f); err != nil {
		return nil, err
	}
	var errs datafile.List
	t := &Table{Features: []string{""}, index: map[string]uint8{"": 0}, Rules: f.Rules, Guarded: f.Guarded}
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
		t.rules = append(t.rules, compiled{uint32(r.Mask), uint32(r.Value), id, r.Hint})
	}
	for _, g := range f.Guarded {
		if (g.Match == "") == (g.Soname == "") {
			errs = append(errs, datafile.Errorf(datafile.Pos{File: file}, "guarded entry %q/%q: give exactly one of match and soname", g.Match, g.Soname))
		}
		if _, err := path.Match(g.Match+g.Soname, ""); err != nil {
			errs = append(errs, datafile.Errorf(datafile.Pos{File: file}, "guarded pattern %q: %v", g.Match, err))
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	for top := uint32(0); top < 2048; top++ {
		for _, r := range t.rules {
			if (top<<21^r.value)&r.mask&0xffe00000 == 0 {
				t.byTop[top] = append(t.byTop[top], r)
			}
		}
	}
	return t, nil
}

// Feature returns the id of a feature name (0 when unknown).
func (t *Table) Feature(name string) uint8 { return t.index[name] }

// Classify returns the feature a word needs (0: none) and whether it is a
// HINT-space encoding (a NOP where the feature is missing).
func (t *Table) Classify(w uint32) (feat uint8, hint bool) {
	for _, r := range t.byTop[w>>21] {
		if w&r.mask == r.value {
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

// Names returns the feature names except the base one, sorted.
func (t *Table) Names() []string {
	out := append([]string{}, t.Features[1:]...)
	sort.Strings(out)
	return out
}
