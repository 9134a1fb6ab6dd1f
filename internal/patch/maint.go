package patch

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/fsutil"
)

// Header is what a new patch says about itself.
type Header struct {
	Description string
	Author      string
	Origin      string
	Forwarded   string
	AppliesTo   string // "<component> <constraint>"
	Targets     string
	Evidence    string
	LastUpdate  time.Time
}

func (h Header) render() string {
	field := func(k, v, placeholder string) string {
		if v == "" {
			v = placeholder
		}
		lines := strings.Split(strings.TrimSpace(v), "\n")
		return k + ": " + strings.Join(lines, "\n ") + "\n"
	}
	var b strings.Builder
	b.WriteString(field("Description", h.Description, "TODO one line saying what this changes\nTODO why, in a few lines"))
	b.WriteString(field("Author", h.Author, "TODO name <email>"))
	b.WriteString(field("Origin", h.Origin, "vendor, dorisarm"))
	b.WriteString(field("Forwarded", h.Forwarded, "no"))
	b.WriteString(field("Last-Update", h.LastUpdate.Format("2006-01-02"), ""))
	b.WriteString(field("Applies-To", h.AppliesTo, ""))
	if h.Targets != "" {
		b.WriteString(field("Targets", h.Targets, ""))
	}
	b.WriteString(field("Evidence", h.Evidence, "TODO the measurement or bug behind this patch"))
	b.WriteString("\n")
	return b.String()
}

// DiffFiles writes unified diffs (a/ b/ prefixes) for a set of changes.
func DiffFiles(changes []Change) string {
	var b strings.Builder
	for _, c := range changes {
		b.WriteString(Unified(c.Path, c.Path, c.Old, c.New, 3))
	}
	return b.String()
}

// ChangesFromGit lists what differs in a git checkout from its HEAD commit:
// modified, added (including untracked, not ignored) and deleted files.
func ChangesFromGit(dir string) ([]Change, error) {
	out, err := exec.Command("git", "-C", dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", ".").Output()
	if err != nil {
		return nil, fmt.Errorf("git status in %s: %w", dir, err)
	}
	prefix, err := exec.Command("git", "-C", dir, "rev-parse", "--show-prefix").Output()
	if err != nil {
		return nil, fmt.Errorf("git rev-parse in %s: %w", dir, err)
	}
	pre := strings.TrimSpace(string(prefix))
	var changes []Change
	for _, rec := range strings.Split(string(out), "\x00") {
		if len(rec) < 4 {
			continue
		}
		repoPath := rec[3:]
		rel := strings.TrimPrefix(repoPath, pre)
		c := Change{Path: rel}
		if old, err := exec.Command("git", "-C", dir, "show", "HEAD:./"+rel).Output(); err == nil {
			c.Old = old
		}
		if data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel))); err == nil {
			c.New = data
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if bytes.IndexByte(c.Old, 0) >= 0 || bytes.IndexByte(c.New, 0) >= 0 {
			return nil, fmt.Errorf("%s is binary; patches carry text only", rel)
		}
		if c.Old == nil && c.New == nil {
			continue
		}
		changes = append(changes, c)
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	return changes, nil
}

// IsGit reports whether dir is a git checkout of its source: inside a git
// work tree and with files of its own tracked. An archive unpacked inside a
// checkout is not: Doris's thirdparty/src/<pkg>/ sits in the Doris checkout,
// ignored by it, and its pristine copy is the archive beside it.
func IsGit(dir string) bool {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--is-inside-work-tree").Output()
	if err != nil || strings.TrimSpace(string(out)) != "true" {
		return false
	}
	out, err = exec.Command("git", "-C", dir, "ls-files", "-z", "--", ".").Output()
	return err == nil && len(out) > 0
}

// DefaultIgnore are build products a source tree picks up while being worked
// on: objects and libraries, build directories (doris_build is where Doris's
// build-thirdparty.sh builds each package) and download-thirdparty.sh's
// patched_mark. A pattern ending in "/" matches directories only, so
// build-*/ leaves out build-aarch64/ but not Doris's build-thirdparty.sh.
var DefaultIgnore = []string{"*.o", "*.a", "*.so", "*.so.*", "build/", "build-*/", "doris_build/", "patched_mark*", ".dorisarm*"}

