package unpack

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/dorisarm/dorisarm/internal/linkres"
)

var (
	// ErrLimit: the input is larger than the Tree's limits.
	ErrLimit = errors.New("archive exceeds the limits")
	// ErrUnsafePath: an entry names a path outside the tree, or (Confine)
	// a link that leads out of it or an entry written through a link.
	ErrUnsafePath = errors.New("archive entry escapes the tree")
)

// LinkPolicy says what links in the archives may do.
type LinkPolicy int

const (
	// Confine is for source archives and cached build trees: a symlink is
	// written as it is, but only if it resolves inside the tree as the
	// kernel resolves it, through the links already there (and, when the
	// Tree is closed, through the links the archive made later); no entry
	// is written through a link; devices and FIFOs are refused.
	Confine LinkPolicy = iota
	// Rebase is for the layers of a root filesystem (image layers, Debian
	// packages): the tree is the root. Paths resolve with chroot semantics
	// (an absolute link starts at the tree, ".." stops there), so writes
	// follow links and stay inside; a link that is absolute or climbs out
	// is rewritten to the relative path of the same place inside the tree;
	// devices and FIFOs are dropped.
	Rebase
)

// Options say how a Tree writes archives.
type Options struct {
	Links LinkPolicy
	// Keep, when not nil, selects the paths written (a path and what lies
	// below it); the rest of the archive is read and dropped.
	Keep func(path string) bool
	// Whiteouts applies .wh.NAME and .wh..wh..opq (OCI layers).
	Whiteouts bool
	// Times gives files and directories their members' modification times
	// (clamped to the present), as tar does: autotools packages ship
	// generated files that make must find newer than their sources.
	// Otherwise the time of writing stands.
	Times bool
	// ExactModes keeps the mode bits as recorded (0o7777, set-id bits
	// too); otherwise the permission bits. Files are at least 0o600 unless
	// exact, directories always at least 0o700.
	ExactModes bool
	MaxBytes   int64 // uncompressed bytes read, over all archives
	MaxEntries int64 // entries, over all archives
}

// Tree writes archive members into one directory, every operation through
// an os.Root on it: it is the only code in dorisarm that writes archive
// members to disk (source archives, sysroot layers and packages, and the
// step cache's entries all come through here).
type Tree struct {
	root *os.Root
	opt  Options
	now  time.Time

	read    int64
	entries int64
	tops    map[string]bool
	links   []string        // Confine: the links made, checked again at Close
	written map[string]bool // paths written by the current archive, and their parents
	dirs    map[string]bool // resolved paths known to be directories
	times   []dirTime       // set at Close: writing a directory's members changes its time
	pdir    string          // the directory proot is open on
	proot   *os.Root
}

type dirTime struct {
	path  string
	mtime time.Time
}

// New returns a Tree that writes into root. The caller keeps root open
// until Close.
func New(root *os.Root, opt Options) *Tree {
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = DefaultLimits.Bytes
	}
	if opt.MaxEntries <= 0 {
		opt.MaxEntries = int64(DefaultLimits.Entries)
	}
	return &Tree{root: root, opt: opt, now: time.Now(), tops: map[string]bool{}, dirs: map[string]bool{}}
}

// Tops are the top-level names the archives wrote.
func (t *Tree) Tops() []string {
	var out []string
	for n := range t.tops {
		out = append(out, n)
	}
	return out
}

// Close finishes the tree: under Confine it checks every link made against
// the finished tree (a later member can turn a directory an earlier link
// goes through into a link), then it sets the directories' times.
func (t *Tree) Close() error {
	t.closeParent()
	if t.opt.Links == Confine {
		if err := linkres.CheckAll(t.root, t.links); err != nil {
			return fmt.Errorf("%w: %v", ErrUnsafePath, err)
		}
	}
	for i := len(t.times) - 1; i >= 0; i-- {
		if err := t.setTime(t.times[i].path, t.times[i].mtime); err != nil {
			return err
		}
	}
	return nil
}

type countingReader struct {
	r io.Reader
	t *Tree
}

