package patch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/fsutil"
)

// Status is how a hunk applied.
type Status string

// Hunk statuses.
const (
	Clean   Status = "clean"   // where its header said, every context line matching
	Offset  Status = "offset"  // elsewhere in the file, every context line matching
	Fuzz    Status = "fuzz"    // with outer context lines ignored
	Failed  Status = "failed"  // nowhere
	Created Status = "created" // a new file
	Deleted Status = "deleted" // a removed file
)

// HunkResult reports one hunk.
type HunkResult struct {
	Patch  string `json:"patch"`
	File   string `json:"file"`
	Hunk   int    `json:"hunk"`       // 1-based within the file diff
	Line   int    `json:"patch_line"` // the @@ line in the patch file
	Status Status `json:"status"`
	Offset int    `json:"offset,omitempty"`
	Fuzz   int    `json:"fuzz,omitempty"`
	At     int    `json:"at,omitempty"` // 1-based file line it applied at
	Detail string `json:"detail,omitempty"`
}

func (h HunkResult) String() string {
	s := fmt.Sprintf("%s %s hunk #%d", h.Patch, h.File, h.Hunk)
	switch h.Status {
	case Offset:
		s += fmt.Sprintf(": offset %+d (at line %d)", h.Offset, h.At)
	case Fuzz:
		s += fmt.Sprintf(": fuzz %d, offset %+d (at line %d)", h.Fuzz, h.Offset, h.At)
	case Failed:
		s += ": FAILED"
	default:
		s += ": " + string(h.Status)
	}
	if h.Detail != "" {
		s += ": " + h.Detail
	}
	return s
}

// Result is the outcome of checking or applying patches.
type Result struct {
	Hunks   []HunkResult `json:"hunks"`
	Applied bool         `json:"applied"` // files were written
	Files   []string     `json:"files,omitempty"`
	// Skipped are the selected patches the tree lacks a Needs-Path of.
	Skipped []string `json:"skipped,omitempty"`
}

// OK reports whether every hunk applied.
func (r *Result) OK() bool {
	for _, h := range r.Hunks {
		if h.Status == Failed {
			return false
		}
	}
	return true
}

// Failed returns the hunks that did not apply.
func (r *Result) Failed() []HunkResult {
	var out []HunkResult
	for _, h := range r.Hunks {
		if h.Status == Failed {
			out = append(out, h)
		}
	}
	return out
}

// Options control applying.
type Options struct {
	Strip   int  // leading path components to strip (patch -p); our patches use 1
	DryRun  bool // check only; write nothing
	MaxFuzz int  // context lines that may be ignored at each end (GNU patch: 2)
}

// DefaultOptions are -p1 with GNU patch's fuzz limit.
func DefaultOptions() Options { return Options{Strip: 1, MaxFuzz: 2} }

// ErrUnsafe marks a patch that would write outside the tree or through a link.
var ErrUnsafe = errors.New("unsafe path")

type fileState struct {
	lines   []string
	eol     bool // the last line ends with a newline
	exists  bool
	mode    fs.FileMode
	orig    []byte // content before the series (nil when it did not exist)
	existed bool
	changed bool
}

// Apply checks every patch of a series against root and, unless DryRun, writes
// the result. It is all or nothing: if any hunk fails (or any write fails) no
// file is left changed. Patches apply in the order given, each seeing the
// previous ones' changes.
func Apply(root string, patches []*Patch, o Options) (*Result, error) {
	res, files, err := simulate(root, patches, o)
	if err != nil {
		return nil, err
	}
	if !res.OK() || o.DryRun {
		return res, nil
	}
	if err := writeAll(root, files, res); err != nil {
		return res, err
	}
	res.Applied = true
	return res, nil
}

// Change is one file's content before and after a series (nil: absent).
type Change struct {
	Path     string
	Old, New []byte
}

