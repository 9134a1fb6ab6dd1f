package scan

import (
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNativeTriple: an LLVM triple is the target's when its architecture
// is one of the ISA's names for it and its OS is the ISA's.
func TestNativeTriple(t *testing.T) {
	p := policy(t, "kunpeng920")
	for triple, want := range map[string]bool{
		"aarch64-unknown-linux-gnu": true,
		"aarch64-linux-gnu":         true,
		"arm64-unknown-linux-gnu":   true,
		"x86_64-pc-linux-gnu":       false,
		"aarch64_be-linux-gnu":      false,
		"arm64_32-apple-watchos":    false,
		"arm64-apple-macosx13.0.0":  false,
		"aarch64-unknown-windows":   false,
		"aarch64":                   false,
		"":                          false,
	} {
		if got := p.NativeTriple(triple); got != want {
			t.Errorf("%q: NativeTriple = %v, want %v", triple, got, want)
		}
	}
	if !(&Policy{}).NativeTriple("x86_64-pc-linux-gnu") {
		t.Error("a policy without LLVM names checks triples")
	}
}

// TestBitcodeTripleDamaged: the bitstream reader takes sizes and counts
// from the file. Real bitcode cut anywhere, or with bytes changed, is read
// quickly, without a panic, to its triple or to nothing.
func TestBitcodeTripleDamaged(t *testing.T) {
	need(t, "clang-16")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "f.c"), cFunc)
	if out, err := exec.Command("clang-16", "--target=aarch64-linux-gnu", "-flto=thin", "-g", "-c", filepath.Join(dir, "f.c"), "-o", filepath.Join(dir, "f.o")).CombinedOutput(); err != nil {
		t.Fatalf("clang: %v\n%s", err, out)
	}
	bc, err := os.ReadFile(filepath.Join(dir, "f.o"))
	if err != nil {
		t.Fatal(err)
	}
	if tr, err := bitcodeTriples(bc); err != nil || len(tr) != 1 || tr[0] != "aarch64-unknown-linux-gnu" {
		t.Fatalf("triples %q, %v", tr, err)
	}
	start := time.Now()
	for n := 0; n < len(bc); n++ {
		bitcodeTriples(bc[:n])
	}
	rng := rand.New(rand.NewSource(1))
	found := 0
	for i := 0; i < 5000; i++ {
		b := append([]byte{}, bc...)
		for k := 0; k < 1+rng.Intn(4); k++ {
			b[4+rng.Intn(len(b)-4)] = byte(rng.Intn(256))
		}
		if trs, err := bitcodeTriples(b); err == nil {
			found++
			for _, tr := range trs {
				for _, c := range []byte(tr) {
					if c < 0x20 || c > 0x7e {
						t.Fatalf("triple %q from damaged bitcode", tr)
					}
				}
			}
		}
	}
	t.Logf("%d cut and 5000 damaged copies of %d bytes in %v; %d damaged ones still gave a triple", len(bc), len(bc), time.Since(start), found)
}

func FuzzBitcodeTriple(f *testing.F) {
	dir := f.TempDir()
	src := filepath.Join(dir, "f.c")
	if err := os.WriteFile(src, []byte(cFunc), 0o644); err != nil {
		f.Fatal(err)
	}
	for _, target := range []string{"aarch64-linux-gnu", "x86_64-linux-gnu"} {
		out := filepath.Join(dir, target+".o")
		if exec.Command("clang-16", "--target="+target, "-flto=thin", "-c", src, "-o", out).Run() == nil {
			b, _ := os.ReadFile(out)
			f.Add(b)
		}
	}
	f.Add([]byte("BC\xc0\xde\x35\x14\x00\x00\x05\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		trs, err := bitcodeTriples(b)
		if err == nil && len(trs) == 0 {
			t.Fatal("no error and no triple")
		}
		for _, tr := range trs {
			if tr == "" || len(tr) > bcMaxTriple {
				t.Fatalf("triple %q", tr)
			}
		}
	})
}

// bcWriter writes a bitstream, for bitcode no compiler writes.
type bcWriter struct {
	b     []byte
	n     uint64 // bits written
	width []uint64
	start []uint64 // where each open block's length word is, in bits
}

func newBCWriter() *bcWriter {
	w := &bcWriter{width: []uint64{2}}
	w.fixed(0x42, 8)
	w.fixed(0x43, 8)
	w.fixed(0xc0, 8)
	w.fixed(0xde, 8)
	return w
}

func (w *bcWriter) fixed(v, n uint64) {
	for i := uint64(0); i < n; i++ {
		if w.n%8 == 0 {
			w.b = append(w.b, 0)
		}
		w.b[w.n/8] |= byte(v>>i&1) << (w.n % 8)
		w.n++
	}
}

func (w *bcWriter) vbr(v, n uint64) {
	for {
		chunk := v & (1<<(n-1) - 1)
		v >>= n - 1
		if v != 0 {
			chunk |= 1 << (n - 1)
		}
		w.fixed(chunk, n)
		if v == 0 {
			return
		}
	}
}

func (w *bcWriter) align32() {
	for w.n%32 != 0 {
		w.fixed(0, 1)
	}
}

