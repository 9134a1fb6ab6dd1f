package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "report.html")
	if err := WriteFileAtomic(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if b, _ := os.ReadFile(p); string(b) != "two" || st.Mode().Perm() != 0o644 {
		t.Errorf("%q %v", b, st.Mode())
	}
	// Renaming over a directory fails: the directory stays, no temporary file is left.
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	if err := WriteFileAtomic(filepath.Join(dir, "sub"), []byte("x"), 0o644); err == nil {
		t.Error("replaced a directory")
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Error("wrote into a missing directory")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("left behind: %v", ents)
	}
}
