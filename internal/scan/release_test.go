package scan

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/dorisarm/dorisarm/internal/isa"
)

// mapTemp maps a temporary file holding b.
func mapTemp(t *testing.T, b []byte) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mapped")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	data, done, err := mapFile(f)
	f.Close() // the mapping keeps its own descriptor
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	return data
}

// reader reads a mapped file's bytes from the file, after the caller closed
// it; memory that is not a mapped file gets no reader; a read past the end
// says so.
func TestReader(t *testing.T) {
	if reader(make([]byte, 1<<20)) != nil {
		t.Error("reader of heap memory: want none")
	}
	content := make([]byte, 300<<10)
	for i := range content {
		content[i] = byte(i * 7)
	}
	data := mapTemp(t, content)
	part := data[1000 : 200<<10] // a section of the file
	read := reader(part)
	if read == nil {
		t.Fatal("reader of a mapped file: none")
	}
	dst := make([]byte, 4096)
	if !read(dst, 5000) || !bytes.Equal(dst, content[6000:6000+4096]) {
		t.Error("read at 5000 of the section: not the file's bytes 6000 on")
	}
	if read(dst, len(data)-1000-100) {
		t.Error("a read past the file's end: want false")
	}
}

// containsEach finds needles in a mapped file, read in pieces, wherever they
// lie: across a piece's end, at the very start and end; and agrees with
// containsAt on random placements.
func TestContainsEach(t *testing.T) {
	put := func(b []byte, at int, s string) { copy(b[at:], s) }
	n := 3*pieceBytes + 123
	cases := []struct {
		name string
		at   map[string]int
		want bool
	}{
		{"both across piece ends", map[string]int{"OpenSSL ": pieceBytes - 3, "EVP_": 2*pieceBytes - 1}, true},
		{"at the start and the end", map[string]int{"OpenSSL ": 0, "EVP_": n - 4}, true},
		{"one missing", map[string]int{"OpenSSL ": pieceBytes - 7}, false},
		{"neither", nil, false},
	}
	for _, c := range cases {
		b := make([]byte, n)
		for s, at := range c.at {
			put(b, at, s)
		}
		data := mapTemp(t, b)
		if reader(data) == nil {
			t.Fatal("not mapped")
		}
		if got := containsEach(data, needle{"OpenSSL ", 0}, needle{"EVP_", 1}); got != c.want {
			t.Errorf("%s: containsEach = %v, want %v", c.name, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 40 {
		b := make([]byte, 2*pieceBytes+rng.IntN(pieceBytes))
		for range rng.IntN(3) {
			put(b, rng.IntN(len(b)-8), []string{"OpenSSL ", "EVP_", "OpenSS", "VP_"}[rng.IntN(4)])
		}
		want := containsAt(b, "OpenSSL ", 0) && containsAt(b, "EVP_", 1)
		if got := containsEach(mapTemp(t, b), needle{"OpenSSL ", 0}, needle{"EVP_", 1}); got != want {
			t.Errorf("random case %d: containsEach = %v, containsAt = %v", iter, got, want)
		}
	}
}

// A mapped file that shrinks while it is scanned is reported unreadable,
// not a crash: the classifier's workers, the linking checks and the walker
// fault on the pages past the new end, and each fault is recovered.
func TestShrunkWhileScanned(t *testing.T) {
	elf := tinyELF()
	const size = 4 << 20 // several chunks: the classifier runs workers
	big := make([]byte, size)
	copy(big, elf)
	le := binary.LittleEndian
	le.PutUint64(big[64+32:], size) // PT_LOAD: the whole file
	le.PutUint64(big[64+40:], size)
	for i := 0x200; i < size; i += 4 {
		le.PutUint32(big[i:], 0xd503201f) // nop
	}
	path := filepath.Join(t.TempDir(), "libshrinks.so")
	if err := os.WriteFile(path, big, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, procs := range []int{1, 2, 4} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		data, done, err := mapFile(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		// The file now ends after its first 64 KiB: every later page of the
		// mapping faults, and reads from the file come back short.
		if err := os.Truncate(path, 64<<10); err != nil {
			t.Fatal(err)
		}
		old := runtime.GOMAXPROCS(procs)
		a := analyzeELF(path, data, nil, isa.Default)
		runtime.GOMAXPROCS(old)
		done()
		if len(a.findings) != 1 || a.findings[0].Kind != KindUnreadable || a.findings[0].Detail != changedDetail {
			t.Errorf("%d CPUs: findings %+v, want one unreadable finding: %q", procs, a.findings, changedDetail)
		}
		if err := os.WriteFile(path, big, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
