package source

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/textfmt"
)

// LockEntry pins one archive by content.
type LockEntry struct {
	SHA256 string `json:"sha256"`
	MD5    string `json:"md5"`
	Size   int64  `json:"size"`
}

// Lock is recipes/<name>.lock: archive file name → pinned content.
type Lock struct {
	Archives map[string]LockEntry `json:"archives"`
	// Missing are archives the tree declares that the mirror did not have
	// when the lock was written: not pinned, so not yet vouched for.
	Missing []string `json:"missing,omitempty"`
}

// ErrMissing is an archive the mirror does not have.
var ErrMissing = errors.New("not in the mirror")

// ReadLock reads a lock file; a missing file is an empty lock.
func ReadLock(path string) (*Lock, error) {
	l := &Lock{Archives: map[string]LockEntry{}}
	data, err := datafs.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, l); err != nil {
		return nil, fmt.Errorf("%s: not a lock file: %w (regenerate it with dorisarm sources lock)", path, err)
	}
	if l.Archives == nil {
		l.Archives = map[string]LockEntry{}
	}
	return l, nil
}

// Write writes the lock atomically with sorted keys.
func (l *Lock) Write(path string) error {
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, append(data, '\n'), 0o644)
}

// Open opens archive name from a mirror: a directory, a file:// URL or an
// http(s):// URL (REPOSITORY_URL style: <mirror>/<name>).
func Open(mirror, name string) (io.ReadCloser, error) {
	if strings.Contains(name, "/") || name == ".." || name == "." {
		return nil, fmt.Errorf("archive name %q must be a plain file name", name)
	}
	switch {
	case strings.HasPrefix(mirror, "http://"), strings.HasPrefix(mirror, "https://"):
		u := strings.TrimSuffix(mirror, "/") + "/" + url.PathEscape(name)
		resp, err := http.Get(u)
		if err != nil {
			return nil, fmt.Errorf("fetch %s: %w", u, err)
		}
		if resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			return nil, fmt.Errorf("fetch %s: %s: %w", u, resp.Status, ErrMissing)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("fetch %s: %s", u, resp.Status)
		}
		return resp.Body, nil
	case strings.HasPrefix(mirror, "file://"):
		u, err := url.Parse(mirror)
		if err != nil {
			return nil, fmt.Errorf("mirror %q: %w", mirror, err)
		}
		mirror = u.Path
	}
	// A regular file only: a named pipe in the mirror would block the
	// fetch for ever, a device never end it.
	f, _, err := fsutil.OpenRegular(filepath.Join(mirror, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("archive %s is not in mirror %s: %w", name, mirror, ErrMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("archive %s: mirror %s: %w", name, mirror, err)
	}
	return f, nil
}

// Sum computes the checksums of r.
func Sum(r io.Reader) (LockEntry, error) {
	s, m := sha256.New(), md5.New()
	n, err := io.Copy(io.MultiWriter(s, m), r)
	if err != nil {
		return LockEntry{}, err
	}
	return LockEntry{SHA256: hex.EncodeToString(s.Sum(nil)), MD5: hex.EncodeToString(m.Sum(nil)), Size: n}, nil
}

// Verify checks an archive's checksums against the lock (sha256) and the tree
// (MD5). It returns a warning when only the tree's MD5 vouches for it.
func Verify(p Package, got LockEntry, l *Lock) (warning string, err error) {
	if got.MD5 != p.MD5 {
		return "", fmt.Errorf("archive %s: MD5 %s does not match %s_MD5SUM %s in vars.sh; the mirror holds another file", p.Name, got.MD5, p.Entry, p.MD5)
	}
	pin, ok := l.Archives[p.Name]
	if !ok {
		return fmt.Sprintf("archive %s is not pinned in the lock file; only its MD5 from vars.sh was checked (run dorisarm sources lock)", p.Name), nil
	}
	if pin.SHA256 != got.SHA256 {
		return "", fmt.Errorf("archive %s: sha256 %s does not match the lock's %s; refusing it", p.Name, got.SHA256, pin.SHA256)
	}
	return "", nil
}

// LockPackages fetches every package from the mirror, checks each against the
// tree's MD5 and any existing pin, and returns the lock with their entries;
// archives the mirror lacks are listed in Missing. Nothing is written; a
// mismatch is an error.
func LockPackages(l *Lock, pkgs []Package, mirror string, update bool) (*Lock, error) {
	out := &Lock{Archives: map[string]LockEntry{}}
	for k, v := range l.Archives {
		out.Archives[k] = v
	}
	var errs []string
	missing := map[string]bool{}
	for _, m := range l.Missing {
		missing[m] = true
	}
	for _, p := range pkgs {
		rc, err := Open(mirror, p.Name)
		if errors.Is(err, ErrMissing) {
			missing[p.Name] = true
			continue
		}
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		delete(missing, p.Name)
		got, err := Sum(rc)
		rc.Close()
		if err != nil {
			errs = append(errs, fmt.Sprintf("archive %s: %v", p.Name, err))
			continue
		}
		if got.MD5 != p.MD5 {
			errs = append(errs, fmt.Sprintf("archive %s: MD5 %s does not match %s_MD5SUM %s in vars.sh", p.Name, got.MD5, p.Entry, p.MD5))
			continue
		}
		if old, ok := l.Archives[p.Name]; ok && old.SHA256 != got.SHA256 && !update {
			errs = append(errs, fmt.Sprintf("archive %s: sha256 changed from the pinned %s to %s (pass --update if the new archive is intended)", p.Name, old.SHA256, got.SHA256))
			continue
		}
		out.Archives[p.Name] = got
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	for m := range missing {
		if _, pinned := out.Archives[m]; !pinned {
			out.Missing = append(out.Missing, m)
		}
	}
	sort.Strings(out.Missing)
	return out, nil
}

// MirrorFor is the mirror to fetch from: the flag as given, else the
// recipe's, relative to the tree unless it is a URL or absolute.
func MirrorFor(flag, recipeMirror, tree string) string {
	switch {
	case flag != "":
		return flag
	case recipeMirror == "" || strings.Contains(recipeMirror, "://") || filepath.IsAbs(recipeMirror):
		return recipeMirror
	}
	return filepath.Join(tree, recipeMirror)
}

// LockFile pins pkgs from mirror into the lock file at path (whose current
// pins are l): every archive fetched and checked, nothing written unless
// all that were found check out and at least one was found. It returns
// the new lock and the archives the mirror lacks (left unpinned).
func LockFile(path string, l *Lock, pkgs []Package, mirror string, update bool) (*Lock, []string, error) {
	if mirror == "" {
		return nil, nil, fault.Inputf("no mirror: pass --mirror DIR|URL")
	}
	out, err := LockPackages(l, pkgs, mirror, update)
	if err != nil {
		return nil, nil, fault.Gatef("nothing written to %s:\n%w", path, err)
	}
	want := map[string]bool{}
	for _, p := range pkgs {
		want[p.Name] = true
	}
	var missing []string
	for _, m := range out.Missing {
		if want[m] {
			missing = append(missing, m)
		}
	}
	if len(missing) == len(pkgs) {
		return nil, nil, fault.Gatef("nothing written to %s: %s has none of the %d archives (is --mirror right?)", path, mirror, len(pkgs))
	}
	return out, missing, out.Write(path)
}

// Pin is one package's archive and its pin, as sources list shows it.
type Pin struct {
	Entry   string `json:"entry"`
	Version string `json:"version"`
	Archive string `json:"archive"`
	MD5     string `json:"md5"`
	SHA256  string `json:"sha256,omitempty"`
}

// Pins are packages with their pins.
type Pins []Pin

// Pins are pkgs with their sha256 from the lock ("" when unpinned).
func (l *Lock) Pins(pkgs []Package) Pins {
	out := Pins{}
	for _, p := range pkgs {
		out = append(out, Pin{p.Entry, p.Version, p.Name, p.MD5, l.Archives[p.Name].SHA256})
	}
	return out
}

// WriteText prints the pins as a table.
func (pins Pins) WriteText(w io.Writer) error {
	rows := [][]string{{"ENTRY", "VERSION", "ARCHIVE", "MD5", "SHA256 (lock)"}}
	for _, p := range pins {
		pin := "unpinned"
		if len(p.SHA256) >= 16 {
			pin = p.SHA256[:16] + "…"
		}
		rows = append(rows, []string{p.Entry, p.Version, p.Archive, p.MD5, pin})
	}
	textfmt.Table(w, rows)
	return nil
}
