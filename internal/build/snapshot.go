package build

import (
	"io/fs"
	"os"
	"path"
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

// takeSnapshot records every file and symlink under root, and every empty
// directory, except ignored top-level names (the work directory's own
// state). Empty directories count: a source archive's empty submodule
// directories tell grpc's CMake not to download what would fill them, so a
// step result without them is not the step's result.
func takeSnapshot(root string, ignore map[string]bool) (snapshot, error) {
	s := snapshot{}
	empty := map[string]fs.FileMode{} // directories seen with no entry yet
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
		delete(empty, path.Dir(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			empty[rel] = info.Mode()
			return nil
		}
		st := stamp{size: info.Size(), mtime: info.ModTime().UnixNano(), mode: info.Mode()}
		if info.Mode()&fs.ModeSymlink != 0 {
			st.link, _ = os.Readlink(p)
		}
		s[rel] = st
		return nil
	})
	for rel, mode := range empty {
		s[rel] = stamp{mode: mode}
	}
	return s, err
}

// diff returns what changed from a to b: new or modified files, and deleted ones.
func diff(a, b snapshot) (changed, deleted []string) {
	for p, st := range b {
		if old, ok := a[p]; !ok || old != st {
			changed = append(changed, p)
		}
	}
	var filled map[string]bool // directories b has entries under
	for p, st := range a {
		if _, ok := b[p]; ok {
			continue
		}
		if st.mode.IsDir() {
			// An empty directory that now holds something was not deleted.
			if filled == nil {
				filled = parents(b)
			}
			if filled[p] {
				continue
			}
		}
		deleted = append(deleted, p)
	}
	sort.Strings(changed)
	sort.Strings(deleted)
	return changed, deleted
}

// parents returns every directory that holds an entry of s.
func parents(s snapshot) map[string]bool {
	dirs := map[string]bool{}
	for p := range s {
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return dirs
}
