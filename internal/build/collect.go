package build

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/linkres"
)

// copyOut copies rel (a slash-separated path under root: the tree a step
// wrote) to dst on this machine, reading only through root: a link the
// step made (output/be -> /root, be/lib -> /etc) is copied as a link, never
// followed, and no path through one leads out of the tree. Files that are
// neither regular files, directories nor links are refused.
func copyOut(root *os.Root, rel, dst string) error {
	st, err := root.Lstat(filepath.FromSlash(rel))
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return copyOutOne(root, rel, dst, st)
	}
	return fs.WalkDir(root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		sub, _ := filepath.Rel(filepath.FromSlash(rel), filepath.FromSlash(p))
		info, err := d.Info()
		if err != nil {
			return err
		}
		return copyOutOne(root, p, filepath.Join(dst, sub), info)
	})
}

func copyOutOne(root *os.Root, p, target string, info fs.FileInfo) error {
	switch {
	case info.IsDir():
		return os.MkdirAll(target, info.Mode().Perm()|0o700)
	case info.Mode()&fs.ModeSymlink != 0:
		link, err := root.Readlink(filepath.FromSlash(p))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		os.Remove(target)
		return os.Symlink(link, target)
	case info.Mode().IsRegular():
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		in, err := root.Open(filepath.FromSlash(p))
		if err != nil {
			return err
		}
		defer in.Close()
		return writeFile(target, io.LimitReader(in, info.Size()), info.Mode().Perm(), info.ModTime())
	}
	return fmt.Errorf("%s is %s, not a file, directory or link: a build's output holds none", p, fsutil.Kind(info.Mode()))
}

// checkStageLinks refuses a staged build with a link that leads out of
// it (absolute, or climbing above it, through its other links as the
// kernel resolves them): the published build, its record and its images
// hold only their own files.
func checkStageLinks(stage string) error {
	root, err := os.OpenRoot(stage)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		target, err := root.Readlink(filepath.FromSlash(p))
		if err != nil {
			return err
		}
		if err := linkres.Check(root, path.Clean(p), target); err != nil {
			return fmt.Errorf("%w: the build's output %s is a link to %s, which leads out of the build (a published build holds only its own files; make the link relative to a file the build ships, or copy the file)", ErrGate, p, target)
		}
		return nil
	})
}