// ignored reports whether a pattern matches a component of rel: a pattern
// ending in "/" one of its directories, any other any component.
func ignored(rel string, patterns []string) bool {
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		dir := i < len(parts)-1
		for _, p := range patterns {
			p, dirOnly := strings.CutSuffix(p, "/")
			if dirOnly && !dir {
				continue
			}
			if ok, _ := path.Match(p, part); ok {
				return true
			}
		}
	}
	return false
}

// ChangesFromPristine compares an edited tree with its pristine copy (a
// directory, or a .tar.gz/.tgz archive whose single top directory holds it).
// As with .gitignore, the ignore patterns leave out only files the pristine
// copy lacks: an edit to, or the removal of, one of its own files is always
// in the diff (lz4 ships a build/ directory; Doris a build-thirdparty.sh).
func ChangesFromPristine(dir, pristine string, ignore []string) ([]Change, error) {
	old, err := readPristine(pristine)
	if err != nil {
		return nil, err
	}
	cur, err := readTree(dir)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for n := range old {
		names[n] = true
	}
	for n := range cur {
		names[n] = true
	}
	var changes []Change
	for n := range names {
		o, okO := old[n]
		c, okC := cur[n]
		if !okO && ignored(n, ignore) {
			continue
		}
		if okO && okC && bytes.Equal(o, c) {
			continue
		}
		ch := Change{Path: n}
		if okO {
			ch.Old = o
		}
		if okC {
			ch.New = c
		}
		if bytes.IndexByte(ch.Old, 0) >= 0 || bytes.IndexByte(ch.New, 0) >= 0 {
			if okO {
				return nil, fmt.Errorf("%s is binary and differs from the pristine copy; patches carry text only (restore it)", n)
			}
			return nil, fmt.Errorf("%s is binary; patches carry text only (add it to --ignore if it is a build product)", n)
		}
		changes = append(changes, ch)
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	return changes, nil
}

func readTree(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.EqualFold(d.Name(), ".git") && p != dir {
			// A checkout's repository (or a submodule's .git file) is
			// not source, and patches may not touch it.
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = data
		return nil
	})
	return out, err
}

// maxPristine bounds what an archive may expand to.
const maxPristine = 2 << 30

// typeGNUVolume is GNU tar's volume label ('V'): its name is a label, not a path.
const typeGNUVolume = 'V'

// isMetadata reports whether a tar header describes the archive rather than
// an entry in it. git archive (and so every GitHub tag archive) starts with a
// PAX global header, a 'g' entry named pax_global_header whose records hold
// the commit id; Go's archive/tar returns it from Next like an entry.
func isMetadata(h *tar.Header) bool {
	return h.Typeflag == tar.TypeXGlobalHeader || h.Typeflag == typeGNUVolume
}

// isRegular reports whether a tar entry carries a regular file's content:
// besides '0' (archive/tar maps the pre-POSIX '\x00' to it, or to a
// directory when the name ends in a slash), contiguous files ('7', a
// regular file to every tar but the one that wrote it) and GNU sparse files
// (archive/tar expands their holes).
func isRegular(h *tar.Header) bool {
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeCont, tar.TypeGNUSparse:
		return true
	}
	return false
}

// entryPath cleans an archive entry's name. It is "." for the archive's
// root ("./") and an error for a name that is absolute or climbs out.
func entryPath(name string) (string, error) {
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("entry %q names a path outside the archive", name)
	}
	return clean, nil
}

func readPristine(p string) (map[string][]byte, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("pristine source: %w", err)
	}
	if st.IsDir() {
		return readTree(p)
	}
	if !strings.HasSuffix(p, ".tar.gz") && !strings.HasSuffix(p, ".tgz") {
		return nil, fmt.Errorf("pristine source %s: want a directory or a .tar.gz archive", p)
	}
	f, _, err := fsutil.OpenRegular(p) // a named pipe must not block
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	top := ""
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if isMetadata(h) {
			continue
		}
		name, err := entryPath(h.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if name == "." {
			continue
		}
		first, rest, _ := strings.Cut(name, "/")
		if top == "" {
			top = first
		}
		if first != top {
			return nil, fmt.Errorf("%s: entries outside the single top directory %s/ (found %s)", p, top, h.Name)
		}
		if rest == "" {
			continue
		}
		switch {
		case isRegular(h):
			if h.Size < 0 {
				return nil, fmt.Errorf("%s: %s: negative size", p, h.Name)
			}
			total += h.Size
			if total > maxPristine {
				return nil, fmt.Errorf("%s: expands to more than %d bytes", p, int64(maxPristine))
			}
			data, err := io.ReadAll(io.LimitReader(tr, h.Size))
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", p, h.Name, err)
			}
			out[rest] = data
		case h.Typeflag == tar.TypeLink:
			// A hard link unpacks to a regular file with its target's
			// content; the target is an earlier entry of the same tree.
			target, err := entryPath(h.Linkname)
			if err != nil {
				return nil, fmt.Errorf("%s: hard link %s: %w", p, h.Name, err)
			}
			tfirst, trest, _ := strings.Cut(target, "/")
			if tfirst != top || trest == "" {
				return nil, fmt.Errorf("%s: hard link %s points outside the top directory %s/ (to %s)", p, h.Name, top, h.Linkname)
			}
			data, ok := out[trest]
			if !ok {
				return nil, fmt.Errorf("%s: hard link %s points to %s, not an earlier regular file", p, h.Name, h.Linkname)
			}
			out[rest] = data
		}
	}
	if top == "" {
		return nil, fmt.Errorf("%s: no entries", p)
	}
	return out, nil
}

