// Package linkres decides whether a symbolic link stays inside a directory
// tree the way the kernel will resolve it: through the links already in the
// tree, not lexically. A lexical check accepts a/b/u -> .. followed by
// a/passwd -> b/u/../../etc/passwd (a/b/u/../.. cleans to a), while the
// kernel reads a/b/u as a, a/.. as the root and the root's .. as outside.
// Every code path that writes links from untrusted input (archive members,
// step-cache entries) checks each link with Check when it is made and the
// whole set with CheckAll when the tree is complete, since a later member
// can turn a directory an earlier link went through into a link.
//
// Resolve walks a path the same way with the tree's root as the root of
// the file system (chroot), as a sysroot's absolute links mean: one walker
// serves both.
package linkres

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// maxHops bounds the links followed resolving one target (Linux: 40).
const maxHops = 40

// EscapeError is a link whose target leaves the tree.
type EscapeError struct {
	Link, Target string
	Why          string
}

func (e *EscapeError) Error() string {
	return fmt.Sprintf("link %s -> %s %s", e.Link, e.Target, e.Why)
}

// Check reports an *EscapeError if the link name (a clean slash-separated
// path relative to root) with target would resolve outside root, following
// the links root already holds, or through an absolute link. Elements that
// do not exist yet are taken as directories.
func Check(root *os.Root, name, target string) error {
	return CheckIn(RootTree{Root: root}, name, target)
}

// Tree is what links resolve through.
type Tree interface {
	// Lookup says whether name (clean, relative) exists, and if it is a
	// link, its target.
	Lookup(name string) (exists, isLink bool, target string, err error)
}

// RootTree is the tree under an os.Root as it is on disk. Dirs, if not
// nil, holds paths known to be directories, which are not looked up again,
// and learns the directories looked up (an extractor that resolves every
// member's directory keeps it; it must forget what it removes).
type RootTree struct {
	Root *os.Root
	Dirs map[string]bool
}

func (t RootTree) Lookup(name string) (bool, bool, string, error) {
	if t.Dirs[name] {
		return true, false, "", nil
	}
	fi, err := t.Root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return false, false, "", nil
	case err != nil:
		return false, false, "", err
	case fi.Mode()&fs.ModeSymlink == 0:
		if fi.IsDir() && t.Dirs != nil {
			t.Dirs[name] = true
		}
		return true, false, "", nil
	}
	target, err := t.Root.Readlink(name)
	return true, true, target, err
}

// Overlay is a tree as it will be once a change set is applied to Base:
// Deleted paths (and what is under them) removed, then Entries written
// (a link's target, or "" for a file or directory). It lets a change set
// be judged before anything of it is written.
type Overlay struct {
	Base    Tree
	Entries map[string]*string
	Deleted []string
}

func (o *Overlay) Lookup(name string) (bool, bool, string, error) {
	if e, ok := o.Entries[name]; ok {
		if e == nil {
			return true, false, "", nil
		}
		return true, true, *e, nil
	}
	for _, d := range o.Deleted {
		if name == d || strings.HasPrefix(name, d+"/") {
			return false, false, "", nil
		}
	}
	return o.Base.Lookup(name)
}

// CheckIn is Check through any Tree.
func CheckIn(tree Tree, name, target string) error {
	if target == "" {
		return &EscapeError{Link: name, Target: target, Why: "has an empty target"}
	}
	if path.IsAbs(target) {
		return &EscapeError{Link: name, Target: target, Why: "points to an absolute path"}
	}
	var dir []string
	if d := path.Dir(name); d != "." {
		dir = strings.Split(d, "/")
	}
	_, why, err := walk(tree, dir, target, true)
	switch {
	case err != nil:
		return fmt.Errorf("link %s: %w", name, err)
	case why != "":
		return &EscapeError{Link: name, Target: target, Why: why}
	}
	return nil
}

// Resolve follows the links of the clean relative path p through tree
// with tree's root as the root of the file system (chroot semantics):
// ".." at the root stays there and an absolute link starts again from the
// root. Every element, the last one too, is followed; elements that do not
// exist are kept as they are. It returns a path none of whose existing
// elements is a link ("." for the root).
func Resolve(tree Tree, p string) (string, error) {
	out, why, err := walk(tree, nil, p, false)
	switch {
	case err != nil:
		return "", err
	case why != "":
		return "", fmt.Errorf("too many levels of symbolic links resolving %s: it %s", p, why)
	case len(out) == 0:
		return ".", nil
	}
	return strings.Join(out, "/"), nil
}

// walk resolves target, read in the directory whose elements are dir,
// through tree as the kernel resolves a path: an element that is a link
// is replaced by the link's target, read in the link's own directory (at
// most maxHops links); an element that does not exist is taken as a
// directory. It returns the resolved path's elements, or why the walk
// stopped: with confine, ".." at the root and a link to an absolute path
// leave the tree; without, ".." at the root stays there and an absolute
// link starts again from the root. Past maxHops links both stop.
func walk(tree Tree, dir []string, target string, confine bool) (out []string, why string, err error) {
	out = append([]string(nil), dir...)
	todo := strings.Split(target, "/")
	hops := 0
	for len(todo) > 0 {
		e := todo[0]
		todo = todo[1:]
		switch e {
		case "", ".":
			continue
		case "..":
			switch {
			case len(out) > 0:
				out = out[:len(out)-1]
			case confine:
				return nil, "climbs above the root of the tree (resolved through the links in it)", nil
			}
			continue
		}
		cand := strings.Join(append(out[:len(out):len(out)], e), "/")
		exists, isLink, t, err := tree.Lookup(cand)
		switch {
		case err != nil:
			return nil, "", err
		case !exists || !isLink:
			out = append(out, e)
			continue
		}
		if hops++; hops > maxHops {
			return nil, fmt.Sprintf("goes through more than %d links", maxHops), nil
		}
		if path.IsAbs(t) {
			if confine {
				return nil, fmt.Sprintf("goes through %s, a link to the absolute path %s", cand, t), nil
			}
			out = out[:0]
		}
		// cand's target is read from cand's directory, which out is.
		todo = append(strings.Split(t, "/"), todo...)
	}
	return out, "", nil
}

// CheckAll checks again every link in names (paths relative to root) as
// the finished tree resolves it; a name that is no longer a link is skipped.
func CheckAll(root *os.Root, names []string) error {
	for _, n := range names {
		fi, err := root.Lstat(n)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		t, err := root.Readlink(n)
		if err != nil {
			return err
		}
		if err := Check(root, n, t); err != nil {
			return err
		}
	}
	return nil
}
