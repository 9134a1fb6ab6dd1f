package sysroot

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
)

// unpacker applies tar streams (image layers in order, or packages) to a root
// directory, the way a container runtime applies layers, with these rules:
//
//   - Names are relative to the root; a name whose ".." elements leave the
//     root is refused (ErrUnsafePath), as is such a hard-link target.
//   - Only paths matching keep are written; parents are created as needed.
//   - A path's directories are resolved inside the root with chroot
//     semantics (an absolute symlink target starts at the root, ".." stops
//     at the root), so no write can land outside it, and a write whose
//     resolved path is not kept is dropped.
//   - Symlinks stay symlinks. An absolute target, or a relative one that
//     would leave the root or has ".." after a name, is rewritten to the
//     relative path of the same place inside the root, so the tree works
//     with --sysroot, under qemu -L, and after being moved.
//   - Whiteouts (.wh.NAME, .wh..wh..opq) remove what lower layers wrote.
//   - Hard links become hard links to the already-unpacked file.
//   - Devices and FIFOs are dropped; owners, times and set-id bits are not
//     kept; files are at least 0600 and directories at least 0700.
type unpacker struct {
	root       *os.Root
	keep       []string
	maxBytes   int64
	maxEntries int64

	read    int64
	entries int64
	written map[string]bool // paths written by the current layer, and their parents
	dirs    map[string]bool // resolved paths known to be directories
	pdir    string          // the directory proot is open on
	proot   *os.Root
}

const maxSymlinkHops = 64

type countingReader struct {
	r io.Reader
	u *unpacker
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.u.read += int64(n)
	if c.u.read > c.u.maxBytes {
		return n, fmt.Errorf("%w: more than %d uncompressed bytes (WithMaxBytes)", ErrLimit, c.u.maxBytes)
	}
	return n, err
}

// apply unpacks one tar stream; label names it in errors.
func (u *unpacker) apply(ctx context.Context, r io.Reader, label string) error {
	cr := &countingReader{r: r, u: u}
	tr := tar.NewReader(cr)
	u.written = map[string]bool{}
	if u.dirs == nil {
		u.dirs = map[string]bool{}
	}
	defer u.closeParent()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		u.entries++
		if u.entries > u.maxEntries {
			return fmt.Errorf("%s: %w: more than %d archive entries (WithMaxEntries)", label, ErrLimit, u.maxEntries)
		}
		if err := u.entry(tr, hdr); err != nil {
			return fmt.Errorf("%s: %s: %w", label, hdr.Name, err)
		}
	}
	// Read to the end so that a verifying reader (a registry blob) checks
	// its digest.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	return nil
}

// cleanName turns an archive name into a clean path relative to the root
// ("" for the root itself).
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
		return "", fmt.Errorf("%w: %q leaves the root", ErrUnsafePath, name)
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

func (u *unpacker) kept(p string) bool { return keptBy(u.keep, p) }

