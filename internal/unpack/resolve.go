package unpack

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// rewriteLink returns the target to store for a symlink in dir (a resolved
// path relative to the root) whose archive target is t.
func rewriteLink(dir, t string) string {
	if !path.IsAbs(t) && StaysInside(dir, t) {
		return t
	}
	var abs string
	if path.IsAbs(t) {
		abs = path.Clean(t)
	} else {
		abs = path.Clean("/" + join(dir, t)) // Clean stops ".." at "/"
	}
	return relPath("/"+join(dir, "."), abs)
}

// StaysInside reports whether t, the target of a link in dir (a path
// relative to the root), is a relative target whose ".." elements all come first and do
// not climb above the root. (After a name, ".." would depend on whether the
// name is a symlink: such targets are rewritten.)
func StaysInside(dir, t string) bool {
	depth := 0
	if dir != "." && dir != "" {
		depth = strings.Count(dir, "/") + 1
	}
	named := false
	for _, e := range strings.Split(t, "/") {
		switch e {
		case "", ".":
		case "..":
			if named {
				return false
			}
			depth--
			if depth < 0 {
				return false
			}
		default:
			named = true
		}
	}
	return true
}

// relPath is the relative path from directory from to to, both clean and absolute.
func relPath(from, to string) string {
	fe := strings.Split(strings.Trim(path.Clean(from), "/"), "/")
	te := strings.Split(strings.Trim(to, "/"), "/")
	if len(fe) == 1 && fe[0] == "" {
		fe = nil
	}
	if len(te) == 1 && te[0] == "" {
		te = nil
	}
	i := 0
	for i < len(fe) && i < len(te) && fe[i] == te[i] {
		i++
	}
	var out []string
	for range fe[i:] {
		out = append(out, "..")
	}
	out = append(out, te[i:]...)
	if len(out) == 0 {
		return "."
	}
	return strings.Join(out, "/")
}

// Resolve follows the symlinks of the clean relative path p inside root with
// chroot semantics and returns a path none of whose existing elements is a
// symlink (elements that do not exist are kept as they are). Every element,
// the last one too, is followed. dirs, if not nil, holds paths known to be
// directories, and learns more.
func Resolve(root *os.Root, p string, dirs map[string]bool) (string, error) {
	var out []string
	todo := strings.Split(p, "/")
	hops := 0
	for len(todo) > 0 {
		e := todo[0]
		todo = todo[1:]
		switch e {
		case "", ".":
			continue
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			continue
		}
		cand := strings.Join(append(out[:len(out):len(out)], e), "/")
		if dirs[cand] {
			out = append(out, e)
			continue
		}
		fi, err := root.Lstat(cand)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				out = append(out, e)
				continue
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if fi.IsDir() && dirs != nil {
				dirs[cand] = true
			}
			out = append(out, e)
			continue
		}
		hops++
		if hops > maxSymlinkHops {
			return "", fmt.Errorf("too many levels of symbolic links resolving %s", p)
		}
		t, err := root.Readlink(cand)
		if err != nil {
			return "", err
		}
		if path.IsAbs(t) {
			out = out[:0]
		}
		todo = append(strings.Split(t, "/"), todo...)
	}
	if len(out) == 0 {
		return ".", nil
	}
	return strings.Join(out, "/"), nil
}