// FindPristineArchive looks beside an unpacked source dir (Doris keeps
// thirdparty/src/<name>.tar.gz next to thirdparty/src/<name>/) for an archive
// whose top directory is the dir's name.
func FindPristineArchive(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	base := filepath.Base(abs)
	cands, _ := filepath.Glob(filepath.Join(filepath.Dir(abs), "*.tar.gz"))
	more, _ := filepath.Glob(filepath.Join(filepath.Dir(abs), "*.tgz"))
	for _, c := range append(cands, more...) {
		if topDir(c) == base {
			return c, nil
		}
	}
	return "", fmt.Errorf("%s is not a git checkout and no archive beside it unpacks to %s/; pass --pristine DIR|ARCHIVE", dir, base)
}

// topDir returns the top directory of a .tar.gz archive's first entry
// (metadata such as git's pax_global_header is not an entry), or "".
func topDir(archive string) string {
	f, _, err := fsutil.OpenRegular(archive)
	if err != nil {
		return ""
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return ""
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			return ""
		}
		if isMetadata(h) {
			continue
		}
		name, err := entryPath(h.Name)
		if err != nil {
			return ""
		}
		if name == "." {
			continue
		}
		first, _, _ := strings.Cut(name, "/")
		return first
	}
}

// NextNumber returns the next free patch number of a component's series.
func (s *Series) NextNumber(component string) int {
	n := 0
	for _, p := range s.Patches {
		if p.Component == component && p.Number > n {
			n = p.Number
		}
	}
	return n + 1
}

// Compose writes a patch file's text from a header and changes.
func Compose(h Header, changes []Change) ([]byte, error) {
	body := DiffFiles(changes)
	if body == "" {
		return nil, errors.New("no changes: the source tree equals its pristine copy")
	}
	return []byte(h.render() + body), nil
}

// Find returns the series' patch named by its ID (component/NNNN-name),
// file name or short name.
func (s *Series) Find(name string) (*Patch, error) {
	var hits []*Patch
	for _, p := range s.Patches {
		if p.ID() == name || p.Name == name || filepath.Base(p.Path) == name || strings.TrimSuffix(filepath.Base(p.Path), ".patch") == name {
			hits = append(hits, p)
		}
	}
	switch len(hits) {
	case 0:
		return nil, fmt.Errorf("no patch %q in %s", name, s.Dir)
	case 1:
		return hits[0], nil
	}
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.ID())
	}
	return nil, fmt.Errorf("patch name %q is ambiguous: %s", name, strings.Join(ids, ", "))
}

// Refresh re-anchors a patch on root: it applies it (with offset and fuzz),
// then rewrites its diff with fresh context and line numbers, keeping the
// header. changed is false when the patch already applied cleanly.
func Refresh(p *Patch, root string, o Options) (text []byte, res *Result, changed bool, err error) {
	res, changes, err := Simulate(root, []*Patch{p}, o)
	if err != nil {
		return nil, nil, false, err
	}
	if !res.OK() {
		return nil, res, false, nil
	}
	clean := true
	for _, h := range res.Hunks {
		if h.Status == Offset || h.Status == Fuzz {
			clean = false
		}
	}
	if clean {
		return nil, res, false, nil
	}
	raw, err := datafs.ReadFile(p.Path)
	if err != nil {
		return nil, nil, false, err
	}
	header := raw[:len(raw)-len(p.Body)]
	return append(append([]byte{}, header...), DiffFiles(changes)...), res, true, nil
}
