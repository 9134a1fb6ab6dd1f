package source

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/fsutil"
)

// TreeDigest hashes a directory by content: every regular file's path
// (relative, slash-separated), executable bit and bytes, and every symlink's
// target, in sorted order. Paths equal to or under an ignored path
// (relative to dir) are left out. Modification times and owners do not count.
func TreeDigest(dir string, ignore []string) (string, error) {
	return TreeDigestLinks(dir, ignore, nil)
}

// TreeDigestLinks is TreeDigest of the tree as it will be once each
// symlink's target is replaced by link(rel, target) (rel relative to dir,
// slash-separated): a tree copied with its links rewritten has the digest
// its source has here. A nil link keeps every target.
func TreeDigestLinks(dir string, ignore []string, link func(rel, target string) string) (string, error) {
	skip := map[string]bool{}
	for _, i := range ignore {
		skip[filepath.ToSlash(filepath.Clean(i))] = true
	}
	type entry struct{ path, line string }
	var entries []entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if rel != "." && skip[rel] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if link != nil {
				target = link(rel, target)
			}
			entries = append(entries, entry{rel, "L " + rel + " " + target})
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			sum, err := fileSHA256(path)
			if err != nil {
				return err
			}
			mode := "F"
			if info.Mode()&0o111 != 0 {
				mode = "X"
			}
			entries = append(entries, entry{rel, mode + " " + rel + " " + sum})
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hashing %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	h := sha256.New()
	for _, e := range entries {
		io.WriteString(h, e.line+"\n")
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// ValidDigest reports whether d is a content digest as FileDigest writes
// it: "sha256:" and 64 lower-case hex digits.
func ValidDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// FileDigest is a regular file's content digest, "sha256:<hex>". Anything
// else is refused at once (fsutil.OpenRegular): a named pipe would block
// the hash for ever, /dev/zero never end it.
func FileDigest(path string) (string, error) {
	sum, err := fileSHA256(path)
	if err != nil {
		return "", err
	}
	return "sha256:" + sum, nil
}

func fileSHA256(path string) (string, error) {
	f, _, err := fsutil.OpenRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// StringDigest is the sha256 of s, in the form the other digests take.
func StringDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}
