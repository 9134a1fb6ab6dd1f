// Package image assembles container images from dorisarm build outputs,
// without a Docker daemon and byte for byte reproducibly: layers from sorted
// entries with fixed times and owners, configs created at a fixed epoch.
package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/linkres"
)

// entry is one file of a layer: where it is in the image and on disk.
type entry struct {
	name string // in the image, without a leading slash
	src  string // on disk; "" for a directory the layer creates
	info fs.FileInfo
	// want is the build record's entry for it, which what is written must
	// match; nil when the layer is of a directory without a record.
	want *build.OutputFile
}

// Layer makes a layer holding the tree at dir under the absolute image path
// at, with the directories above at. Entries are sorted, owned by 0:0, dated
// epoch, without extended attributes; the gzip settings are fixed, so the
// same tree gives the same digest on any machine.
func Layer(dir, at string, epoch time.Time) (v1.Layer, error) {
	if !strings.HasPrefix(at, "/") {
		return nil, fmt.Errorf("image path %q must be absolute", at)
	}
	entries, err := collect(dir, strings.TrimPrefix(path.Clean(at), "/"))
	if err != nil {
		return nil, err
	}
	return tarLayer(entries, epoch)
}

// buildLayer is Layer of the build's directory from, made of exactly what
// the build record lists there: an entry the record does not list, lists
// otherwise (type, mode, size, link target) or lists but the directory
// lacks is refused, and each file's bytes are checked against the
// record's digest as they are written. A link that is absolute, or
// resolves outside the build through the build's own links, is refused
// too, naming it: in the image it would point into the base image or the
// machine that runs it.
func buildLayer(b Build, from, at string, epoch time.Time) (v1.Layer, error) {
	if !strings.HasPrefix(at, "/") {
		return nil, fmt.Errorf("image path %q must be absolute", at)
	}
	from = path.Clean(filepath.ToSlash(from))
	entries, err := collect(filepath.Join(b.Dir, filepath.FromSlash(from)), strings.TrimPrefix(path.Clean(at), "/"))
	if err != nil {
		return nil, err
	}
	if err := matchRecord(b, from, entries); err != nil {
		return nil, err
	}
	return tarLayer(entries, epoch)
}

// matchRecord sets each entry's record entry, refusing what the record of
// b does not list under from as it is, and links that leave the build.
func matchRecord(b Build, from string, entries []entry) error {
	want := map[string]build.OutputFile{}
	for _, o := range b.Record.Entries() {
		if o.Path == from || strings.HasPrefix(o.Path, from+"/") {
			want[o.Path] = o
		}
	}
	root, err := os.OpenRoot(b.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for i := range entries {
		e := &entries[i]
		if e.src == "" {
			continue // a directory above the image path
		}
		rel, err := filepath.Rel(b.Dir, e.src)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		got, err := build.Describe(e.src, rel, e.info)
		if err != nil {
			return fmt.Errorf("%s: %w", b.Dir, err)
		}
		w, ok := want[rel]
		switch {
		case !ok:
			return fmt.Errorf("%s: %s is not in the build record, and the image would carry it; rebuild with dorisarm build", b.Dir, got)
		case build.Mismatch(w, got) != "":
			return fmt.Errorf("%s: %s; rebuild with dorisarm build", b.Dir, build.Mismatch(w, got))
		}
		if w.Type == build.TypeLink {
			if err := linkres.Check(root, rel, w.Target); err != nil {
				return fmt.Errorf("%s: %v: an image must not carry it (it would point into the base image or the machine that runs it); make the build write a relative link to a file of its own output, and build again", b.Dir, err)
			}
		}
		e.want = &w
		delete(want, rel)
	}
	missing := make([]string, 0, len(want))
	for p := range want {
		missing = append(missing, p)
	}
	sort.Strings(missing)
	for _, p := range missing {
		return fmt.Errorf("%s: %s is in the build record but missing; rebuild with dorisarm build", b.Dir, want[p])
	}
	return nil
}

// tarLayer is the layer of entries, read from disk each time it is opened.
func tarLayer(entries []entry, epoch time.Time) (v1.Layer, error) {
	opener := func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeTar(pw, entries, epoch)) }()
		return pr, nil
	}
	return tarball.LayerFromOpener(opener, tarball.WithMediaType(types.OCILayer))
}

func collect(dir, at string) ([]entry, error) {
	var out []entry
	// The parents of at, as plain directories.
	parts := strings.Split(at, "/")
	for i := 1; i < len(parts); i++ {
		out = append(out, entry{name: strings.Join(parts[:i], "/")})
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		name := at
		if rel != "." {
			name = at + "/" + filepath.ToSlash(rel)
		}
		switch {
		case info.Mode().IsRegular(), info.IsDir(), info.Mode()&fs.ModeSymlink != 0:
			out = append(out, entry{name: name, src: p, info: info})
		default:
			return fmt.Errorf("%s: %s files cannot go into an image", p, info.Mode().Type())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func writeTar(w io.Writer, entries []entry, epoch time.Time) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case e.info == nil || e.info.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.name+"/", 0o755
			if e.info != nil {
				h.Mode = int64(e.info.Mode().Perm())
			}
		case e.info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(e.src)
			if err != nil {
				return err
			}
			if e.want != nil && target != e.want.Target {
				return fmt.Errorf("%s points to %s since it was checked against its build record, which says %s: rebuild with dorisarm build", e.src, target, e.want.Target)
			}
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
		default:
			h.Typeflag, h.Size, h.Mode = tar.TypeReg, e.info.Size(), int64(e.info.Mode().Perm())
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if err := writeFile(tw, e); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// writeFile copies a regular file into the layer: its size as collected
// and, for a build's file, its bytes as the record's digest says.
func writeFile(w io.Writer, e entry) error {
	f, err := os.OpenFile(e.src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var sum hash.Hash
	if e.want != nil && e.want.SHA256 != "" {
		sum = sha256.New()
		w = io.MultiWriter(w, sum)
	}
	n, err := io.Copy(w, f)
	if err != nil {
		return err
	}
	if n != e.info.Size() {
		return fmt.Errorf("%s changed while it was read", e.src)
	}
	if sum != nil && hex.EncodeToString(sum.Sum(nil)) != e.want.SHA256 {
		return fmt.Errorf("%s changed since it was checked against its build record (sha256 %x, the record says %s): rebuild with dorisarm build", e.src, sum.Sum(nil), e.want.SHA256)
	}
	return nil
}
