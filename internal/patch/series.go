// Package patch handles dorisarm's patch series: patches/<component>/NNNN-name.patch,
// each a unified diff behind a DEP-3 header with dorisarm's own fields
// (Applies-To, Targets, Evidence). This file reads the headers and selects
// the patches a cell gets.
package patch

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-version"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

// Patch is one patch file of a series.
type Patch struct {
	Path      string // file path
	Component string // directory name under patches/
	Number    int    // NNNN
	Name      string // the part after NNNN-, e.g. scalar-bitshuffle
	SHA256    string // of the whole file

	Description string
	Author      string
	Origin      string
	Forwarded   string
	LastUpdate  string
	AppliesTo   string // constraint on the component's version, e.g. "= 0.5.1"
	Targets     []string
	Evidence    string
	// NeedsPath are paths (relative to the component's source) a tree must
	// hold for the patch to apply to it: a submodule's file. A tree without
	// them (a build-interface copy, a tarball without submodules) does not
	// get the patch, and the plan says so.
	NeedsPath []string
	// Steps are the recipe steps (be, fe, thirdparty) that use what the
	// patch changes: a plan with none of them (a --packages build has only
	// thirdparty) does not apply it. Empty: every plan applies it.
	Steps []string

	Fields map[string]datafile.Pos // where each header field starts
	Body   []byte                  // the diff, from the first "--- " / "diff " line
	// BodyLine is the 1-based line the diff starts on in the file.
	BodyLine int

	constraint version.Constraints
	files      []*FileDiff
}

// Missing is the first of NeedsPath the source tree at root does not
// hold, or "" when it holds them all. Each is looked up inside the tree
// (os.Root), following only symbolic links that stay in it: a path reached
// through a link out of the tree (be/src/foo -> /etc satisfying
// be/src/foo/passwd) or through a link to nothing is not the tree's, so
// it counts as missing and the patch is not applied; why then names the
// link, for the plan's warning ("" when the path is simply not there).
func (p *Patch) Missing(root string) (path, why string) {
	if len(p.NeedsPath) == 0 {
		return "", ""
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return p.NeedsPath[0], err.Error()
	}
	defer r.Close()
	for _, np := range p.NeedsPath {
		if _, err := r.Stat(filepath.FromSlash(np)); err != nil {
			return np, linkOut(r, np)
		}
	}
	return "", ""
}

// whyNot is why from Missing as the end of a parenthesis: "; why" or "".
func whyNot(why string) string {
	if why == "" {
		return ""
	}
	return "; " + why
}

// linkOut names the first symbolic link on the way to rel (a slash path)
// that does not lead to something inside r, or "".
func linkOut(r *os.Root, rel string) string {
	parts := strings.Split(rel, "/")
	for i := range parts {
		at := filepath.Join(parts[:i+1]...)
		fi, err := r.Lstat(at)
		if err != nil {
			return ""
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if _, err := r.Stat(at); err != nil {
			target, _ := r.Readlink(at)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Sprintf("%s is a symbolic link to %s, which is not in the tree", filepath.ToSlash(at), target)
			}
			return fmt.Sprintf("%s is a symbolic link out of the tree, to %s", filepath.ToSlash(at), target)
		}
	}
	return ""
}

// UsedBy reports whether a plan whose steps are steps needs the patch.
func (p *Patch) UsedBy(steps map[string]bool) bool {
	if len(p.Steps) == 0 {
		return true
	}
	for _, s := range p.Steps {
		if steps[s] {
			return true
		}
	}
	return false
}

// Files returns the patch's parsed diff.
func (p *Patch) Files() ([]*FileDiff, error) {
	if p.files != nil {
		return p.files, nil
	}
	fds, err := ParseDiff(p.Path, p.Body, p.BodyLine)
	if err != nil {
		return nil, err
	}
	p.files = fds
	return fds, nil
}

// Summary is the first line of the description.
func (p *Patch) Summary() string {
	first, _, _ := strings.Cut(p.Description, "\n")
	return first
}

// ID is "<component>/NNNN-name".
func (p *Patch) ID() string { return fmt.Sprintf("%s/%04d-%s", p.Component, p.Number, p.Name) }

