// Package unpack is dorisarm's one extractor: it writes archive members to
// disk for every caller (third-party source archives, the layers and
// packages a sysroot is made from, the step cache's entries), each through
// an os.Root on the destination (Tree). Archive unpacks a source archive
// (.tar.gz, .tgz, .tar.xz, .tar.bz2, .tar, .zip) the way Doris's
// download-thirdparty.sh does with tar and unzip, but safely: no entry is
// written outside the directory, no link points outside it as the kernel
// resolves it (through the links already unpacked: internal/linkres),
// nothing is written through a link, and the archive's size and entry count
// are bounded. Files and directories keep their members' modification times
// (clamped to the present), as tar does.
package unpack

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/ulikunitz/xz"
)

// Limits bound what one archive may unpack to.
type Limits struct {
	Bytes   int64 // uncompressed bytes read (the tar stream, a zip's members)
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
	if !Supported(src) {
		return nil, fmt.Errorf("%s: unknown archive type (want .tar.gz, .tgz, .tar.xz, .tar.bz2, .tar or .zip)", src)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	t := New(root, Options{Links: Confine, Times: true, MaxBytes: lim.Bytes, MaxEntries: int64(lim.Entries)})
	if strings.HasSuffix(src, ".zip") {
		err = t.zip(src)
	} else {
		err = t.tarFile(src)
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return t.Tops(), nil
}

func (t *Tree) tarFile(src string) error {
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
		xr, err := xz.NewReader(f)
		if err != nil {
			return fmt.Errorf("xz: %w", err)
		}
		r = xr
	}
	return t.Apply(context.Background(), r, "tar")
}

func (t *Tree) zip(src string) error {
	zr, err := zip.OpenReader(src)
	if err != nil {
		return err
	}
	defer zr.Close()
	for _, f := range zr.File {
		if err := t.zipMember(f); err != nil {
			return fmt.Errorf("entry %s: %w", f.Name, err)
		}
	}
	return nil
}

func (t *Tree) zipMember(f *zip.File) error {
	mode := f.Mode()
	m := member{name: f.Name, mode: mode.Perm(), mtime: f.Modified}
	switch {
	case mode.IsDir():
		m.typ = tar.TypeDir
		return t.member(m)
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
		m.typ, m.linkname = tar.TypeSymlink, string(target)
		return t.member(m)
	case mode.IsRegular():
		if f.UncompressedSize64 > uint64(t.opt.MaxBytes) {
			return fmt.Errorf("%w: more than %d uncompressed bytes", ErrLimit, t.opt.MaxBytes)
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		defer rc.Close()
		m.typ, m.size = tar.TypeReg, int64(f.UncompressedSize64)
		m.body = &countingReader{r: rc, t: t}
		if err := t.member(m); err != nil {
			return err
		}
		// The zip reader checks the CRC at the end of the member.
		if _, err := io.Copy(io.Discard, m.body); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	default:
		m.kind = fmt.Sprintf("mode %v", mode)
		return t.member(m)
	}
}