// Simulate applies patches in memory and returns the result and, when every
// hunk applied, each changed file's old and new content. Nothing is written.
func Simulate(root string, patches []*Patch, o Options) (*Result, []Change, error) {
	res, files, err := simulate(root, patches, o)
	if err != nil || !res.OK() {
		return res, nil, err
	}
	var out []Change
	for _, rel := range sortedChanged(files) {
		st := files[rel]
		c := Change{Path: rel, Old: st.orig}
		if st.existed && c.Old == nil {
			c.Old = []byte{}
		}
		if st.exists {
			c.New = fromLines(st.lines, st.eol)
			if c.New == nil {
				c.New = []byte{}
			}
		}
		out = append(out, c)
	}
	return res, out, nil
}

func sortedChanged(files map[string]*fileState) []string {
	var names []string
	for rel, st := range files {
		if st.changed {
			names = append(names, rel)
		}
	}
	sort.Strings(names)
	return names
}

func simulate(root string, patches []*Patch, o Options) (*Result, map[string]*fileState, error) {
	if o.MaxFuzz < 0 {
		o.MaxFuzz = 0
	}
	res := &Result{}
	files := map[string]*fileState{}
	load := func(rel string) (*fileState, error) {
		if st, ok := files[rel]; ok {
			return st, nil
		}
		full, err := safeJoin(root, rel)
		if err != nil {
			return nil, err
		}
		st := &fileState{mode: 0o644}
		info, err := os.Lstat(full)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		case !info.Mode().IsRegular():
			return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, rel)
		default:
			data, err := os.ReadFile(full)
			if err != nil {
				return nil, err
			}
			st.exists, st.existed, st.orig, st.mode = true, true, data, info.Mode().Perm()
			st.lines, st.eol = toLines(data)
		}
		files[rel] = st
		return st, nil
	}
	for _, p := range patches {
		fds, err := p.Files()
		if err != nil {
			return nil, nil, err
		}
		for _, fd := range fds {
			rel, err := fd.Target(o.Strip)
			if err != nil {
				return nil, nil, fmt.Errorf("%s:%d: %w: %w", p.Path, fd.Line, ErrUnsafe, err)
			}
			st, err := load(rel)
			if err != nil {
				return nil, nil, fmt.Errorf("%s:%d: %w", p.Path, fd.Line, err)
			}
			// Like GNU patch: when the new name does not exist, use the old one.
			if !st.exists && !fd.Create && fd.OldName != fd.NewName {
				if oldRel, oerr := fd.oldTarget(o.Strip); oerr == nil {
					if ost, lerr := load(oldRel); lerr == nil && ost.exists {
						rel, st = oldRel, ost
					}
				}
			}
			res.Hunks = append(res.Hunks, applyFile(p.ID(), rel, fd, st, o.MaxFuzz)...)
		}
	}
	return res, files, nil
}

