// Package memo remembers what a program printed when what it prints depends
// only on content: a compiler's --version by the digest of its binary, a
// tree's vars.sh as bash evaluates it by the digests of the files it reads.
// Planning reads these answers instead of starting the programs again, so a
// plan on a warm machine starts no process at all.
//
// A memo is a cache: an entry is written atomically once the program has
// succeeded, failures are not remembered, and losing the directory costs one
// run of each program.
package memo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dorisarm/dorisarm/internal/fsutil"
)

// MaxOutput bounds a remembered output (and what is read back).
const MaxOutput = 16 << 20

// Dir is a memo directory; the empty Dir remembers nothing.
type Dir string

// Key is the digest of the parts that decide an output: the program's
// content digest, its arguments, the digests of the files it reads. Parts
// are length-prefixed, so no two lists share a key.
func Key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (d Dir) path(key string) string {
	return filepath.Join(string(d), key[:2], key)
}

// Get returns the output remembered under key.
func (d Dir) Get(key string) ([]byte, bool) {
	if d == "" || len(key) < 2 {
		return nil, false
	}
	f, err := os.Open(d.path(key))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxOutput+1))
	if err != nil || len(b) > MaxOutput {
		return nil, false
	}
	return b, true
}

// Put remembers out under key. A memo that cannot be written is no error:
// the program runs again next time.
func (d Dir) Put(key string, out []byte) {
	if d == "" || len(key) < 2 || len(out) > MaxOutput {
		return
	}
	p := d.path(key)
	if os.MkdirAll(filepath.Dir(p), 0o755) == nil {
		_ = fsutil.WriteFileAtomic(p, out, 0o644)
	}
}

// Output returns the output remembered under key, or runs run and
// remembers what it returns when it succeeds.
func (d Dir) Output(key string, run func() ([]byte, error)) ([]byte, error) {
	if b, ok := d.Get(key); ok {
		return b, nil
	}
	b, err := run()
	if err != nil {
		return nil, err
	}
	d.Put(key, b)
	return b, nil
}
