package sysroot

import (
	"github.com/dorisarm/dorisarm/internal/unpack"

	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// TreeStat is a tree's content digest and size.
type TreeStat struct {
	Digest string // "sha256:..."
	Files  int    // regular files
	Size   int64  // bytes in regular files
}

// TreeDigest hashes a directory tree: every path below dir in byte order,
// with its kind, permission bits and either its content's sha256 (files) or
// its target (symlinks). Times, owners and hard links do not count, so a copy
// of the tree has the same digest.
//
// The hashed record of each entry is
//
//	kind NUL path NUL mode-octal NUL (sha256-hex | target) NUL
//
// with kind d, f or l (a symlink's mode is not hashed).
func TreeDigest(dir string) (TreeStat, error) {
	type ent struct {
		rel  string
		path string
		mode fs.FileMode
	}
	var ents []ent
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		ents = append(ents, ent{filepath.ToSlash(rel), p, info.Mode()})
		return nil
	})
	if err != nil {
		return TreeStat{}, err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].rel < ents[j].rel })
	var st TreeStat
	h := sha256.New()
	for _, e := range ents {
		switch {
		case e.mode.IsDir():
			fmt.Fprintf(h, "d\x00%s\x00%o\x00\x00", e.rel, e.mode.Perm())
		case e.mode&fs.ModeSymlink != 0:
			t, err := os.Readlink(e.path)
			if err != nil {
				return TreeStat{}, err
			}
			fmt.Fprintf(h, "l\x00%s\x00\x00%s\x00", e.rel, t)
		case e.mode.IsRegular():
			f, err := os.Open(e.path)
			if err != nil {
				return TreeStat{}, err
			}
			fh := sha256.New()
			n, err := io.Copy(fh, f)
			f.Close()
			if err != nil {
				return TreeStat{}, err
			}
			st.Files++
			st.Size += n
			fmt.Fprintf(h, "f\x00%s\x00%o\x00%x\x00", e.rel, e.mode.Perm(), fh.Sum(nil))
		default:
			return TreeStat{}, fmt.Errorf("%s: not a file, directory or symlink (%v)", e.path, e.mode.Type())
		}
	}
	st.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return st, nil
}

// GlibcVersion returns the release version of the glibc in the sysroot at
// root ("2.31" for Debian 11), read from its libc.so.6: the "release version
// X.Y" of the banner glibc carries in .rodata, checked against the highest
// GLIBC_x.y version the library defines (SHT_GNU_verdef), which is used when
// there is no banner. The two differ when a release added no symbols: glibc
// 2.31 on aarch64 defines GLIBC_2.30 at most (see GlibcDefinedVersion).
// libc.so.6 is looked for in lib/<triple>/, usr/lib/<triple>/, lib64/,
// usr/lib64/, lib/ and usr/lib/; symlinks are followed inside root.
func GlibcVersion(root string) (string, error) {
	release, defined, err := glibcVersions(root)
	if err != nil {
		return "", err
	}
	if release != "" {
		return release, nil
	}
	return defined, nil
}

// GlibcDefinedVersion returns the highest GLIBC_x.y version the sysroot's
// libc.so.6 defines: no program linked against the sysroot needs a higher one.
func GlibcDefinedVersion(root string) (string, error) {
	_, defined, err := glibcVersions(root)
	return defined, err
}

func glibcVersions(root string) (release, defined string, err error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", "", err
	}
	defer r.Close()
	var cands []string
	for _, d := range libDirs(r) {
		cands = append(cands, d+"/libc.so.6")
	}
	var firstErr error
	for _, c := range cands {
		rel, def, err := glibcOf(r, c)
		if err == nil {
			return rel, def, nil
		}
		if firstErr == nil && !errors.Is(err, fs.ErrNotExist) {
			firstErr = fmt.Errorf("%s: %w", c, err)
		}
	}
	if firstErr != nil {
		return "", "", firstErr
	}
	return "", "", fmt.Errorf("no libc.so.6 under %s (looked in lib/<triple>, usr/lib/<triple>, lib64, usr/lib64, lib, usr/lib)", root)
}

var reRelease = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`GNU C Library [^\n\x00]*release version ([0-9]+\.[0-9]+(?:\.[0-9]+)?)`)
})

func glibcOf(r *os.Root, p string) (release, defined string, err error) {
	rp, err := unpack.Resolve(r, p, nil)
	if err != nil {
		return "", "", err
	}
	f, err := r.Open(rp)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", "", err
	}
	vers, err := ef.DynamicVersions()
	if err != nil {
		return "", "", fmt.Errorf("no version definitions: %w", err)
	}
	var best []int
	for _, v := range vers {
		n, ok := strings.CutPrefix(v.Name, "GLIBC_")
		nums, vok := parseVersion(n)
		if !ok || !vok {
			continue
		}
		if best == nil || compareVersions(nums, best) > 0 {
			best, defined = nums, n
		}
	}
	if best == nil {
		return "", "", fmt.Errorf("defines no GLIBC_ version")
	}
	if sec := ef.Section(".rodata"); sec != nil && sec.Size < 64<<20 {
		if data, err := sec.Data(); err == nil {
			if m := reRelease().FindSubmatch(data); m != nil {
				if rel, ok := parseVersion(string(m[1])); ok && compareVersions(rel, best) >= 0 {
					release = string(m[1])
				}
			}
		}
	}
	return release, defined, nil
}

func parseVersion(s string) ([]int, bool) {
	if s == "" {
		return nil, false
	}
	var out []int
	for _, p := range strings.Split(s, ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

func compareVersions(a, b []int) int {
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
