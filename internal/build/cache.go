// Package build runs a plan: it copies the source tree to a work directory,
// runs each step (or restores its result from the step cache), trains PGO
// profiles, collects the outputs, smoke-runs them under qemu on the target's
// CPU model, scans them with the target's policy, and only then publishes
// them with their build record.
package build

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Cache is a content-addressed store of step results: <dir>/steps/<key>/
// holds files.tar (what the step changed in the tree), meta.json, and
// nothing else. Entries appear by an atomic rename, so concurrent builds can
// share a cache and an interrupted step leaves nothing behind.
type Cache struct {
	Dir string
}

// Meta describes a cached step result.
type Meta struct {
	Key     string   `json:"key"`
	Step    string   `json:"step"`
	Deleted []string `json:"deleted,omitempty"`
	Files   int      `json:"files"`
	Bytes   int64    `json:"bytes"`
	Seconds float64  `json:"seconds"` // how long the step took to run
}

func (c *Cache) entry(key string) string { return filepath.Join(c.Dir, "steps", key) }

// Get returns a step's cached result, or false.
func (c *Cache) Get(key string) (*Meta, bool) {
	data, err := os.ReadFile(filepath.Join(c.entry(key), "meta.json"))
	if err != nil {
		return nil, false
	}
	var m Meta
	if json.Unmarshal(data, &m) != nil || m.Key != key {
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(c.entry(key), "meta.json"), now, now) // LRU: last use
	return &m, true
}

// Restore applies a cached change set to a tree.
func (c *Cache) Restore(key, tree string, m *Meta) error {
	for _, d := range m.Deleted {
		if err := os.RemoveAll(filepath.Join(tree, filepath.FromSlash(d))); err != nil {
			return err
		}
	}
	f, err := os.Open(filepath.Join(c.entry(key), "files.tar"))
	if err != nil {
		return err
	}
	defer f.Close()
	return untar(f, tree)
}

// Put stores a step's change set: the files of tree listed in changed.
func (c *Cache) Put(m Meta, tree string, changed []string) error {
	tmp, err := os.MkdirTemp(filepath.Join(c.Dir, "steps"), ".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	f, err := os.Create(filepath.Join(tmp, "files.tar"))
	if err != nil {
		return err
	}
	n, err := tarFiles(f, tree, changed)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	m.Files, m.Bytes = len(changed), n
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "meta.json"), data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, c.entry(m.Key)); err != nil {
		if _, statErr := os.Stat(c.entry(m.Key)); statErr == nil {
			return nil // another build stored the same result first
		}
		return err
	}
	return nil
}

// Init creates the cache directories.
func (c *Cache) Init() error { return os.MkdirAll(filepath.Join(c.Dir, "steps"), 0o755) }

// Entry is one cached step, for pruning and listing.
type Entry struct {
	Key      string
	Bytes    int64
	LastUsed time.Time
}

// Entries lists the cache, least recently used first.
func (c *Cache) Entries() ([]Entry, error) {
	dirs, err := os.ReadDir(filepath.Join(c.Dir, "steps"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []Entry
	for _, d := range dirs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".tmp-") {
			continue
		}
		e := Entry{Key: d.Name()}
		if st, err := os.Stat(filepath.Join(c.entry(d.Name()), "meta.json")); err == nil {
			e.LastUsed = st.ModTime()
		}
		if st, err := os.Stat(filepath.Join(c.entry(d.Name()), "files.tar")); err == nil {
			e.Bytes = st.Size()
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.Before(out[j].LastUsed) })
	return out, nil
}

// Prune removes least recently used entries until the cache holds at most
// maxBytes; it returns what it removed.
func (c *Cache) Prune(maxBytes int64) (removed []Entry, err error) {
	entries, err := c.Entries()
	if err != nil {
		return nil, err
	}
	var total int64
	for _, e := range entries {
		total += e.Bytes
	}
	for _, e := range entries {
		if total <= maxBytes {
			break
		}
		// Rename first so a concurrent reader never sees half an entry.
		gone := filepath.Join(c.Dir, "steps", ".tmp-prune-"+e.Key)
		if err := os.Rename(c.entry(e.Key), gone); err != nil {
			continue
		}
		os.RemoveAll(gone)
		total -= e.Bytes
		removed = append(removed, e)
	}
	return removed, nil
}

func tarFiles(w io.Writer, root string, files []string) (int64, error) {
	tw := tar.NewWriter(w)
	var total int64
	for _, rel := range files {
		full := filepath.Join(root, filepath.FromSlash(rel))
		st, err := os.Lstat(full)
		if err != nil {
			return 0, err
		}
		hdr, err := tar.FileInfoHeader(st, "")
		if err != nil {
			return 0, err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			if hdr.Linkname, err = os.Readlink(full); err != nil {
				return 0, err
			}
		}
		hdr.Name = rel
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return 0, err
		}
		if st.Mode().IsRegular() {
			f, err := os.Open(full)
			if err != nil {
				return 0, err
			}
			n, err := io.Copy(tw, f)
			f.Close()
			if err != nil {
				return 0, err
			}
			total += n
		}
	}
	return total, tw.Close()
}

func untar(r io.Reader, root string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeXGlobalHeader || h.Typeflag == 'V' {
			// Metadata about the archive (a PAX global header, as git
			// archive writes first, or a GNU volume label), not an entry:
			// its name is no path in the tree.
			continue
		}
		rel := filepath.Clean(filepath.FromSlash(h.Name))
		if strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
			return fmt.Errorf("cache entry names %q outside the tree", h.Name)
		}
		full := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(full, os.FileMode(h.Mode)&0o7777|0o700); err != nil {
				return err
			}
		case tar.TypeSymlink:
			os.RemoveAll(full)
			if err := os.Symlink(h.Linkname, full); err != nil {
				return err
			}
		case tar.TypeReg, tar.TypeCont:
			os.RemoveAll(full)
			if err := writeFile(full, tr, os.FileMode(h.Mode)&0o7777, h.ModTime); err != nil {
				return err
			}
		}
	}
}

// writeFile writes r to path with mode and modification time mtime.
func writeFile(path string, r io.Reader, mode os.FileMode, mtime time.Time) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(path, mtime, mtime)
}
