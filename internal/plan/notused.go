package plan

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/source"
)

// NotUsedPackage is a package of the tree that the cell's product does
// not use (the recipe's thirdparty.not_used), with the line of the tree's
// build that shows it. A plan of the whole tree does not build it; one
// whose --packages names it (or a package that needs it) does.
type NotUsedPackage struct {
	Entry   string `json:"entry"`
	Version string `json:"version"`
	Archive string `json:"archive"`
	MD5     string `json:"md5"`
	Why     string `json:"why"`
	// Where is the tree's file and line that shows it (be/CMakeLists.txt:495),
	// or the file alone when it shows it by naming no such thing.
	Where string `json:"where"`
	// Built says the plan builds it all the same (--packages named it, or
	// a package it builds needs it).
	Built bool `json:"built,omitempty"`
}

// maxShownBy bounds what is read of a file that shows a package unused.
const maxShownBy = 8 << 20

// notUsed finds the tree's packages the recipe says the cell's ISA does
// not use, where the tree still shows it: those whose tree no longer does
// (Doris changed) are built, with a warning saying so.
func (m *maker) notUsed() error {
	r, isa := m.in.Recipe, m.in.Cell.ISA.Name
	for _, pk := range m.pkgs {
		nu := r.Thirdparty.NotUsed[pk.Entry]
		if nu == nil {
			continue
		}
		for _, n := range nu.ISAs {
			if _, ok := m.in.Matrix.ISAs[n]; !ok {
				return datafile.Errorf(nu.Keys.At("isas", nu.Pos), "recipe %s: thirdparty.not_used.%s.isas names %q, which is not an ISA of %s (isas: %s)",
					r.Name, pk.Entry, n, m.in.Matrix.File, strings.Join(slices.Sorted(maps.Keys(m.in.Matrix.ISAs)), ", "))
			}
		}
		if len(nu.ISAs) > 0 && !slices.Contains(nu.ISAs, isa) {
			continue
		}
		where, holds, err := shownBy(m.in.Tree, nu.ShownBy)
		if err != nil {
			return fmt.Errorf("recipe %s: thirdparty.not_used.%s: %w", r.Name, pk.Entry, err)
		}
		switch {
		case !holds && where == "":
			m.warn("%s is built: recipe %s says it is not used on %s (%s), but this tree has no %s to show it", pk.Entry, r.Name, isaOrAll(nu.ISAs, isa), nu.Why, nu.ShownBy.File)
			continue
		case !holds:
			m.warn("%s is built: recipe %s says it is not used on %s (%s), but %s no longer shows that; check it and update thirdparty.not_used.%s",
				pk.Entry, r.Name, isaOrAll(nu.ISAs, isa), nu.Why, where, pk.Entry)
			continue
		}
		m.p.NotUsed = append(m.p.NotUsed, NotUsedPackage{Entry: pk.Entry, Version: pk.Version, Archive: pk.Name, MD5: pk.MD5, Why: nu.Why, Where: where})
	}
	return nil
}

func isaOrAll(isas []string, isa string) string {
	if len(isas) == 0 {
		return "any machine"
	}
	return isa
}

// skipNotUsed drops from a plan of the whole tree the packages its
// product does not use, but for those a package it builds needs; a plan
// of some packages (--packages) builds what it names, used or not.
func (m *maker) skipNotUsed() {
	if len(m.p.NotUsed) == 0 {
		return
	}
	notUsed := map[string]bool{}
	for _, nu := range m.p.NotUsed {
		notUsed[nu.Entry] = true
	}
	needed := map[string]bool{}
	if m.only == nil {
		var visit func(string)
		visit = func(e string) {
			for _, d := range m.in.Recipe.Thirdparty.Deps[e] {
				if !needed[d] {
					needed[d] = true
					visit(d)
				}
			}
		}
		for _, pk := range m.pkgs {
			if !notUsed[pk.Entry] {
				visit(pk.Entry)
			}
		}
		m.skip = map[string]bool{}
		for e := range notUsed {
			if !needed[e] {
				m.skip[e] = true
			}
		}
		m.p.Packages = slices.DeleteFunc(slices.Clone(m.p.Packages), func(pk source.Package) bool { return m.skip[pk.Entry] })
	}
	for i, nu := range m.p.NotUsed {
		if !m.builds(nu.Entry) {
			continue
		}
		m.p.NotUsed[i].Built = true
		why := "--packages names it"
		if m.only == nil || !slices.ContainsFunc(m.in.Packages, func(n string) bool { return strings.EqualFold(n, nu.Entry) }) {
			why = "a package this plan builds needs it"
		}
		m.warn("%s is built though %s does not use it (%s; %s): %s", nu.Entry, m.in.Cell.ISA.Name, nu.Why, nu.Where, why)
	}
}

// shownBy reads the tree's file sb names (through the tree's root: a link
// out of it is not followed) and says where it shows what the recipe
// says: the file and line number of the first line matching sb.Line, or
// the file alone when nothing in it matches sb.Absent. holds is false,
// with where naming what was found instead, when it does not; where is
// empty too when the tree has no such file.
func shownBy(tree string, sb recipe.ShownBy) (where string, holds bool, err error) {
	root, err := os.OpenRoot(tree)
	if err != nil {
		return "", false, err
	}
	defer root.Close()
	f, err := root.Open(filepath.FromSlash(sb.File))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("shown_by: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", false, fmt.Errorf("shown_by: %s in the tree is not a regular file", sb.File)
	}
	pat := sb.Line
	if pat == "" {
		pat = sb.Absent
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return "", false, fmt.Errorf("shown_by: %w", err)
	}
	sc := bufio.NewScanner(io.LimitReader(f, maxShownBy))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if re.MatchString(sc.Text()) {
			at := fmt.Sprintf("%s:%d", sb.File, n)
			if sb.Line != "" {
				return at, true, nil
			}
			return at + " (matches " + sb.Absent + ")", false, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", false, fmt.Errorf("shown_by: reading %s: %w", sb.File, err)
	}
	if sb.Line != "" {
		return sb.File + " (no line matches " + sb.Line + ")", false, nil
	}
	return sb.File, true, nil
}
