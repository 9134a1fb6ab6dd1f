package scan

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
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
	if tr, ok := bitcodeTriple(bc); !ok || tr != "aarch64-unknown-linux-gnu" {
		t.Fatalf("triple %q, %v", tr, ok)
	}
	start := time.Now()
	for n := 0; n < len(bc); n++ {
		bitcodeTriple(bc[:n])
	}
	rng := rand.New(rand.NewSource(1))
	found := 0
	for i := 0; i < 5000; i++ {
		b := append([]byte{}, bc...)
		for k := 0; k < 1+rng.Intn(4); k++ {
			b[4+rng.Intn(len(b)-4)] = byte(rng.Intn(256))
		}
		if tr, ok := bitcodeTriple(b); ok {
			found++
			for _, c := range []byte(tr) {
				if c < 0x20 || c > 0x7e {
					t.Fatalf("triple %q from damaged bitcode", tr)
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
		if tr, ok := bitcodeTriple(b); ok && (tr == "" || len(tr) > bcMaxTriple) {
			t.Fatalf("triple %q", tr)
		}
	})
}