var (
	fileNameRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d{4})-([a-z0-9][a-z0-9.-]*)\.patch$`) })
	fieldRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*):\s?(.*)$`) })
	stepNameRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]*$`) })
	appliesRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([a-z0-9][a-z0-9_.-]*)\s*(.*)$`) })
	required    = []string{"Description", "Author", "Applies-To", "Evidence"}
	knownFields = map[string]bool{"Description": true, "Subject": true, "Author": true, "From": true, "Origin": true,
		"Forwarded": true, "Last-Update": true, "Applies-To": true, "Targets": true, "Evidence": true, "Needs-Path": true,
		"Steps": true, "Bug": true, "Reviewed-By": true, "Acked-By": true}
)

// Parse reads a patch file's header. The file's path decides its component
// (parent directory), number and name.
func Parse(path string, data []byte) (*Patch, error) {
	base := filepath.Base(path)
	m := fileNameRE().FindStringSubmatch(base)
	if m == nil {
		return nil, datafile.List{datafile.Errorf(datafile.Pos{File: path}, "patch file name %q must be NNNN-name.patch (four digits, lower-case name)", base)}
	}
	sum := sha256.Sum256(data)
	p := &Patch{Path: path, Component: filepath.Base(filepath.Dir(path)), Name: m[2], SHA256: hex.EncodeToString(sum[:]), Fields: map[string]datafile.Pos{}}
	fmt.Sscanf(m[1], "%d", &p.Number)
	ps := &headerParser{p: p, values: map[string]*strings.Builder{}}
	last := ps.readHeader(data)
	ps.fields(last)
	ps.appliesTo()
	ps.lists()
	ps.body()
	if len(ps.errs) > 0 {
		return nil, ps.errs
	}
	return p, nil
}

// headerParser reads one patch's DEP-3 header into its Patch.
type headerParser struct {
	p      *Patch
	values map[string]*strings.Builder
	errs   datafile.List
}

func (ps *headerParser) fail(line int, f string, a ...any) {
	ps.errs = append(ps.errs, datafile.Errorf(datafile.Pos{File: ps.p.Path, Line: line, Col: 1}, f, a...))
}

func (ps *headerParser) get(k string) string {
	if b, ok := ps.values[k]; ok {
		return b.String()
	}
	return ""
}

// readHeader reads the fields up to the diff (which becomes the Body) and
// returns the last line read.
func (ps *headerParser) readHeader(data []byte) int {
	p := ps.p
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	line, offset := 0, 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(text, "--- ") || strings.HasPrefix(text, "diff ") || strings.HasPrefix(text, "Index: ") {
			p.Body, p.BodyLine = data[offset:], line
			break
		}
		offset += len(sc.Bytes()) + 1
		switch {
		case text == "" || text == "---":
			cur = ""
		case (text[0] == ' ' || text[0] == '\t') && cur != "":
			ps.values[cur].WriteString("\n" + strings.TrimSpace(text))
		default:
			cur = ps.field(line, text)
		}
	}
	return line
}

// field reads a header line that starts a field, and returns the field
// its continuation lines extend ("" for none).
func (ps *headerParser) field(line int, text string) string {
	fm := fieldRE().FindStringSubmatch(text)
	if fm == nil {
		// DEP-3 allows free text after the fields; it is part of nothing.
		return ""
	}
	if !knownFields[fm[1]] {
		ps.fail(line, "unknown header field %q (known: Description, Author, Origin, Forwarded, Last-Update, Applies-To, Targets, Needs-Path, Steps, Evidence)", fm[1])
		return ""
	}
	if _, dup := ps.values[fm[1]]; dup {
		ps.fail(line, "header field %s appears twice", fm[1])
		return ""
	}
	ps.values[fm[1]] = &strings.Builder{}
	ps.values[fm[1]].WriteString(strings.TrimSpace(fm[2]))
	ps.p.Fields[fm[1]] = datafile.Pos{File: ps.p.Path, Line: line, Col: 1}
	return fm[1]
}