// Read stops at the limit: what lies beyond it is never handed on.
func (c *countingReader) Read(p []byte) (int, error) {
	left := c.t.opt.MaxBytes - c.t.read
	if left <= 0 {
		return 0, fmt.Errorf("%w: more than %d uncompressed bytes", ErrLimit, c.t.opt.MaxBytes)
	}
	if int64(len(p)) > left+1 {
		p = p[:left+1] // one byte over tells a stream that ends at the limit from one that goes on
	}
	n, err := c.r.Read(p)
	c.t.read += int64(n)
	if c.t.read > c.t.opt.MaxBytes {
		return int(left), fmt.Errorf("%w: more than %d uncompressed bytes", ErrLimit, c.t.opt.MaxBytes)
	}
	return n, err
}

// member is one archive entry, from a tar or a zip.
type member struct {
	name, linkname string
	typ            byte // tar.TypeDir, TypeReg, TypeSymlink, TypeLink; 0: another kind
	kind           string
	mode           fs.FileMode
	size           int64
	mtime          time.Time
	body           io.Reader
}

// Apply writes one tar stream (an archive, a layer); label names it in
// errors. It reads the stream to its end, so a verifying reader (a gzip
// stream, a registry blob) checks its digest.
func (t *Tree) Apply(ctx context.Context, r io.Reader, label string) error {
	cr := &countingReader{r: r, t: t}
	tr := tar.NewReader(cr)
	t.written = map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader || h.Typeflag == 'V' {
			// git archive's pax_global_header (the commit id), a
			// volume label: metadata, no path.
			continue
		}
		m := member{name: h.Name, linkname: h.Linkname, mode: fs.FileMode(h.Mode & 0o7777), size: h.Size, mtime: h.ModTime, body: tr}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
			m.typ = h.Typeflag
		case tar.TypeReg, tar.TypeCont, tar.TypeGNUSparse:
			m.typ = tar.TypeReg
		default:
			m.kind = fmt.Sprintf("type %q", h.Typeflag)
		}
		if err := t.member(m); err != nil {
			return fmt.Errorf("%s: %s: %w", label, h.Name, err)
		}
	}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	return nil
}

func (t *Tree) count() error {
	t.entries++
	if t.entries > t.opt.MaxEntries {
		return fmt.Errorf("%w: more than %d archive entries", ErrLimit, t.opt.MaxEntries)
	}
	return nil
}

// cleanName turns an archive name into a clean path relative to the tree
// ("" for the tree itself).
func cleanName(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: NUL in name", ErrUnsafePath)
	}
	n := strings.TrimLeft(name, "/")
	if n == "" {
		return "", nil
	}
	c := path.Clean(n)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %q names a path outside the tree", ErrUnsafePath, name)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