func (w *bcWriter) enter(id, width uint64) {
	w.fixed(bcEnterSubblock, w.width[len(w.width)-1])
	w.vbr(id, 8)
	w.vbr(width, 4)
	w.align32()
	w.start = append(w.start, w.n)
	w.fixed(0, 32)
	w.width = append(w.width, width)
}

func (w *bcWriter) end() {
	w.fixed(bcEndBlock, w.width[len(w.width)-1])
	w.align32()
	at := w.start[len(w.start)-1]
	words := (w.n - at - 32) / 32
	for i := uint64(0); i < 32; i++ {
		w.b[(at+i)/8] |= byte(words>>i&1) << ((at + i) % 8)
	}
	w.start, w.width = w.start[:len(w.start)-1], w.width[:len(w.width)-1]
}

func (w *bcWriter) record(code uint64, ops ...uint64) {
	w.fixed(bcUnabbrevRecord, w.width[len(w.width)-1])
	w.vbr(code, 6)
	w.vbr(uint64(len(ops)), 6)
	for _, o := range ops {
		w.vbr(o, 6)
	}
}

func (w *bcWriter) str(code uint64, s string) {
	ops := make([]uint64, len(s))
	for i := range s {
		ops[i] = uint64(s[i])
	}
	w.record(code, ops...)
}

// defineChar6Array defines an abbreviation [literal code, array of char6]
// in the open block.
func (w *bcWriter) defineChar6Array(code uint64) {
	w.fixed(bcDefineAbbrev, w.width[len(w.width)-1])
	w.vbr(3, 5)
	w.fixed(1, 1)
	w.vbr(code, 8)
	w.fixed(0, 1)
	w.fixed(bcArray, 3)
	w.fixed(0, 1)
	w.fixed(bcChar6, 3)
}

// TestBitcodeTriples: what the reader takes from a module, on bitstreams
// written here: LLVM keeps a module's last triple (a decoy triple before
// the real one hid x86 bitcode as the target's); every module of a file
// counts; an abbreviated triple is read; a module without one, or a
// summary index, names no target; abbreviations defined for the module
// block in BLOCKINFO blocks are bounded in all, not per block.
func TestBitcodeTriples(t *testing.T) {
	module := func(w *bcWriter, body func()) {
		w.enter(bcModuleBlock, 3)
		w.record(1, 2) // VERSION
		body()
		w.end()
	}
	cases := []struct {
		name  string
		build func(w *bcWriter)
		want  []string
		err   error
	}{
		{"decoy first", func(w *bcWriter) {
			module(w, func() {
				w.str(bcTriple, "aarch64-unknown-linux-gnu")
				w.str(16, "f.c") // SOURCE_FILENAME
				w.str(bcTriple, "x86_64-pc-linux-gnu")
			})
		}, []string{"x86_64-pc-linux-gnu"}, nil},
		{"two modules", func(w *bcWriter) {
			module(w, func() { w.str(bcTriple, "aarch64-unknown-linux-gnu") })
			module(w, func() { w.str(bcTriple, "x86_64-pc-linux-gnu") })
		}, []string{"aarch64-unknown-linux-gnu", "x86_64-pc-linux-gnu"}, nil},
		{"abbreviated", func(w *bcWriter) {
			module(w, func() {
				w.defineChar6Array(bcTriple)
				w.fixed(bcFirstAbbrev, 3)
				w.vbr(uint64(len("arm64.apple.macos")), 6)
				for _, c := range "arm64.apple.macos" {
					w.fixed(uint64(strings.IndexRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._", c)), 6)
				}
			})
		}, []string{"arm64.apple.macos"}, nil},
		{"sub-blocks skipped", func(w *bcWriter) {
			module(w, func() {
				w.enter(17, 4) // TYPE_BLOCK_NEW
				w.str(bcTriple, "x86_64-pc-linux-gnu")
				w.end()
				w.str(bcTriple, "aarch64-unknown-linux-gnu")
			})
		}, []string{"aarch64-unknown-linux-gnu"}, nil},
		{"no triple", func(w *bcWriter) { module(w, func() {}) }, nil, errNoTriple},
		{"summary index", func(w *bcWriter) {
			w.enter(24, 3) // FULL_LTO_GLOBALVAL_SUMMARY_BLOCK
			w.record(1, 9)
			w.end()
		}, nil, errNoTriple},
		{"module not ended", func(w *bcWriter) {
			w.enter(bcModuleBlock, 3)
			w.str(bcTriple, "aarch64-unknown-linux-gnu")
			w.fixed(7, 3) // an abbreviation never defined
			w.end()
		}, nil, errBitcode},
		{"BLOCKINFO abbreviations past the bound", func(w *bcWriter) {
			for k := 0; k < 3; k++ {
				w.enter(bcBlockInfo, 2)
				w.record(bcSetBID, bcModuleBlock)
				for i := 0; i < bcMaxAbbrevs/2; i++ {
					w.defineChar6Array(99)
				}
				w.end()
			}
			module(w, func() { w.str(bcTriple, "aarch64-unknown-linux-gnu") })
		}, nil, errBitcode},
	}
	for _, c := range cases {
		w := newBCWriter()
		c.build(w)
		got, err := bitcodeTriples(w.b)
		if !errors.Is(err, c.err) || strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: %q, %v; want %q, %v", c.name, got, err, c.want, c.err)
		}
	}
}