// fields sets the patch's plain fields and checks the required ones.
func (ps *headerParser) fields(last int) {
	p := ps.p
	p.Description = firstNonEmpty(ps.get("Description"), ps.get("Subject"))
	p.Author = firstNonEmpty(ps.get("Author"), ps.get("From"))
	p.Origin, p.Forwarded, p.LastUpdate, p.Evidence = ps.get("Origin"), ps.get("Forwarded"), ps.get("Last-Update"), ps.get("Evidence")
	p.AppliesTo = ps.get("Applies-To")
	for _, f := range required {
		alt := map[string]string{"Description": "Subject", "Author": "From"}[f]
		if ps.values[f] == nil && (alt == "" || ps.values[alt] == nil) {
			ps.fail(1, "header field %s is required", f)
		}
	}
	if p.Body == nil {
		ps.fail(last, "no diff found (a patch needs a line starting with \"--- \" after its header)")
	}
}

// appliesTo reads Applies-To: the patch's own component and a version
// constraint (none: any version).
func (ps *headerParser) appliesTo() {
	p := ps.p
	if p.AppliesTo == "" {
		return
	}
	am := appliesRE().FindStringSubmatch(p.AppliesTo)
	at := p.Fields["Applies-To"]
	switch {
	case am == nil:
		ps.fail(at.Line, "Applies-To %q must be \"<component> <version constraint>\", e.g. \"bitshuffle = 0.5.1\"", p.AppliesTo)
	case am[1] != p.Component:
		ps.fail(at.Line, "Applies-To names component %q but the patch lives under %s/; move it or fix the field", am[1], p.Component)
	default:
		c := strings.TrimSpace(am[2])
		if c == "" {
			c = ">= 0"
		}
		cs, err := version.NewConstraint(c)
		if err != nil {
			ps.fail(at.Line, "Applies-To: bad version constraint %q: %v", c, err)
		}
		p.constraint, p.AppliesTo = cs, c
	}
}