// applyFile applies one file diff to the in-memory state.
func applyFile(id, rel string, fd *FileDiff, st *fileState, maxFuzz int) []HunkResult {
	var out []HunkResult
	base := HunkResult{Patch: id, File: rel}
	switch {
	case fd.Create:
		r := base
		r.Hunk, r.Line = 1, fd.Hunks[0].Line
		if st.exists {
			r.Status, r.Detail = Failed, "the patch creates this file but it already exists"
			return []HunkResult{r}
		}
		h := fd.Hunks[0]
		st.lines, st.eol, st.exists, st.changed = h.New(), !h.NewNoEOL, true, true
		r.Status, r.At = Created, 1
		return []HunkResult{r}
	case !st.exists:
		r := base
		r.Hunk, r.Line, r.Status = 1, fd.Hunks[0].Line, Failed
		r.Detail = "file not found in the source tree"
		return []HunkResult{r}
	case fd.Delete:
		r := base
		r.Hunk, r.Line = 1, fd.Hunks[0].Line
		if !sameLines(st.lines, fd.Hunks[0].Old()) {
			r.Status, r.Detail = Failed, "the patch deletes this file but its content differs from what the patch expects"
			return []HunkResult{r}
		}
		st.lines, st.exists, st.changed = nil, false, true
		r.Status = Deleted
		return []HunkResult{r}
	}
	delta, minPos := 0, 0
	for i, h := range fd.Hunks {
		r := base
		r.Hunk, r.Line = i+1, h.Line
		old := h.Old()
		expected := h.OldStart - 1 + delta
		if h.OldLines == 0 {
			expected = h.OldStart + delta // insertion after line OldStart
		}
		if expected < minPos {
			expected = minPos
		}
		pos, fuzz := -1, 0
		lead, trail := h.context()
		for f := 0; f <= maxFuzz && pos < 0; f++ {
			if f > 0 && f > lead && f > trail {
				break // nothing more to ignore
			}
			pos = search(st.lines, old, expected, minPos, min(f, lead), min(f, trail))
			fuzz = f
		}
		if pos < 0 {
			r.Status, r.Detail = Failed, explainMismatch(st.lines, old, expected, minPos)
			out = append(out, r)
			continue
		}
		r.At, r.Offset, r.Fuzz = pos+1, pos-expected, fuzz
		switch {
		case fuzz > 0:
			r.Status = Fuzz
		case r.Offset != 0:
			r.Status = Offset
		default:
			r.Status = Clean
		}
		repl := replacement(st.lines[pos:pos+len(old)], h)
		atEOF := pos+len(old) == len(st.lines)
		lines := make([]string, 0, len(st.lines)-len(old)+len(repl))
		lines = append(lines, st.lines[:pos]...)
		lines = append(lines, repl...)
		lines = append(lines, st.lines[pos+len(old):]...)
		st.lines, st.changed = lines, true
		if atEOF {
			switch {
			case h.NewNoEOL:
				st.eol = false
			case h.OldNoEOL:
				st.eol = true
			}
		}
		delta += len(repl) - len(old)
		delta += r.Offset
		minPos = pos + len(repl)
		out = append(out, r)
	}
	return out
}

// replacement builds the new lines for a matched region: context lines keep
// the file's own text (they may differ in ignored fuzz lines or line endings),
// added lines take the file's line ending.
func replacement(region []string, h *Hunk) []string {
	crlf := false
	for _, l := range region {
		if strings.HasSuffix(l, "\r") {
			crlf = true
			break
		}
	}
	var out []string
	oi := 0
	for _, l := range h.Lines {
		switch l.Op {
		case ' ':
			out = append(out, region[oi])
			oi++
		case '-':
			oi++
		case '+':
			t := l.Text
			if crlf && !strings.HasSuffix(t, "\r") {
				t += "\r"
			} else if !crlf && strings.HasSuffix(t, "\r") {
				t = strings.TrimSuffix(t, "\r")
			}
			out = append(out, t)
		}
	}
	return out
}

func lineEq(a, b string) bool {
	return a == b || strings.TrimSuffix(a, "\r") == strings.TrimSuffix(b, "\r")
}

func matchAt(file, old []string, pos, lead, trail int) bool {
	if pos < 0 || pos+len(old) > len(file) {
		return false
	}
	for i := lead; i < len(old)-trail; i++ {
		if !lineEq(file[pos+i], old[i]) {
			return false
		}
	}
	return true
}

// search looks for old in file nearest to expected first, never before minPos.
func search(file, old []string, expected, minPos, lead, trail int) int {
	maxPos := len(file) - len(old)
	if expected > maxPos {
		expected = maxPos
	}
	for d := 0; ; d++ {
		lo, hi := expected-d, expected+d
		if lo < minPos && hi > maxPos {
			return -1
		}
		if hi <= maxPos && hi >= minPos && matchAt(file, old, hi, lead, trail) {
			return hi
		}
		if d > 0 && lo >= minPos && lo <= maxPos && matchAt(file, old, lo, lead, trail) {
			return lo
		}
	}
}

