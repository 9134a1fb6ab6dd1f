// Package datafs reads dorisarm's data files (matrix, recipes, locks, allow
// files, patch series) either from disk or from the copy built into the
// binary. A name that starts with "embedded:" is a path in the built-in copy
// ("embedded:recipes/doris.yaml"); any other name is an ordinary file path.
// The prefix stays in every name so that errors still say file:line.
package datafs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm"
	"github.com/dorisarm/dorisarm/internal/fsutil"
)

// Prefix marks a name in the built-in data.
const Prefix = "embedded:"

// Embedded names rel (a slash path from the repository root) in the built-in data.
func Embedded(rel string) string { return Prefix + path.Clean(rel) }

// IsEmbedded reports whether name is in the built-in data.
func IsEmbedded(name string) bool { return strings.HasPrefix(name, Prefix) }

// split returns the path inside the built-in data, or ok false for a disk path.
func split(name string) (rel string, ok bool, err error) {
	rel, ok = strings.CutPrefix(name, Prefix)
	if !ok {
		return "", false, nil
	}
	rel = path.Clean(rel)
	if !fs.ValidPath(rel) {
		return "", true, &fs.PathError{Op: "open", Path: name, Err: errors.New("outside the data built into dorisarm")}
	}
	return rel, true, nil
}

// MaxFile bounds a data file read from disk: the matrix, a recipe, a
// patch, an allow file. The largest real one is a few hundred kB.
const MaxFile = 64 << 20

// ReadFile reads a data file.
func ReadFile(name string) ([]byte, error) {
	rel, ok, err := split(name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return fsutil.ReadFile(name, MaxFile)
	}
	b, err := fs.ReadFile(dorisarm.Data(), rel)
	return b, rename(err, name)
}

// Stat describes a data file.
func Stat(name string) (fs.FileInfo, error) {
	rel, ok, err := split(name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return os.Stat(name)
	}
	fi, err := fs.Stat(dorisarm.Data(), rel)
	return fi, rename(err, name)
}

// Exists reports whether name is there.
func Exists(name string) bool {
	_, err := Stat(name)
	return err == nil
}

// Glob is filepath.Glob for either kind of name; the matches keep the prefix.
func Glob(pattern string) ([]string, error) {
	rel, ok, err := split(pattern)
	if err != nil {
		return nil, err
	}
	if !ok {
		return filepath.Glob(pattern)
	}
	m, err := fs.Glob(dorisarm.Data(), rel)
	for i := range m {
		m[i] = Prefix + m[i]
	}
	return m, err
}

// Join joins a directory and a relative path, keeping the prefix.
func Join(dir string, elem ...string) string {
	if rel, ok := strings.CutPrefix(dir, Prefix); ok {
		return Prefix + path.Join(append([]string{rel}, elem...)...)
	}
	return filepath.Join(append([]string{dir}, elem...)...)
}

// Dir is the directory of name, keeping the prefix.
func Dir(name string) string {
	if rel, ok := strings.CutPrefix(name, Prefix); ok {
		return Prefix + path.Dir(rel)
	}
	return filepath.Dir(name)
}

// rename puts the prefixed name into an fs error.
func rename(err error, name string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
	}
	return err
}

// FileDigest is "sha256:<hex>" of a data file's content.
func FileDigest(name string) (string, error) {
	b, err := ReadFile(name)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// SeriesDigest is the digest of a patch series directory: sha256 of one line
// "<component>/<file> <sha256 hex>\n" per dir/*/*.patch, in path order — the
// files patch.LoadSeries reads. It also returns how many patches there are.
func SeriesDigest(dir string) (string, int, error) {
	files, err := Glob(Join(dir, "*", "*.patch"))
	if err != nil {
		return "", 0, err
	}
	var lines []string
	for _, f := range files {
		b, err := ReadFile(f)
		if err != nil {
			return "", 0, err
		}
		sum := sha256.Sum256(b)
		rel := strings.TrimPrefix(strings.TrimPrefix(filepath.ToSlash(f), filepath.ToSlash(dir)), "/")
		lines = append(lines, rel+" "+hex.EncodeToString(sum[:])+"\n")
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		io.WriteString(h, l)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), len(files), nil
}

// WriteTree writes the built-in directory rel under dst (dst/<base of rel>)
// once per content: into cacheDir/<digest>/, made in a temporary directory
// and renamed into place, so that concurrent runs and interrupted ones never
// see a half-written tree. Files listed in dorisarm.Executables get mode
// 0755, others 0644. It returns the tree's directory on disk.
func WriteTree(rel, cacheDir string) (string, error) {
	fsys := dorisarm.Data()
	exec := map[string]bool{}
	for _, e := range dorisarm.Executables {
		exec[e] = true
	}
	h := sha256.New()
	var files []string
	err := fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s %t %x\n", p, exec[p], sum)
		files = append(files, p)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("the built-in %s: %w", rel, err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("the built-in data has no %s", rel)
	}
	base := filepath.Join(cacheDir, hex.EncodeToString(h.Sum(nil))[:16])
	final := filepath.Join(base, path.Base(rel))
	if st, err := os.Stat(final); err == nil && st.IsDir() {
		return final, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("writing the built-in %s: %w (set DORISARM_CACHE to a writable directory)", rel, err)
	}
	tmp, err := os.MkdirTemp(base, ".tmp-")
	if err != nil {
		return "", fmt.Errorf("writing the built-in %s: %w (set DORISARM_CACHE to a writable directory)", rel, err)
	}
	defer os.RemoveAll(tmp)
	for _, p := range files {
		out := filepath.Join(tmp, filepath.FromSlash(strings.TrimPrefix(p, rel+"/")))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return "", err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return "", fmt.Errorf("the built-in %s: %w", rel, err)
		}
		mode := os.FileMode(0o644)
		if exec[p] {
			mode = 0o755
		}
		if err := os.WriteFile(out, b, mode); err != nil {
			return "", fmt.Errorf("writing the built-in %s: %w", rel, err)
		}
		if err := os.Chmod(out, mode); err != nil { // whatever the umask
			return "", err
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		// Another run got there first.
		if st, serr := os.Stat(final); serr == nil && st.IsDir() {
			return final, nil
		}
		return "", fmt.Errorf("writing the built-in %s: %w", rel, err)
	}
	return final, nil
}
