package testproc

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot is the repository's root: the nearest directory above the
// test's working directory that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Corpus is ../shared/corpus beside the repository (real upstream Doris
// inputs); the test is skipped, saying so, where it is absent.
func Corpus(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(RepoRoot(t)), "shared", "corpus")
	if st, err := os.Stat(filepath.Join(dir, "doris-2.1.7", "thirdparty", "vars.sh")); err != nil || st.IsDir() {
		t.Skipf("no real Doris corpus at %s (it sits beside the repository in the project's workspace): %v", dir, err)
	}
	return dir
}