// explainMismatch names the first hunk line that does not match where the
// hunk should be, and the position where most of its lines do.
func explainMismatch(file, old []string, expected, minPos int) string {
	var b strings.Builder
	if expected >= 0 && expected < len(file) {
		for i, want := range old {
			if expected+i >= len(file) {
				fmt.Fprintf(&b, "expected %q at line %d, but the file ends at line %d", want, expected+i+1, len(file))
				break
			}
			if got := file[expected+i]; !lineEq(got, want) {
				fmt.Fprintf(&b, "expected %q at line %d, found %q", strings.TrimSuffix(want, "\r"), expected+i+1, strings.TrimSuffix(got, "\r"))
				break
			}
		}
	} else {
		fmt.Fprintf(&b, "the hunk starts at line %d, past the end of the file (%d lines)", expected+1, len(file))
	}
	best, bestN := -1, 0
	for pos := minPos; pos+len(old) <= len(file); pos++ {
		n := 0
		for i := range old {
			if lineEq(file[pos+i], old[i]) {
				n++
			}
		}
		if n > bestN {
			best, bestN = pos, n
		}
	}
	if best >= 0 {
		fmt.Fprintf(&b, "; closest candidate: line %d, where %d of %d lines match", best+1, bestN, len(old))
		for i, want := range old {
			if !lineEq(file[best+i], want) {
				fmt.Fprintf(&b, " (line %d is %q, the patch expects %q)", best+i+1, strings.TrimSuffix(file[best+i], "\r"), strings.TrimSuffix(want, "\r"))
				break
			}
		}
	} else {
		b.WriteString("; no line of the hunk occurs in the file")
	}
	return b.String()
}

func sameLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !lineEq(a[i], b[i]) {
			return false
		}
	}
	return true
}

func toLines(data []byte) ([]string, bool) {
	if len(data) == 0 {
		return nil, true
	}
	s := string(data)
	eol := strings.HasSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n"), eol
}

func fromLines(lines []string, eol bool) []byte {
	if len(lines) == 0 {
		return nil
	}
	s := strings.Join(lines, "\n")
	if eol {
		s += "\n"
	}
	return []byte(s)
}

// safeJoin resolves rel under root and refuses paths that leave root or pass
// through a symbolic link.
func safeJoin(root, rel string) (string, error) {
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%w: %s leaves the source tree", ErrUnsafe, rel)
	}
	cur := root
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		cur = filepath.Join(cur, p)
		info, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%w: %s passes through the symbolic link %s", ErrUnsafe, rel, strings.Join(parts[:i+1], "/"))
		}
	}
	return filepath.Join(root, filepath.FromSlash(rel)), nil
}

// writeAll writes every changed file; on any failure it restores what it wrote.
func writeAll(root string, files map[string]*fileState, res *Result) error {
	names := sortedChanged(files)
	var done []string
	var madeDirs []string
	// rollback restores what was written and returns the files it could not
	// restore (an empty directory left behind does not count).
	rollback := func() []string {
		var failed []string
		for i := len(done) - 1; i >= 0; i-- {
			st := files[done[i]]
			full := filepath.Join(root, filepath.FromSlash(done[i]))
			var err error
			if st.existed {
				err = fsutil.WriteFileAtomic(full, st.orig, st.mode)
			} else if err = os.Remove(full); errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s (%v)", done[i], err))
			}
		}
		for i := len(madeDirs) - 1; i >= 0; i-- {
			os.Remove(madeDirs[i]) // only empty ones go; a left-over directory is harmless
		}
		return failed
	}
	for _, rel := range names {
		st := files[rel]
		full := filepath.Join(root, filepath.FromSlash(rel))
		var err error
		if !st.exists {
			err = os.Remove(full)
		} else {
			for d := filepath.Dir(full); d != root && len(d) > len(root); d = filepath.Dir(d) {
				if _, statErr := os.Stat(d); errors.Is(statErr, fs.ErrNotExist) {
					madeDirs = append([]string{d}, madeDirs...)
				}
			}
			if err = os.MkdirAll(filepath.Dir(full), 0o755); err == nil {
				err = fsutil.WriteFileAtomic(full, fromLines(st.lines, st.eol), st.mode)
			}
		}
		if err != nil {
			if failed := rollback(); len(failed) > 0 {
				return fmt.Errorf("writing %s: %w; restoring what was already written failed too, so the tree is half-patched: %s (check it out or unpack it again)", rel, err, strings.Join(failed, ", "))
			}
			return fmt.Errorf("writing %s: %w (every file of the series was restored)", rel, err)
		}
		done = append(done, rel)
	}
	res.Files = names
	return nil
}
