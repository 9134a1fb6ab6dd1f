package unpack

import (
	"os"
	"path"
	"strings"

	"github.com/dorisarm/dorisarm/internal/linkres"
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
// directories, and learns more. It is linkres.Resolve on the tree on disk.
func Resolve(root *os.Root, p string, dirs map[string]bool) (string, error) {
	return linkres.Resolve(linkres.RootTree{Root: root, Dirs: dirs}, p)
}
