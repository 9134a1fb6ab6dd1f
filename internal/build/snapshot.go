package build

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// stamp identifies a file's state cheaply.
type stamp struct {
	size  int64
	mtime int64
	mode  fs.FileMode
	link  string
}

type snapshot map[string]stamp

// takeSnapshot records every file and symlink under root, except ignored
// top-level names (the work directory's own state).
func takeSnapshot(root string, ignore map[string]bool) (snapshot, error) {
	s := snapshot{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if ignore[strings.SplitN(rel, "/", 2)[0]] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := stamp{size: info.Size(), mtime: info.ModTime().UnixNano(), mode: info.Mode()}
		if info.Mode()&fs.ModeSymlink != 0 {
			st.link, _ = os.Readlink(p)
		}
		s[rel] = st
		return nil
	})
	return s, err
}

// diff returns what changed from a to b: new or modified files, and deleted ones.
func diff(a, b snapshot) (changed, deleted []string) {
	for p, st := range b {
		if old, ok := a[p]; !ok || old != st {
			changed = append(changed, p)
		}
	}
	for p := range a {
		if _, ok := b[p]; !ok {
			deleted = append(deleted, p)
		}
	}
	sort.Strings(changed)
	sort.Strings(deleted)
	return changed, deleted
}
