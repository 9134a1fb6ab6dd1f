package build

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCopyOutFollowsNoLink: outputs a step turned into links to this
// machine's directories are copied as links (then refused by the stage
// check), never read through; a path through such a link is an error.
func TestCopyOutFollowsNoLink(t *testing.T) {
	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "id_rsa"), []byte("SECRET"), 0o600)
	tree := t.TempDir()
	os.MkdirAll(filepath.Join(tree, "output"), 0o755)
	os.Symlink(host, filepath.Join(tree, "output", "be"))
	os.Symlink(host, filepath.Join(tree, "lib"))
	root, err := os.OpenRoot(tree)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	stage := t.TempDir()
	if err := copyOut(root, "output/be", filepath.Join(stage, "be")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(filepath.Join(stage, "be")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("be in the stage is %v (%v), want the link copied as a link", st, err)
	}
	filepath.WalkDir(stage, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			t.Errorf("the host directory's file was copied into the output: %s", p)
		}
		return nil
	})
	if err := checkStageLinks(stage); !errors.Is(err, ErrGate) || !strings.Contains(err.Error(), "be") {
		t.Errorf("stage with be -> %s: %v, want a gate error naming be", host, err)
	}
	if err := copyOut(root, "lib/id_rsa", filepath.Join(stage, "x")); err == nil {
		t.Error("a path through a link out of the tree was read")
	}
	if _, err := os.Lstat(filepath.Join(stage, "x")); err == nil {
		t.Error("a file reached through a link out of the tree landed in the output")
	}
}

// TestStageLinksStayInside: a published build's links resolve inside it.
func TestStageLinksStayInside(t *testing.T) {
	for _, c := range []struct {
		target string
		ok     bool
	}{
		{"libfoo.so.1", true},
		{"../bin/tool", true},
		{"/etc/shadow", false},
		{"../../../etc/shadow", false},
	} {
		stage := t.TempDir()
		os.MkdirAll(filepath.Join(stage, "be", "lib"), 0o755)
		os.MkdirAll(filepath.Join(stage, "be", "bin"), 0o755)
		os.Symlink(c.target, filepath.Join(stage, "be", "lib", "libplanted.so"))
		err := checkStageLinks(stage)
		if c.ok != (err == nil) {
			t.Errorf("be/lib/libplanted.so -> %s: %v", c.target, err)
		}
		if err != nil && !strings.Contains(err.Error(), "be/lib/libplanted.so") {
			t.Errorf("the error does not name the link: %v", err)
		}
	}
}