func join(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

func (t *Tree) kept(p string) bool { return t.opt.Keep == nil || t.opt.Keep(p) }

func (t *Tree) member(m member) error {
	if err := t.count(); err != nil {
		return err
	}
	rdir, base, ok, err := t.place(m)
	if err != nil || !ok {
		return err
	}
	real := join(rdir, base)
	old, ok, err := t.checkLink(m, real)
	if err != nil || !ok {
		return err
	}
	if err := t.mkdirAll(rdir); err != nil {
		return err
	}
	pr, err := t.parent(rdir)
	if err != nil {
		return err
	}
	exists, err := t.clear(pr, base, real, m.typ == tar.TypeDir)
	if err != nil {
		return err
	}
	if err := t.write(pr, rdir, base, real, old, exists, m); err != nil {
		return err
	}
	t.markWritten(real)
	return nil
}

// place is where in the tree member m goes (its real parent directory,
// links in the path resolved, and its base name); ok is false for a
// member not kept (Options.Keep), a device or FIFO outside Confine, or a
// whiteout (applied here).
func (t *Tree) place(m member) (rdir, base string, ok bool, err error) {
	if t.opt.Links == Confine && path.IsAbs(m.name) {
		return "", "", false, fmt.Errorf("%w: an absolute name is a path outside the tree", ErrUnsafePath)
	}
	p, err := cleanName(m.name)
	if err != nil || p == "" {
		return "", "", false, err
	}
	pdir, base := path.Dir(p), path.Base(p)
	if t.opt.Whiteouts && strings.HasPrefix(base, ".wh.") {
		return "", "", false, t.whiteout(pdir, base)
	}
	if m.typ == 0 {
		if t.opt.Links == Confine {
			return "", "", false, fmt.Errorf("%s is not a file, directory or link", m.kind)
		}
		return "", "", false, nil // devices, FIFOs in a layer: nothing a compiler reads
	}
	if !t.kept(p) {
		return "", "", false, nil
	}
	if rdir, err = t.parentOf(pdir); err != nil {
		return "", "", false, err
	}
	real := join(rdir, base)
	if !t.kept(real) {
		return "", "", false, nil
	}
	top, _, _ := strings.Cut(real, "/")
	t.tops[top] = true
	return rdir, base, true, nil
}

// checkLink checks a link member: a hard link's target (old, in the
// tree; ok is false when there is nothing to link), a symlink's target
// (inside the tree under Confine).
func (t *Tree) checkLink(m member, real string) (old string, ok bool, err error) {
	switch m.typ {
	case tar.TypeLink:
		if old, err = t.hardlinkTarget(m.linkname, real); err != nil || old == "" {
			return "", false, err
		}
	case tar.TypeSymlink:
		if m.linkname == "" || strings.ContainsRune(m.linkname, 0) {
			return "", false, fmt.Errorf("symlink with an empty or invalid target")
		}
		if t.opt.Links == Confine {
			if err := linkres.Check(t.root, real, m.linkname); err != nil {
				return "", false, fmt.Errorf("%w: %v", ErrUnsafePath, err)
			}
		}
	}
	return old, true, nil
}

// clear removes what is at base in pr for a new member (a directory with
// everything in it), except that a directory over a directory merges:
// exists says one is kept.
func (t *Tree) clear(pr *os.Root, base, real string, dir bool) (exists bool, err error) {
	fi, err := pr.Lstat(base)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch {
	case fi.IsDir() && dir:
		return true, nil
	case fi.IsDir():
		if err := pr.RemoveAll(base); err != nil {
			return false, err
		}
		t.removedDir(real)
	default:
		if err := pr.Remove(base); err != nil {
			return false, err
		}
	}
	return false, nil
}

// write makes member m at base in pr (real in the tree).
func (t *Tree) write(pr *os.Root, rdir, base, real, old string, exists bool, m member) error {
	switch m.typ {
	case tar.TypeDir:
		if !exists {
			if err := pr.Mkdir(base, 0o700); err != nil {
				return err
			}
		}
		mode := m.mode.Perm() | 0o700
		if t.opt.ExactModes {
			mode = m.mode&0o7777 | 0o700
		}
		if err := pr.Chmod(base, mode); err != nil {
			return err
		}
		t.dirs[real] = true
		if t.opt.Times && !m.mtime.IsZero() {
			t.times = append(t.times, dirTime{real, m.mtime})
		}
	case tar.TypeReg:
		return t.file(pr, base, real, m)
	case tar.TypeSymlink:
		target := m.linkname
		if t.opt.Links == Rebase {
			target = rewriteLink(rdir, target)
		} else {
			t.links = append(t.links, real)
		}
		return pr.Symlink(target, base)
	case tar.TypeLink:
		return t.root.Link(old, real)
	}
	return nil
}

func (t *Tree) file(pr *os.Root, base, real string, m member) error {
	if m.size < 0 {
		return fmt.Errorf("negative size")
	}
	mode := m.mode.Perm() | 0o600
	if t.opt.ExactModes {
		mode = m.mode & 0o7777
	}
	f, err := pr.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(m.body, m.size))
	if err == nil && n != m.size {
		err = fmt.Errorf("%d bytes, header says %d", n, m.size)
	}
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && t.opt.Times {
		err = t.setTime(real, m.mtime)
	}
	return err
}

// hardlinkTarget resolves a hard link's target; "" with no error when the
// link is to be dropped (its target was not kept, or it is the entry itself).
func (t *Tree) hardlinkTarget(linkname, real string) (string, error) {
	if t.opt.Links == Confine && path.IsAbs(linkname) {
		return "", fmt.Errorf("%w: hard link to the absolute %s", ErrUnsafePath, linkname)
	}
	lp, err := cleanName(linkname)
	if err != nil {
		return "", fmt.Errorf("hard link target: %w", err)
	}
	if lp == "" {
		return "", fmt.Errorf("hard link to the root")
	}
	ldir, err := t.parentOf(path.Dir(lp))
	if err != nil {
		return "", err
	}
	old := join(ldir, path.Base(lp))
	if old == real {
		t.markWritten(real)
		return "", nil
	}
	fi, err := t.root.Lstat(old)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		if !t.kept(old) {
			return "", nil // its target was not kept: nor is the link
		}
		return "", fmt.Errorf("hard link to %s, which the archive did not unpack before", linkname)
	}
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("hard link to %s, which is not a regular file", linkname)
	}
	return old, nil
}

