// Package image assembles container images from dorisarm build outputs,
// without a Docker daemon and byte for byte reproducibly: layers from sorted
// entries with fixed times and owners, configs created at a fixed epoch.
package image

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file of a layer: where it is in the image and on disk.
type entry struct {
	name string // in the image, without a leading slash
	src  string // on disk; "" for a directory the layer creates
	info fs.FileInfo
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
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
		default:
			h.Typeflag, h.Size, h.Mode = tar.TypeReg, e.info.Size(), int64(e.info.Mode().Perm())
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(e.src)
			if err != nil {
				return err
			}
			n, err := io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
			if n != h.Size {
				return fmt.Errorf("%s changed while it was read", e.src)
			}
		}
	}
	return tw.Close()
}