// keptBy: p is a pattern's path or below it.
func keptBy(patterns []string, p string) bool {
	el := strings.Split(p, "/")
	for _, pat := range patterns {
		pel := strings.Split(pat, "/")
		if len(el) < len(pel) {
			continue
		}
		ok := true
		for i, pe := range pel {
			if m, err := path.Match(pe, el[i]); err != nil || !m {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (u *unpacker) entry(tr *tar.Reader, hdr *tar.Header) error {
	p, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if p == "" {
		return nil
	}
	pdir, base := path.Dir(p), path.Base(p)
	if strings.HasPrefix(base, ".wh.") {
		return u.whiteout(pdir, base)
	}
	if !u.kept(p) {
		return nil
	}
	rdir, err := u.resolve(pdir)
	if err != nil {
		return err
	}
	real := join(rdir, base)
	if !u.kept(real) {
		return nil
	}
	if hdr.Typeflag != tar.TypeDir && hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeSymlink && hdr.Typeflag != tar.TypeLink {
		return nil // devices, FIFOs, ...: nothing a compiler reads
	}
	var old string // a hard link's target
	if hdr.Typeflag == tar.TypeLink {
		lp, err := cleanName(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link target: %w", err)
		}
		if lp == "" {
			return fmt.Errorf("hard link to the root")
		}
		ldir, err := u.resolve(path.Dir(lp))
		if err != nil {
			return err
		}
		old = join(ldir, path.Base(lp))
		if old == real {
			u.markWritten(real)
			return nil
		}
		fi, err := u.root.Lstat(old)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			if !u.kept(old) {
				return nil // its target was not kept: nor is the link
			}
			return fmt.Errorf("hard link to %s, which the archive did not unpack before", hdr.Linkname)
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("hard link to %s, which is not a regular file", hdr.Linkname)
		}
	}
	if hdr.Typeflag == tar.TypeSymlink && (hdr.Linkname == "" || strings.ContainsRune(hdr.Linkname, 0)) {
		return fmt.Errorf("symlink with an empty or invalid target")
	}

	if err := u.mkdirAll(rdir); err != nil {
		return err
	}
	pr, err := u.parent(rdir)
	if err != nil {
		return err
	}
	fi, err := pr.Lstat(base)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if exists && !(fi.IsDir() && hdr.Typeflag == tar.TypeDir) {
		// Replace what is there (a directory with everything in it),
		// except that a directory over a directory merges.
		if fi.IsDir() {
			if err := pr.RemoveAll(base); err != nil {
				return err
			}
			u.removedDir(real)
		} else if err := pr.Remove(base); err != nil {
			return err
		}
		exists = false
	}
	mode := hdr.FileInfo().Mode().Perm()
	switch hdr.Typeflag {
	case tar.TypeDir:
		if !exists {
			if err := pr.Mkdir(base, 0o700); err != nil {
				return err
			}
		}
		if err := pr.Chmod(base, mode|0o700); err != nil {
			return err
		}
		u.dirs[real] = true
	case tar.TypeReg:
		f, err := pr.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if err == nil {
			err = f.Chmod(mode | 0o600)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := pr.Symlink(rewriteLink(rdir, hdr.Linkname), base); err != nil {
			return err
		}
	case tar.TypeLink:
		if err := u.root.Link(old, real); err != nil {
			return err
		}
	}
	u.markWritten(real)
	return nil
}

// parent returns a handle on the directory rdir (resolved: no symlinks),
// reusing the last one: archives list a directory's files together.
func (u *unpacker) parent(rdir string) (*os.Root, error) {
	if u.proot != nil && u.pdir == rdir {
		return u.proot, nil
	}
	u.closeParent()
	r, err := u.root.OpenRoot(rdir)
	if err != nil {
		return nil, err
	}
	u.proot, u.pdir = r, rdir
	return r, nil
}

func (u *unpacker) closeParent() {
	if u.proot != nil {
		u.proot.Close()
	}
	u.proot, u.pdir = nil, ""
}

// removedDir forgets what was known about the removed directory p.
func (u *unpacker) removedDir(p string) {
	if u.proot != nil && (u.pdir == p || strings.HasPrefix(u.pdir, p+"/") || p == ".") {
		u.closeParent()
	}
	for k := range u.dirs {
		if k == p || strings.HasPrefix(k, p+"/") || p == "." {
			delete(u.dirs, k)
		}
	}
}

func (u *unpacker) resolve(p string) (string, error) { return resolveIn(u.root, p, u.dirs) }

func (u *unpacker) markWritten(p string) {
	for p != "." && p != "" && !u.written[p] {
		u.written[p] = true
		p = path.Dir(p)
	}
}

// mkdirAll creates the directories of dir (a resolved path: none of its
// existing elements is a symlink) with mode 0755.
func (u *unpacker) mkdirAll(dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	if u.dirs[dir] {
		return nil
	}
	cur := ""
	for _, e := range strings.Split(dir, "/") {
		cur = join(cur, e)
		if u.dirs[cur] {
			continue
		}
		fi, err := u.root.Lstat(cur)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", cur)
			}
			u.dirs[cur] = true
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := u.root.Mkdir(cur, 0o755); err != nil {
			return err
		}
		if err := u.root.Chmod(cur, 0o755); err != nil {
			return err
		}
		u.dirs[cur] = true
	}
	return nil
}

const opaqueMarker = ".wh..wh..opq"

func (u *unpacker) whiteout(pdir, base string) error {
	rdir, err := u.resolve(pdir)
	if err != nil {
		return err
	}
	if base == opaqueMarker {
		fi, err := u.root.Lstat(join(rdir, "."))
		if err != nil || !fi.IsDir() {
			return nil
		}
		return u.opaque(rdir)
	}
	if strings.HasPrefix(base, ".wh..wh.") {
		return nil // other aufs metadata
	}
	target := join(rdir, strings.TrimPrefix(base, ".wh."))
	if u.written[target] {
		return nil // a whiteout hides lower layers only
	}
	fi, err := u.root.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := u.root.RemoveAll(target); err != nil {
		return err
	}
	if fi.IsDir() {
		u.removedDir(target)
	}
	return nil
}

// opaque removes what lower layers put in dir.
func (u *unpacker) opaque(dir string) error {
	f, err := u.root.Open(join(dir, "."))
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
		if !u.written[p] {
			if err := u.root.RemoveAll(p); err != nil {
				return err
			}
			if e.IsDir() {
				u.removedDir(p)
			}
			continue
		}
		if e.IsDir() { // ReadDir does not follow symlinks
			if err := u.opaque(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// rewriteLink returns the target to store for a symlink in dir (a resolved
// path relative to the root) whose archive target is t.
func rewriteLink(dir, t string) string {
	if !path.IsAbs(t) && staysInside(dir, t) {
		return t
	}
	var abs string
	if path.IsAbs(t) {
		abs = path.Clean(t)
	} else {
		abs = path.Clean("/" + join(dir, t)) // Clean stops ".." at "/"
	}
	return relPath("/"+join(dir, "."), abs)
}

// staysInside: a relative target whose ".." elements all come first and do
// not climb above the root. (After a name, ".." would depend on whether the
// name is a symlink: such targets are rewritten.)
func staysInside(dir, t string) bool {
	depth := 0
	if dir != "." && dir != "" {
		depth = strings.Count(dir, "/") + 1
	}
	named := false
	for _, e := range strings.Split(t, "/") {
		switch e {
		case "", ".":
		case "..":
			if named {
				return false
			}
			depth--
			if depth < 0 {
				return false
			}
		default:
			named = true
		}
	}
	return true
}

// relPath is the relative path from directory from to to, both clean and absolute.
func relPath(from, to string) string {
	fe := strings.Split(strings.Trim(path.Clean(from), "/"), "/")
	te := strings.Split(strings.Trim(to, "/"), "/")
	if len(fe) == 1 && fe[0] == "" {
		fe = nil
	}
	if len(te) == 1 && te[0] == "" {
		te = nil
	}
	i := 0
	for i < len(fe) && i < len(te) && fe[i] == te[i] {
		i++
	}
	var out []string
	for range fe[i:] {
		out = append(out, "..")
	}
	out = append(out, te[i:]...)
	if len(out) == 0 {
		return "."
	}
	return strings.Join(out, "/")
}

// resolve follows the symlinks of the clean relative path p inside root with
// chroot semantics and returns a path none of whose existing elements is a
// symlink (elements that do not exist are kept as they are). Every element,
// the last one too, is followed. dirs, if not nil, holds paths known to be
// directories, and learns more.
func resolveIn(root *os.Root, p string, dirs map[string]bool) (string, error) {
	var out []string
	todo := strings.Split(p, "/")
	hops := 0
	for len(todo) > 0 {
		e := todo[0]
		todo = todo[1:]
		switch e {
		case "", ".":
			continue
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			continue
		}
		cand := strings.Join(append(out[:len(out):len(out)], e), "/")
		if dirs[cand] {
			out = append(out, e)
			continue
		}
		fi, err := root.Lstat(cand)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				out = append(out, e)
				continue
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if fi.IsDir() && dirs != nil {
				dirs[cand] = true
			}
			out = append(out, e)
			continue
		}
		hops++
		if hops > maxSymlinkHops {
			return "", fmt.Errorf("too many levels of symbolic links resolving %s", p)
		}
		t, err := root.Readlink(cand)
		if err != nil {
			return "", err
		}
		if path.IsAbs(t) {
			out = out[:0]
		}
		todo = append(strings.Split(t, "/"), todo...)
	}
	if len(out) == 0 {
		return ".", nil
	}
	return strings.Join(out, "/"), nil
}
