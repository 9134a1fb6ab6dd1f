// Package unpack extracts a third-party source archive (.tar.gz, .tgz,
// .tar.xz, .tar.bz2, .tar, .zip) into a directory, the way Doris's
// download-thirdparty.sh does with tar and unzip, but safely: no entry is
// written outside the directory, no link points outside it as the kernel
// resolves it (through the links already unpacked: internal/linkres),
// nothing is written through a link, and the archive's size and entry count
// are bounded. Files and directories keep their members' modification times
// (clamped to the present), as tar does: autotools packages ship generated
// files that make must find newer than their sources.
package unpack

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/linkres"
)

// Limits bound what one archive may unpack to.
type Limits struct {
	Bytes   int64 // total size of the files
	Entries int
}

// DefaultLimits fit the largest Doris third-party archive (boost, aws-sdk) many times over.
var DefaultLimits = Limits{Bytes: 8 << 30, Entries: 500000}

// Supported reports whether name has an extension Archive unpacks.
func Supported(name string) bool {
	for _, s := range []string{".tar.gz", ".tgz", ".tar.xz", ".tar.bz2", ".tar", ".zip"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// Archive unpacks the archive at src into dir (created if needed) and returns
// the top-level names it created.
func Archive(src, dir string, lim Limits) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	x := &extractor{dir: dir, root: root, lim: lim, tops: map[string]bool{}, now: time.Now()}
	switch {
	case strings.HasSuffix(src, ".zip"):
		err = x.zip(src)
	case Supported(src):
		err = x.tarFile(src)
	default:
		return nil, fmt.Errorf("%s: unknown archive type (want .tar.gz, .tgz, .tar.xz, .tar.bz2, .tar or .zip)", src)
	}
	if err == nil {
		// A later member can make a directory an earlier link goes
		// through into a link: the finished tree decides.
		err = linkres.CheckAll(root, x.links)
	}
	if err == nil {
		err = x.dirTimes()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	var tops []string
	for t := range x.tops {
		tops = append(tops, t)
	}
	return tops, nil
}

type extractor struct {
	dir     string
	root    *os.Root
	links   []string // the links made, relative to dir
	lim     Limits
	bytes   int64
	entries int
	tops    map[string]bool
	now     time.Time
	dirs    []dirTime // set last: writing a directory's members changes its time
}

type dirTime struct {
	path  string
	mtime time.Time
}

// setTime gives p the member's modification time, clamped to the present;
// a member without one keeps the time of writing.
func (x *extractor) setTime(p string, mtime time.Time) error {
	if mtime.IsZero() {
		return nil
	}
	if mtime.After(x.now) {
		mtime = x.now
	}
	return os.Chtimes(p, mtime, mtime)
}

// dirTimes sets the directories' times, deepest first.
func (x *extractor) dirTimes() error {
	for i := len(x.dirs) - 1; i >= 0; i-- {
		if err := x.setTime(x.dirs[i].path, x.dirs[i].mtime); err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) tarFile(src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	switch {
	case strings.HasSuffix(src, ".gz"), strings.HasSuffix(src, ".tgz"):
		zr, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		r = zr
	case strings.HasSuffix(src, ".bz2"):
		r = bzip2.NewReader(f)
	case strings.HasSuffix(src, ".xz"):
		// The standard library has no xz; xz-utils is on every build machine.
		cmd := exec.Command("xz", "-dc")
		cmd.Stdin = f
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("xz: %w (install xz-utils)", err)
		}
		defer cmd.Wait()
		defer out.Close()
		r = out
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeXGlobalHeader, 'V':
			// git archive's pax_global_header (the commit id), a volume label: metadata.
			continue
		case tar.TypeDir:
			if err := x.mkdir(h.Name, h.ModTime); err != nil {
				return err
			}
		case tar.TypeReg, tar.TypeCont, tar.TypeGNUSparse:
			if err := x.file(h.Name, fs.FileMode(h.Mode).Perm(), h.Size, h.ModTime, tr); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := x.symlink(h.Name, h.Linkname); err != nil {
				return err
			}
		case tar.TypeLink:
			if err := x.hardlink(h.Name, h.Linkname); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %s: type %q is not a file, directory or link", h.Name, h.Typeflag)
		}
	}
	// Read to the end, so a gzip stream's checksum is verified too.
	_, err = io.Copy(io.Discard, r)
	return err
}

func (x *extractor) zip(src string) error {
	zr, err := zip.OpenReader(src)
	if err != nil {
		return err
	}
	defer zr.Close()
	for _, f := range zr.File {
		mode := f.Mode()
		switch {
		case mode.IsDir():
			if err := x.mkdir(f.Name, f.Modified); err != nil {
				return err
			}
		case mode&fs.ModeSymlink != 0:
			rc, err := f.Open()
			if err != nil {
				return err
			}
			target, err := io.ReadAll(io.LimitReader(rc, 4096))
			rc.Close()
			if err != nil {
				return err
			}
			if err := x.symlink(f.Name, string(target)); err != nil {
				return err
			}
		case mode.IsRegular():
			rc, err := f.Open()
			if err != nil {
				return err
			}
			err = x.file(f.Name, mode.Perm(), int64(f.UncompressedSize64), f.Modified, rc)
			rc.Close()
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %s: mode %v is not a file, directory or link", f.Name, mode)
		}
	}
	return nil
}

// target checks an entry's name and returns where it goes.
func (x *extractor) target(name string) (string, error) {
	x.entries++
	if x.entries > x.lim.Entries {
		return "", fmt.Errorf("more than %d entries", x.lim.Entries)
	}
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("entry %q names a path outside the directory", name)
	}
	if clean == "." {
		return x.dir, nil
	}
	top, _, _ := strings.Cut(clean, "/")
	x.tops[top] = true
	p := filepath.Join(x.dir, filepath.FromSlash(clean))
	// Never write through a link an earlier entry made.
	rel, _ := filepath.Rel(x.dir, filepath.Dir(p))
	cur := x.dir
	if rel != "." {
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			cur = filepath.Join(cur, part)
			st, err := os.Lstat(cur)
			if err == nil && st.Mode()&fs.ModeSymlink != 0 {
				return "", fmt.Errorf("entry %q would be written through the link %s", name, strings.TrimPrefix(cur, x.dir+"/"))
			}
		}
	}
	return p, nil
}