// parentOf returns the directory an entry in dir is written to: under
// Rebase, dir resolved with chroot semantics; under Confine, dir itself,
// which must not pass through a link.
func (t *Tree) parentOf(dir string) (string, error) {
	if t.opt.Links == Rebase {
		return Resolve(t.root, dir, t.dirs)
	}
	if dir == "." || t.dirs[dir] {
		return dir, nil
	}
	cur := ""
	for _, e := range strings.Split(dir, "/") {
		cur = join(cur, e)
		if t.dirs[cur] {
			continue
		}
		fi, err := t.root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			break // made by mkdirAll
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%w: it would be written through the link %s", ErrUnsafePath, cur)
		}
	}
	return dir, nil
}

// setTime gives p (relative to the tree) mtime, clamped to the present; a
// member without one keeps the time of writing.
func (t *Tree) setTime(p string, mtime time.Time) error {
	if mtime.IsZero() {
		return nil
	}
	if mtime.After(t.now) {
		mtime = t.now
	}
	return t.root.Chtimes(p, mtime, mtime)
}

// parent returns a handle on the directory rdir (resolved: no symlinks),
// reusing the last one: archives list a directory's files together.
func (t *Tree) parent(rdir string) (*os.Root, error) {
	if t.proot != nil && t.pdir == rdir {
		return t.proot, nil
	}
	t.closeParent()
	r, err := t.root.OpenRoot(rdir)
	if err != nil {
		return nil, err
	}
	t.proot, t.pdir = r, rdir
	return r, nil
}

func (t *Tree) closeParent() {
	if t.proot != nil {
		t.proot.Close()
	}
	t.proot, t.pdir = nil, ""
}

// removedDir forgets what was known about the removed directory p.
func (t *Tree) removedDir(p string) {
	if t.proot != nil && (t.pdir == p || strings.HasPrefix(t.pdir, p+"/") || p == ".") {
		t.closeParent()
	}
	for k := range t.dirs {
		if k == p || strings.HasPrefix(k, p+"/") || p == "." {
			delete(t.dirs, k)
		}
	}
}

func (t *Tree) markWritten(p string) {
	if t.written == nil {
		t.written = map[string]bool{}
	}
	for p != "." && p != "" && !t.written[p] {
		t.written[p] = true
		p = path.Dir(p)
	}
}

// mkdirAll creates the directories of dir (a resolved path: none of its
// existing elements is a symlink) with mode 0755.
func (t *Tree) mkdirAll(dir string) error {
	if dir == "." || dir == "" || t.dirs[dir] {
		return nil
	}
	cur := ""
	for _, e := range strings.Split(dir, "/") {
		cur = join(cur, e)
		if t.dirs[cur] {
			continue
		}
		fi, err := t.root.Lstat(cur)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", cur)
			}
			t.dirs[cur] = true
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := t.root.Mkdir(cur, 0o755); err != nil {
			return err
		}
		if err := t.root.Chmod(cur, 0o755); err != nil {
			return err
		}
		t.dirs[cur] = true
	}
	return nil
}

const opaqueMarker = ".wh..wh..opq"

func (t *Tree) whiteout(pdir, base string) error {
	rdir, err := t.parentOf(pdir)
	if err != nil {
		return err
	}
	if base == opaqueMarker {
		fi, err := t.root.Lstat(join(rdir, "."))
		if err != nil || !fi.IsDir() {
			return nil
		}
		return t.opaque(rdir)
	}
	if strings.HasPrefix(base, ".wh..wh.") {
		return nil // other aufs metadata
	}
	target := join(rdir, strings.TrimPrefix(base, ".wh."))
	if t.written[target] {
		return nil // a whiteout hides lower layers only
	}
	fi, err := t.root.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := t.root.RemoveAll(target); err != nil {
		return err
	}
	if fi.IsDir() {
		t.removedDir(target)
	}
	return nil
}

// opaque removes what lower layers put in dir.
func (t *Tree) opaque(dir string) error {
	f, err := t.root.Open(join(dir, "."))
	if err != nil {
		return err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := join(dir, e.Name())
		if !t.written[p] {
			if err := t.root.RemoveAll(p); err != nil {
				return err
			}
			if e.IsDir() {
				t.removedDir(p)
			}
			continue
		}
		if e.IsDir() { // ReadDir does not follow symlinks
			if err := t.opaque(p); err != nil {
				return err
			}
		}
	}
	return nil
}
