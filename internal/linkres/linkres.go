// Package linkres decides whether a symbolic link stays inside a directory
// tree the way the kernel will resolve it: through the links already in the
// tree, not lexically. A lexical check accepts a/b/u -> .. followed by
// a/passwd -> b/u/../../etc/passwd (a/b/u/../.. cleans to a), while the
// kernel reads a/b/u as a, a/.. as the root and the root's .. as outside.
// Every code path that writes links from untrusted input (archive members,
// step-cache entries) checks each link with Check when it is made and the
// whole set with CheckAll when the tree is complete, since a later member
// can turn a directory an earlier link went through into a link.
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
	return CheckIn(RootTree{root}, name, target)
}

// Tree is what links resolve through.
type Tree interface {
	// Lookup says whether name (clean, relative) exists, and if it is a
	// link, its target.
	Lookup(name string) (exists, isLink bool, target string, err error)
}

// RootTree is the tree under an os.Root as it is on disk.
type RootTree struct{ Root *os.Root }

func (t RootTree) Lookup(name string) (bool, bool, string, error) {
	fi, err := t.Root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return false, false, "", nil
	case err != nil:
		return false, false, "", err
	case fi.Mode()&fs.ModeSymlink == 0:
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
	var out []string
	if d := path.Dir(name); d != "." {
		out = strings.Split(d, "/")
	}
	todo := strings.Split(target, "/")
	hops := 0
	for len(todo) > 0 {
		e := todo[0]
		todo = todo[1:]
		switch e {
		case "", ".":
			continue
		case "..":
			if len(out) == 0 {
				return &EscapeError{Link: name, Target: target, Why: "climbs above the root of the tree (resolved through the links in it)"}
			}
			out = out[:len(out)-1]
			continue
		}
		cand := strings.Join(append(out[:len(out):len(out)], e), "/")
		exists, isLink, t, err := tree.Lookup(cand)
		switch {
		case err != nil:
			return fmt.Errorf("link %s: %w", name, err)
		case !exists || !isLink:
			out = append(out, e)
			continue
		}
		if hops++; hops > maxHops {
			return &EscapeError{Link: name, Target: target, Why: fmt.Sprintf("goes through more than %d links", maxHops)}
		}
		if path.IsAbs(t) {
			return &EscapeError{Link: name, Target: target, Why: fmt.Sprintf("goes through %s, a link to the absolute path %s", cand, t)}
		}
		// cand's target is read from cand's directory, which out is.
		todo = append(strings.Split(t, "/"), todo...)
	}
	return nil
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