func (x *extractor) mkdir(name string, mtime time.Time) error {
	p, err := x.target(name)
	if err != nil {
		return err
	}
	x.dirs = append(x.dirs, dirTime{p, mtime})
	return os.MkdirAll(p, 0o755)
}

func (x *extractor) file(name string, perm fs.FileMode, size int64, mtime time.Time, r io.Reader) error {
	p, err := x.target(name)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("entry %s: negative size", name)
	}
	x.bytes += size
	if x.bytes > x.lim.Bytes {
		return fmt.Errorf("unpacks to more than %d bytes", x.lim.Bytes)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	_ = os.Remove(p) // a later entry of the same name replaces the earlier one, as tar does
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm|0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("entry %s: %d bytes, header says %d", name, n, size)
	}
	if err == nil {
		err = x.setTime(p, mtime)
	}
	return err
}

func (x *extractor) symlink(name, target string) error {
	p, err := x.target(name)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(x.dir, p)
	if err != nil {
		return err
	}
	rel = filepath.ToSlash(rel)
	if err := linkres.Check(x.root, rel, target); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	_ = os.Remove(p)
	x.links = append(x.links, rel)
	return os.Symlink(target, p)
}

func (x *extractor) hardlink(name, target string) error {
	p, err := x.target(name)
	if err != nil {
		return err
	}
	t, err := x.target(target)
	if err != nil {
		return fmt.Errorf("hard link %s: %w", name, err)
	}
	st, err := os.Lstat(t)
	if err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("hard link %s: %s is not a regular file unpacked before it", name, target)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	_ = os.Remove(p)
	return os.Link(t, p)
}
