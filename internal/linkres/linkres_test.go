package linkres

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tree(t *testing.T, links map[string]string, dirs ...string) *os.Root {
	t.Helper()
	dir := t.TempDir()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func TestCheck(t *testing.T) {
	root := tree(t, map[string]string{"a/b/u": "..", "abs/l": "/etc", "loop/x": "y", "loop/y": "x", "lib64/lib": "."}, "a/b", "lib64")
	for _, c := range []struct {
		name, target string
		why          string // "" when it stays inside
	}{
		{"a/passwd", "b/u/../../etc/passwd", "climbs above the root"}, // a/b/u is a, a/.. the root, its .. outside
		{"a/ok", "b/u/x", ""},                           // a/x
		{"a/up", "b/u/..", ""},                          // the root itself
		{"a/lexical", "b/../../../etc", "climbs above"}, // plain ..
		{"top", "..", "climbs above"},                   // at the root
		{"a/c", "b/../b/u/c", ""},                       // a/c
		{"x", "abs/l/passwd", "a link to the absolute path /etc"},
		{"x", "/etc/passwd", "absolute path"},
		{"x", "loop/x", "more than 40 links"},
		{"x", "missing/../..", "climbs above"}, // a name that does not exist is a directory
		{"lib64/y", "lib/lib/lib/../x", ""},
		{"x", "", "empty target"},
	} {
		err := Check(root, c.name, c.target)
		var ee *EscapeError
		switch {
		case c.why == "" && err != nil:
			t.Errorf("%s -> %s: %v, want inside", c.name, c.target, err)
		case c.why != "" && (!errors.As(err, &ee) || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), c.name)):
			t.Errorf("%s -> %s: %v, want an escape (%s) naming the link", c.name, c.target, err, c.why)
		}
	}
}

// Resolve walks as Check does, with chroot semantics where Check refuses:
// ".." at the root stays there, an absolute link restarts from the root.
func TestResolve(t *testing.T) {
	root := tree(t, map[string]string{"a/b/u": "..", "abs/l": "/etc", "loop/x": "y", "loop/y": "x", "lib64/lib": ".", "usr/lib64": "../lib64"}, "a/b", "lib64", "etc")
	for _, c := range []struct{ p, want string }{
		{"a/b/u/../../etc/passwd", "etc/passwd"}, // a/b/u is a, a/.. the root, the root's .. the root
		{"a/b/u/x", "a/x"},
		{"abs/l/passwd", "etc/passwd"},
		{"abs/l", "etc"}, // the last element is followed too
		{"usr/lib64/lib/lib/libc.so.6", "lib64/libc.so.6"},
		{"missing/../x", "x"},
		{"../../..", "."},
		{"", "."},
	} {
		if got, err := Resolve(RootTree{Root: root}, c.p); err != nil || got != c.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", c.p, got, err, c.want)
		}
	}
	if _, err := Resolve(RootTree{Root: root}, "loop/x/f"); err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Errorf("a loop: %v", err)
	}
	// Dirs learns the directories looked up, and what it holds is not
	// looked up again.
	dirs := map[string]bool{}
	if got, err := Resolve(RootTree{Root: root, Dirs: dirs}, "a/b/u/x"); err != nil || got != "a/x" {
		t.Fatalf("with Dirs: %q %v", got, err)
	}
	if !dirs["a"] || !dirs["a/b"] || dirs["a/b/u"] || len(dirs) != 2 {
		t.Errorf("Dirs learnt %v, want a and a/b", dirs)
	}
	if got, err := Resolve(RootTree{Root: root, Dirs: map[string]bool{"a/b/u": true}}, "a/b/u/x"); got != "a/b/u/x" {
		t.Errorf("a path Dirs holds was looked up: %q %v", got, err)
	}
}

// A link that was inside when made escapes once a later member turns a
// directory it goes through into a link: CheckAll sees the finished tree.
func TestCheckAllSeesLaterLinks(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.Symlink("b/../../x", filepath.Join(dir, "a", "l")) // a/b/../.. = the root: inside
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := CheckAll(root, []string{"a/l", "gone"}); err != nil {
		t.Fatalf("before: %v", err)
	}
	os.Remove(filepath.Join(dir, "a", "b"))
	os.Mkdir(filepath.Join(dir, "a", "c"), 0o755)
	os.Mkdir(filepath.Join(dir, "a", "c", "d"), 0o755)
	os.Symlink("c/d", filepath.Join(dir, "a", "b")) // a/b/.. is now a/c
	if err := CheckAll(root, []string{"a/l"}); err != nil {
		t.Fatalf("a/b -> c/d keeps a/l inside (a/c/..): %v", err)
	}
	os.Remove(filepath.Join(dir, "a", "b"))
	os.Symlink("..", filepath.Join(dir, "a", "b")) // a/b is the root: a/b/../.. is outside
	if err := CheckAll(root, []string{"a/l"}); err == nil {
		t.Fatal("a/l escapes through the later link a/b -> .., and CheckAll accepted it")
	}
}
