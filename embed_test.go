package dorisarm

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// tracked lists the files git tracks under the embedded directories, with
// whether each is executable (mode 100755).
func tracked(t *testing.T) map[string]bool {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	out, err := exec.Command("git", "ls-files", "-s", "--", "matrix.yaml", "recipes", "patches", "runtimes", Sample).Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	files := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		mode, rest, _ := strings.Cut(line, " ")
		_, name, _ := strings.Cut(rest, "\t")
		files[name] = mode == "100755"
	}
	return files
}

// TestEmbeddedIsTheCheckout: the binary carries exactly the files git tracks
// (none missing, no build leftovers), byte for byte, and Executables are
// exactly the executable ones. go:embed reads the real files, so the copy
// cannot go stale; this catches a new file the embed patterns miss.
func TestEmbeddedIsTheCheckout(t *testing.T) {
	want := tracked(t)
	got := map[string]bool{}
	err := fs.WalkDir(Data(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		got[p] = true
		b, err := fs.ReadFile(Data(), p)
		if err != nil {
			return err
		}
		disk, err := os.ReadFile(filepath.FromSlash(p))
		if err != nil {
			return err
		}
		if !bytes.Equal(b, disk) {
			t.Errorf("embedded %s differs from the checkout's", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range want {
		if !got[f] {
			t.Errorf("%s is tracked but not embedded: add it to the go:embed lines in embed.go", f)
		}
	}
	for f := range got {
		if _, ok := want[f]; !ok {
			t.Errorf("%s is embedded but git does not track it", f)
		}
	}
	var exec []string
	for f, x := range want {
		if x {
			exec = append(exec, f)
		}
	}
	sort.Strings(exec)
	listed := append([]string(nil), Executables...)
	sort.Strings(listed)
	if strings.Join(exec, " ") != strings.Join(listed, " ") {
		t.Errorf("Executables = %v, the checkout's executable files are %v", listed, exec)
	}
	for _, d := range PatchDirs {
		if m, _ := fs.Glob(Data(), d+"/*/*.patch"); len(m) == 0 {
			t.Errorf("PatchDirs names %s, which has no patches", d)
		}
	}
}
