package plan

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/dorisarm/dorisarm/internal/patch"
)

// FixedMarch is a line of the tree that fixes the instruction set of
// everything it compiles with a literal -march (Doris 2.1 and 3.0's
// be/CMakeLists.txt: add_compile_options(-march=armv8-a+crc)), which no
// selected patch replaces: the BE would be built at that -march whatever
// the target's flags say.
type FixedMarch struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

func (f FixedMarch) String() string { return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Text) }

// literalMarch is a -march= (or -mcpu=) whose value is written out, not a
// variable the build sets (${ARM_MARCH}); made on first use.
var literalMarch = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`-m(arch|cpu)=[A-Za-z0-9]`) })

// maxGuarded bounds one file the guard reads.
const maxGuarded = 4 << 20

// fixedMarches are the lines of the tree's files matching globs (the
// recipe's fixed_march, slash-separated globs relative to the tree) that
// fix a literal -march and that none of patches removes. The tree is read
// through an os.Root (a link out of it is not followed) and only its
// regular files.
func fixedMarches(tree string, globs []string, patches []*patch.Patch) ([]FixedMarch, error) {
	if len(globs) == 0 {
		return nil, nil
	}
	root, err := os.OpenRoot(tree)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var out []FixedMarch
	for _, g := range globs {
		files, err := fs.Glob(root.FS(), g)
		if err != nil {
			return nil, fmt.Errorf("recipe fixed_march %q: %w", g, err)
		}
		for _, f := range files {
			found, err := fixedIn(root, f, patches)
			if err != nil {
				return nil, err
			}
			out = append(out, found...)
		}
	}
	return out, nil
}

func fixedIn(root *os.Root, rel string, patches []*patch.Patch) ([]FixedMarch, error) {
	st, err := root.Lstat(filepath.FromSlash(rel))
	if err != nil || !st.Mode().IsRegular() {
		return nil, nil // a link or a directory is no build file of the tree's own
	}
	if st.Size() > maxGuarded {
		return nil, fmt.Errorf("%s is %d bytes, more than a build file (%d): is the tree what it says?", rel, st.Size(), maxGuarded)
	}
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []FixedMarch
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxGuarded)
	for n := 1; sc.Scan(); n++ {
		code, _, _ := strings.Cut(sc.Text(), "#")
		if !literalMarch().MatchString(code) {
			continue
		}
		removed := false
		for _, pt := range patches {
			if pt.Removes(rel, sc.Text()) {
				removed = true
				break
			}
		}
		if !removed {
			out = append(out, FixedMarch{File: rel, Line: n, Text: strings.TrimSpace(sc.Text())})
		}
	}
	return out, sc.Err()
}

// guardMarch refuses a plan that builds the BE from a tree that fixes a
// literal -march no selected patch replaces, unless the user accepted the
// lost tuning (recorded in the cell, so the record, attestation and
// report carry it). An acceptance is recorded whenever the plan builds
// the BE: the build's scan gate, which fails on the tree's own objects
// below the target's -march wherever the -march came from (a line the
// recipe's fixed_march files do not hold too), then only warns of them.
func guardMarch(p *Plan, in Inputs, selected []*patch.Patch, pkgsOnly bool) error {
	if pkgsOnly || in.Tree == "" {
		return nil // no BE unit is compiled
	}
	var tree []*patch.Patch
	for _, pt := range selected {
		if pt.Component == TreeComponent {
			tree = append(tree, pt)
		}
	}
	fixed, err := fixedMarches(in.Tree, in.Recipe.FixedMarch, tree)
	if err != nil {
		return err
	}
	if len(fixed) == 0 {
		if in.AcceptLostTuning != "" {
			p.Cell.LostTuning = in.AcceptLostTuning
			p.Warnings = append(p.Warnings, fmt.Sprintf("lost tuning accepted (%s): no line of the recipe's fixed_march files fixes the BE's -march, but the scan gate will only warn of the tree's own objects below -march=%s", in.AcceptLostTuning, p.Cell.March))
		}
		return nil
	}
	if in.AcceptLostTuning == "" {
		var lines []string
		for _, f := range fixed {
			lines = append(lines, "  "+f.String())
		}
		return fmt.Errorf("doris %s: the tree fixes the BE's instruction set, and no patch selected for %s replaces it, so every BE object would be built at that -march instead of %s:\n%s\nadd a patch under %s whose Applies-To covers doris %s (as %s/0002-be-march-from-build.patch does for 2.1), or pass --accept-lost-tuning REASON to build it so (recorded in the build record, its attestation and the report)",
			in.Version, p.Cell.Target, p.Cell.March, strings.Join(lines, "\n"), in.Series.Dir, in.Version, TreeComponent)
	}
	p.Cell.LostTuning, p.Cell.FixedMarch = in.AcceptLostTuning, fixed
	p.Warnings = append(p.Warnings, fmt.Sprintf("lost tuning accepted (%s): %s fixes the BE's -march, not %s", in.AcceptLostTuning, fixed[0], p.Cell.March))
	return nil
}
