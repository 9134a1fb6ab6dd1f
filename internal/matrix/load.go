package matrix

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/datafs"
)

// DefaultFile is where commands look for the matrix unless told otherwise.
const DefaultFile = "matrix.yaml"

// Load reads and validates the matrix at path.
func Load(path string) (*Matrix, error) {
	data, err := datafs.ReadFile(path)
	if err != nil {
		return nil, &datafile.Error{Pos: datafile.Pos{File: path}, Msg: fmt.Sprintf("cannot read the matrix: %v (pass --matrix FILE)", err), Err: err}
	}
	return Parse(path, data)
}

// Parse decodes and validates matrix data read from file.
func Parse(file string, data []byte) (*Matrix, error) {
	sum := sha256.Sum256(data)
	m := new(Matrix)
	if err := datafile.Decode(file, data, m); err != nil {
		return nil, err
	}
	m.nameEntries()
	if err := m.validate(); err != nil {
		return nil, err
	}
	m.File = file
	m.Digest = "sha256:" + hex.EncodeToString(sum[:])
	return m, nil
}

func (m *Matrix) nameEntries() {
	for n, v := range m.ISAs {
		v.Name = n
	}
	for n, v := range m.Extensions {
		v.Name = n
	}
	for n, v := range m.ArchLevels {
		v.Name = n
	}
	for n, v := range m.QemuModels {
		v.Name = n
	}
	for n, v := range m.CPUs {
		v.Name = n
	}
	for n, v := range m.OSes {
		v.ID = n
	}
	for n, v := range m.Compilers {
		v.Name = n
	}
	for n, v := range m.Doris {
		v.Series = n
	}
	for n, v := range m.Targets {
		v.Name = n
	}
	for n, v := range m.Sysroots {
		v.Name = n
	}
	for n, v := range m.Runtimes {
		v.Name = n
	}
}

// Set is a set of extension names.
type Set map[string]bool

// Sorted returns the members in order.
func (s Set) Sorted() []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Minus returns the members of s not in o, sorted.
func (s Set) Minus(o Set) []string {
	var out []string
	for k := range s {
		if !o[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Closure returns names plus everything they imply.
func (m *Matrix) Closure(names []string) Set {
	s := make(Set, 2*len(names)+8) // room for what they imply, mostly
	var add func(string)
	add = func(n string) {
		if s[n] {
			return
		}
		s[n] = true
		if e, ok := m.Extensions[n]; ok {
			for _, i := range e.Implies {
				add(i)
			}
		}
	}
	for _, n := range names {
		add(n)
	}
	return s
}

// implies reports whether extension a implies b, directly or not.
func (m *Matrix) implies(a, b string) bool {
	var seen []string // a handful: a slice beats a map
	var walk func(string) bool
	walk = func(x string) bool {
		if x == b {
			return true
		}
		if slices.Contains(seen, x) {
			return false
		}
		seen = append(seen, x)
		if e, ok := m.Extensions[x]; ok {
			for _, i := range e.Implies {
				if walk(i) {
					return true
				}
			}
		}
		return false
	}
	return walk(a)
}

// LevelExtensions returns the extensions -march=<level> alone enables.
func (m *Matrix) LevelExtensions(level string) (Set, error) {
	var names []string
	seen := map[string]bool{}
	for l := level; l != ""; {
		al, ok := m.ArchLevels[l]
		if !ok {
			return nil, fmt.Errorf("unknown architecture level %q", l)
		}
		if seen[l] {
			return nil, fmt.Errorf("architecture level %q extends itself", l)
		}
		seen[l] = true
		names = append(names, al.Adds...)
		l = al.Extends
	}
	return m.Closure(names), nil
}

// cryptoFor returns what +crypto means at level (the nearest level that says).
func (m *Matrix) cryptoFor(level string) []string {
	for l := level; l != ""; {
		al, ok := m.ArchLevels[l]
		if !ok {
			return nil
		}
		if len(al.Crypto) > 0 {
			return al.Crypto
		}
		l = al.Extends
	}
	return nil
}

// March is a parsed -march value.
type March struct {
	Level      string
	Extensions Set // everything the compiler may use with this -march
}

// ParseMarch resolves a -march string ("armv8.2-a+crypto+fp16+nosve") into its
// level and the full set of extensions it enables.
func (m *Matrix) ParseMarch(march string) (March, error) {
	parts := strings.Split(march, "+")
	level := parts[0]
	exts, err := m.LevelExtensions(level)
	if err != nil {
		return March{}, err
	}
	if err := m.ApplyModifiers(exts, level, parts[1:]); err != nil {
		return March{}, fmt.Errorf("-march=%s: %w", march, err)
	}
	return March{Level: level, Extensions: exts}, nil
}

// ApplyModifiers applies -march/-mcpu feature modifiers ("crypto", "nosve")
// to exts in order, as the compilers do: a name adds the extension and what
// it implies; "no" before a name removes it and every extension that
// implies it. level says what "crypto" means.
func (m *Matrix) ApplyModifiers(exts Set, level string, mods []string) error {
	byMarch := map[string]string{}
	for name, e := range m.Extensions {
		if e.March != "" {
			byMarch[e.March] = name
		}
	}
	for _, tok := range mods {
		remove := false
		t := tok
		if strings.HasPrefix(t, "no") && t != "no" {
			if _, ok := byMarch[t]; !ok {
				remove, t = true, strings.TrimPrefix(t, "no")
			}
		}
		var names []string
		switch {
		case t == "crypto":
			names = m.cryptoFor(level)
		case byMarch[t] != "":
			names = []string{byMarch[t]}
		default:
			return fmt.Errorf("unknown extension %q (known: %s)", tok, strings.Join(slices.Sorted(maps.Keys(byMarch)), ", "))
		}
		for _, n := range names {
			if remove {
				delete(exts, n)
				// Removing an extension removes what depends on it.
				for name := range exts {
					if m.implies(name, n) {
						delete(exts, name)
					}
				}
				continue
			}
			for k := range m.Closure([]string{n}) {
				exts[k] = true
			}
		}
	}
	return nil
}

// LowerBound returns the lowest version a constraint string admits, or nil
// when the constraint has no lower bound (e.g. "< 13").
func LowerBound(constraint string) *version.Version {
	var best *version.Version
	for _, part := range strings.Split(constraint, ",") {
		p := strings.TrimSpace(part)
		var op string
		for _, o := range []string{">=", "<=", "!=", "~>", ">", "<", "="} {
			if strings.HasPrefix(p, o) {
				op = o
				break
			}
		}
		vs := strings.TrimSpace(strings.TrimPrefix(p, op))
		v, err := version.NewVersion(vs)
		if err != nil {
			continue
		}
		switch op {
		case ">=", "~>", "=", "":
		case ">":
			segs := v.Segments()
			segs[len(segs)-1]++
			parts := make([]string, len(segs))
			for i, s := range segs {
				parts[i] = fmt.Sprint(s)
			}
			v, _ = version.NewVersion(strings.Join(parts, "."))
		default:
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best = v
		}
	}
	return best
}
