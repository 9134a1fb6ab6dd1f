package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// WriteFileAtomic syncs the new file before it takes path's name and the
// directory after the rename; a failed sync leaves path as it was.
func TestWriteFileAtomicSyncs(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "dorisarm-build.json")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	var synced []string
	var failWith error
	defer func(f func(*os.File) error) { syncFile = f }(syncFile)
	syncFile = func(f *os.File) error {
		// What path holds when f is synced.
		now, _ := os.ReadFile(p)
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		what := "file"
		if fi.IsDir() {
			what = "dir"
		}
		synced = append(synced, fmt.Sprintf("%s %s, path holds %q", what, filepath.Base(f.Name()), now))
		if failWith != nil {
			return failWith
		}
		return f.Sync()
	}
	if err := WriteFileAtomic(p, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 2 || !strings.HasPrefix(synced[0], "file .dorisarm-build.json.") || !strings.HasSuffix(synced[0], `path holds "old"`) ||
		synced[1] != fmt.Sprintf("dir %s, path holds %q", filepath.Base(dir), "new") {
		t.Errorf("synced:\n%s\nwant the temporary file while path holds the old bytes, then the directory once it holds the new ones", strings.Join(synced, "\n"))
	}
	// A sync that fails (a full disk, an I/O error) fails the write
	// before the rename: path keeps its old bytes, no temporary file stays.
	synced, failWith = nil, syscall.EIO
	if err := WriteFileAtomic(p, []byte("newer"), 0o644); !errors.Is(err, syscall.EIO) {
		t.Errorf("a failed sync: %v, want EIO", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" || len(synced) != 1 {
		t.Errorf("after a failed sync path holds %q (synced %q), want the old bytes and no rename", b, synced)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
}

// ReadFile reads regular files within the bound and refuses, at once and by
// name, what would block or never end: a named pipe with no writer,
// /dev/zero, a directory, a file over the bound.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "matrix.yaml")
	os.WriteFile(p, []byte("schema: 1\n"), 0o644)
	if b, err := ReadFile(p, 10); err != nil || string(b) != "schema: 1\n" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if _, err := ReadFile(p, 9); err == nil || !strings.Contains(err.Error(), "more than the 9") {
		t.Errorf("a 10-byte file under a 9-byte bound: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "zero")
	os.Symlink("/dev/zero", link)
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct{ path, want string }{
		{fifo, "a named pipe"},
		{"/dev/zero", "a character device"},
		{link, "a character device"},
		{dir, "a directory"},
		{sock, "a socket"},
	} {
		for _, open := range []struct {
			name string
			f    func(string) error
		}{
			{"ReadFile", func(p string) error { _, err := ReadFile(p, 1<<20); return err }},
			{"OpenRegular", func(p string) error {
				f, _, err := OpenRegular(p)
				if err == nil {
					f.Close()
				}
				return err
			}},
		} {
			done := make(chan error, 1)
			go func() { done <- open.f(c.path) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
					t.Errorf("%s(%s) = %v, want an error naming it %s", open.name, c.path, err, c.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s(%s) still blocked after 5 s", open.name, c.path)
			}
		}
	}
	if f, fi, err := OpenRegular(p); err != nil || fi.Size() != 10 {
		t.Errorf("OpenRegular(%s) = %v, %v", p, fi, err)
	} else {
		f.Close()
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

// RemoveStale removes what a process that no longer runs left, never what
// a running one (this one, or the test's parent) is making, nor other names.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	mine, err := MkdirTempOwned(dir, ".build-")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{".build-999999999-x", fmt.Sprintf(".build-%d-y", os.Getppid()), ".build-discard-z", "other-999999999-w"} {
		os.Mkdir(filepath.Join(dir, n), 0o755)
	}
	gone := RemoveStale(dir, ".build-")
	if len(gone) != 1 || gone[0] != ".build-999999999-x" {
		t.Errorf("removed %v, want only the dead process's", gone)
	}
	for _, keep := range []string{filepath.Base(mine), fmt.Sprintf(".build-%d-y", os.Getppid()), ".build-discard-z", "other-999999999-w"} {
		if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("%s was removed", keep)
		}
	}
}