// lists reads the list fields: Targets, Needs-Path (paths inside the
// component's source) and Steps (step names).
func (ps *headerParser) lists() {
	p := ps.p
	split := func(k string) []string {
		return strings.FieldsFunc(ps.get(k), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' })
	}
	p.Targets = append(p.Targets, split("Targets")...)
	for _, np := range split("Needs-Path") {
		if c := filepath.Clean(np); filepath.IsAbs(np) || c == ".." || strings.HasPrefix(c, "../") {
			ps.fail(p.Fields["Needs-Path"].Line, "Needs-Path %q must be a path inside the component's source", np)
			continue
		}
		p.NeedsPath = append(p.NeedsPath, np)
	}
	for _, st := range split("Steps") {
		if !stepNameRE().MatchString(st) {
			ps.fail(p.Fields["Steps"].Line, "Steps %q is not a step name (the recipe's steps, e.g. be, fe, thirdparty)", st)
			continue
		}
		p.Steps = append(p.Steps, st)
	}
}

// body parses the diff and checks every file it changes is one a patch
// may change.
func (ps *headerParser) body() {
	p := ps.p
	if p.Body == nil {
		return
	}
	fds, err := ParseDiff(p.Path, p.Body, p.BodyLine)
	var l datafile.List
	switch {
	case errors.As(err, &l):
		ps.errs = append(ps.errs, l...)
	case err != nil: // not one ParseDiff makes today; never dropped
		ps.errs = append(ps.errs, datafile.Errorf(datafile.Pos{File: p.Path, Line: p.BodyLine, Col: 1}, "%v", err))
	default:
		for _, fd := range fds {
			if _, terr := fd.Target(1); terr != nil {
				ps.errs = append(ps.errs, datafile.Errorf(datafile.Pos{File: p.Path, Line: fd.Line, Col: 1}, "%v", terr))
			}
		}
		p.files = fds
	}
}

func firstNonEmpty(a ...string) string {
	for _, s := range a {
		if s != "" {
			return s
		}
	}
	return ""
}

// Series is every patch under a directory, in application order: by
// component, then number.
type Series struct {
	Dir     string
	Patches []*Patch
}

// LoadSeries reads dir/<component>/*.patch. A missing dir is an empty series.
func LoadSeries(dir string) (*Series, error) {
	s := &Series{Dir: dir}
	if dir == "" {
		return s, nil
	}
	if _, err := datafs.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	files, err := datafs.Glob(datafs.Join(dir, "*", "*.patch"))
	if err != nil {
		return nil, err
	}
	var errs datafile.List
	seen := map[string]string{}
	for _, f := range files {
		data, err := datafs.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p, err := Parse(f, data)
		if err != nil {
			var l datafile.List
			if errors.As(err, &l) {
				errs = append(errs, l...)
				continue
			}
			return nil, err
		}
		key := fmt.Sprintf("%s/%04d", p.Component, p.Number)
		if other, dup := seen[key]; dup {
			errs = append(errs, datafile.Errorf(datafile.Pos{File: f}, "patch number %04d is also used by %s; numbers order a component's series and must be unique", p.Number, other))
			continue
		}
		seen[key] = f
		s.Patches = append(s.Patches, p)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	sort.Slice(s.Patches, func(i, j int) bool {
		a, b := s.Patches[i], s.Patches[j]
		if a.Component != b.Component {
			return a.Component < b.Component
		}
		return a.Number < b.Number
	})
	return s, nil
}

// MatchesTarget reports whether the patch's Targets field selects the cell's
// target: a target name, "all", or a CPU feature condition ("!sve": the CPU
// lacks SVE; "+sve" or "sve": it has it — when the word is not a target name).
// Any matching term selects the patch; no Targets field selects every target.
func (p *Patch) MatchesTarget(m *matrix.Matrix, c matrix.Cell) bool {
	if len(p.Targets) == 0 {
		return true
	}
	has := map[string]bool{}
	for _, e := range c.Allowed {
		has[e] = true
	}
	for _, t := range p.Targets {
		switch {
		case t == "all" || t == c.Target.Name:
			return true
		case strings.HasPrefix(t, "!"):
			if _, ok := m.Extensions[t[1:]]; ok && !has[t[1:]] && c.ISA.Name == m.Extensions[t[1:]].ISA {
				return true
			}
		case strings.HasPrefix(t, "+"):
			if has[t[1:]] {
				return true
			}
		default:
			if _, isTarget := m.Targets[t]; !isTarget && has[t] {
				return true
			}
		}
	}
	return false
}

// MatchesVersion reports whether the patch applies to this version of its component.
func (p *Patch) MatchesVersion(v string) bool {
	if p.constraint == nil {
		return true
	}
	ver, err := version.NewVersion(v)
	if err != nil {
		return false
	}
	return p.constraint.Check(ver.Core()) || p.constraint.Check(ver)
}

// CheckTargets validates each patch's Targets terms against the matrix.
func (s *Series) CheckTargets(m *matrix.Matrix) error {
	var errs datafile.List
	for _, p := range s.Patches {
		for _, t := range p.Targets {
			name := strings.TrimLeft(t, "!+")
			_, isTarget := m.Targets[t]
			_, isExt := m.Extensions[name]
			if t != "all" && !isTarget && !isExt {
				errs = append(errs, datafile.Errorf(p.Fields["Targets"], "Targets: %q is neither a target in %s nor an extension (use a target name, all, !ext or +ext)", t, m.File))
			}
		}
	}
	return errs.Err()
}

// Select returns the patches for a cell given each component's version
// (component → version; the tree itself is component "doris"). Patches of
// components the tree does not have are skipped.
func (s *Series) Select(m *matrix.Matrix, c matrix.Cell, versions map[string]string) []*Patch {
	var out []*Patch
	for _, p := range s.Patches {
		v, ok := versions[p.Component]
		if !ok || !p.MatchesVersion(v) || !p.MatchesTarget(m, c) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Removes reports whether the patch takes the line text (compared with
// its leading and trailing space trimmed) out of the file rel (a path
// relative to the component's source, slash-separated).
func (p *Patch) Removes(rel, text string) bool {
	text = strings.TrimSpace(text)
	for _, fd := range p.files {
		name := strings.TrimPrefix(strings.TrimPrefix(fd.OldName, "a/"), "./")
		if name != rel {
			continue
		}
		for _, h := range fd.Hunks {
			for _, l := range h.Lines {
				if l.Op == '-' && strings.TrimSpace(l.Text) == text {
					return true
				}
			}
		}
	}
	return false
}
