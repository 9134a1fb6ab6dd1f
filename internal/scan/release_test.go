package scan

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// load maps a mapped file's pages in; memory that is not a mapped file gets
// no loader.
func TestLoad(t *testing.T) {
	if load(make([]byte, 1<<20)) != nil {
		t.Error("load of heap memory: want no loader")
	}
	path := filepath.Join(t.TempDir(), "code")
	if err := os.WriteFile(path, make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, done, err := mapFile(f)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	l := load(data)
	if l == nil {
		t.Fatal("load of a mapped file: no loader")
	}
	start := uintptr(unsafe.Pointer(&data[0]))
	before := rssAt(t, start)
	l(4096+100, 3<<20) // pages 1 to 767 (the page of byte 4196 on)
	after := rssAt(t, start)
	t.Logf("resident: %d kB before, %d kB after loading [4196, 3 MB)", before, after)
	if before != 0 {
		t.Skipf("%d kB of a fresh mapping already resident: cannot tell what load does", before)
	}
	if after == 0 && !populates(t, f) {
		t.Skip("madvise does not map pages in here (before Linux 5.14, or under qemu-user)")
	}
	// Pages 1 to 767 at least. The kernel may map more: it maps a large
	// folio of the page cache whole.
	if after < 3<<10-4 {
		t.Errorf("%d kB resident after loading [4196, 3 MB), want at least %d (pages 1 to 767)", after, 3<<10-4)
	}
}

// populates says whether madvise(MADV_POPULATE_READ) maps in pages of f
// here, asked directly.
func populates(t *testing.T, f *os.File) bool {
	b, err := syscall.Mmap(int(f.Fd()), 0, 1<<20, syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	_ = syscall.Madvise(b, madvPopulateRead)
	return rssAt(t, uintptr(unsafe.Pointer(&b[0]))) > 0
}

// rssAt returns the Rss, in kB, of the mapping that starts at start.
func rssAt(t *testing.T, start uintptr) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if lo, _, ok := strings.Cut(f[0], "-"); ok && len(f) >= 5 {
			s, err := strconv.ParseUint(lo, 16, 64)
			in = err == nil && uintptr(s) == start
			continue
		}
		if in && len(f) == 3 && f[0] == "Rss:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("no mapping at %#x in /proc/self/smaps", start)
	return 0
}
