package isa

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
)

// llvmAttr maps our feature names to llvm-mc -mattr names.
var llvmAttr = map[string]string{
	"lse": "+lse", "rcpc": "+rcpc", "rcpc2": "+rcpc-immo", "crc": "+crc", "aes": "+aes", "sha2": "+sha2",
	"sha3": "+sha3", "sm4": "+sm4", "dotprod": "+dotprod", "fp16": "+fullfp16", "fp16fml": "+fp16fml",
	"rdm": "+rdm", "fcma": "+complxnum", "jscvt": "+jsconv", "frint": "+fptoint", "i8mm": "+i8mm",
	"bf16": "+bf16", "pauth": "+pauth", "mte": "+mte", "rng": "+rand", "sb": "+sb", "ssbs": "+ssbs",
	"flagm": "+flagm", "flagm2": "+altnzcv", "lor": "+lor", "ls64": "+ls64", "mops": "+mops", "hbc": "+hbc",
	"cssc": "+cssc", "wfxt": "+wfxt", "dpb": "+ccpp", "sve": "+sve", "sve2": "+sve2",
	"sve2-aes": "+sve2-aes", "sve2-bitperm": "+sve2-bitperm", "sve2-sha3": "+sve2-sha3", "sve2-sm4": "+sve2-sm4",
	"f32mm": "+f32mm", "f64mm": "+f64mm", "sme": "+sme",
	"sve2p1": "+sve2p1", "b16b16": "+sve2p1,+b16b16", "sme2": "+sme2", "sme2p1": "+sme2,+sme2p1",
}

const baseAttr = "+v8a,+neon,+fp-armv8"

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-deps.sh)", tool)
		}
	}
}

// llvmValid returns the words llvm-mc-16 decodes under mattr, with their mnemonic.
func llvmValid(t *testing.T, words []uint32, mattr string) map[uint32]string {
	t.Helper()
	var in strings.Builder
	for _, w := range words {
		fmt.Fprintf(&in, "0x%02x 0x%02x 0x%02x 0x%02x\n", w&0xff, w>>8&0xff, w>>16&0xff, w>>24)
	}
	cmd := exec.Command("llvm-mc-16", "--disassemble", "-triple=aarch64", "-show-encoding", "-mattr="+mattr)
	cmd.Stdin = strings.NewReader(in.String())
	out, _ := cmd.Output() // invalid words only warn on stderr
	valid := map[uint32]string{}
	for _, line := range strings.Split(string(out), "\n") {
		w, ok := MCEncoding(line)
		if !ok {
			continue
		}
		valid[w] = strings.TrimSpace(line[:strings.Index(line, "//")])
	}
	return valid
}

// generic are the mnemonics llvm-mc's base decoder prints for system
// instructions it does not know as aliases (they may still need a feature).
var generic = map[string]bool{"msr": true, "mrs": true, "sys": true, "sysl": true, "hint": true}

// oracle returns, per word, the set of features under which llvm-mc decodes
// it when the base v8.0 set does not ("" for base words; nil for words no
// single feature explains).
func oracle(t *testing.T, words []uint32) map[uint32]map[string]bool {
	// Deduplicate, decode the base set once, then ask per feature only about
	// what the base set leaves (and system words it prints generically).
	uniq := map[uint32]bool{}
	for _, w := range words {
		uniq[w] = true
	}
	all := make([]uint32, 0, len(uniq))
	for w := range uniq {
		all = append(all, w)
	}
	base := llvmValid(t, all, baseAttr)
	out := map[uint32]map[string]bool{}
	var rest []uint32
	for _, w := range all {
		b := base[w]
		if b != "" {
			out[w] = map[string]bool{"": true}
		}
		if b == "" || generic[strings.Fields(b)[0]] {
			rest = append(rest, w)
		}
	}
	words = rest
	for f, attr := range llvmAttr {
		extra := baseAttr + "," + attr
		if strings.HasPrefix(f, "sve2-") {
			extra += ",+sve2"
		}
		for w, mn := range llvmValid(t, words, extra) {
			if b := base[w]; b != "" {
				// A system instruction the base decoder prints generically
				// but the feature names (CFINV, SB, RNDR, DC CVAP…) needs it.
				if m := strings.Fields(b)[0]; generic[m] && m != "hint" && mn != b {
					// Every feature that names it (SMSTART: sme and sme2).
					if out[w][""] {
						out[w] = map[string]bool{}
					}
					out[w][f] = true
				}
				continue
			}
			if out[w] == nil {
				out[w] = map[string]bool{}
			}
			out[w][f] = true
		}
	}
	return out
}

func textWords(t *testing.T, path string) []uint32 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var words []uint32
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 {
			continue
		}
		d, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+4 <= len(d); i += 4 {
			words = append(words, binary.LittleEndian.Uint32(d[i:]))
		}
	}
	return words
}

// compare checks every word's classification against the oracle.
func compare(t *testing.T, words []uint32) (checked int) {
	t.Helper()
	truth := oracle(t, words)
	for _, w := range words {
		want, ok := truth[w]
		if !ok {
			continue // data or an encoding no single feature explains
		}
		feat, hint := Default().Classify(w)
		got := Default().Features[feat]
		if hint {
			got = "" // HINT space decodes as base (hint #n), and is harmless
		}
		checked++
		if want[got] {
			continue
		}
		t.Errorf("word %08x: classified %q, llvm-mc says %v", w, got, keys(want))
	}
	return checked
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestRulesUseMatrixNames(t *testing.T) {
	m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Default().Features[1:] {
		if _, ok := m.Extensions[f]; !ok {
			t.Errorf("rules.yaml feature %q is not an extension in matrix.yaml", f)
		}
	}
	if _, err := ParseWithGroups("x.yaml", []byte("schema: 1\nrules:\n  - {feature: sve, mask: 0x1, value: 0x3}\n"), nil); err == nil || !strings.Contains(err.Error(), "x.yaml:3:5") {
		t.Errorf("bad rule accepted: %v", err)
	}
}

// TestProbeAgainstLLVM assembles one instruction of every extension and
// checks each word against llvm-mc's decoding, instruction by instruction.
func TestProbeAgainstLLVM(t *testing.T) {
	need(t, "llvm-mc-16")
	obj := filepath.Join(t.TempDir(), "probe.o")
	attrs := []string{"+v9.4a"}
	for _, a := range llvmAttr {
		attrs = append(attrs, a)
	}
	out, err := exec.Command("llvm-mc-16", "-triple=aarch64-linux-gnu", "-filetype=obj", "-mattr="+strings.Join(attrs, ","),
		filepath.Join("testdata", "probe.S"), "-o", obj).CombinedOutput()
	if err != nil {
		t.Fatalf("assemble: %v %s", err, out)
	}
	words := textWords(t, obj)
	if n := compare(t, words); n != len(words) || n < 90 {
		t.Errorf("checked %d of %d words", n, len(words))
	}
	// And the probe really covers the features.
	seen := map[string]bool{}
	for _, w := range words {
		f, _ := Default().Classify(w)
		seen[Default().Features[f]] = true
	}
	for _, f := range Default().Features[1:] {
		if !seen[f] {
			t.Errorf("probe has no %s instruction", f)
		}
	}
}

// TestCompiledCodeAgainstLLVM compiles C the compilers vectorise and
// atomicise for several -march values and checks every word of .text.
func TestCompiledCodeAgainstLLVM(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs real compilers and llvm-objdump (make test runs it)")
	}
	need(t, "llvm-mc-16", "clang-16", "aarch64-linux-gnu-gcc")
	src := filepath.Join(t.TempDir(), "k.c")
	os.WriteFile(src, []byte(`
#include <stdint.h>
#include <stddef.h>
int64_t counter;
void add(int64_t v) { __atomic_fetch_add(&counter, v, __ATOMIC_ACQ_REL); }
int64_t load(void) { return __atomic_load_n(&counter, __ATOMIC_ACQUIRE); }
int cas(int64_t *p, int64_t a, int64_t b) { return __atomic_compare_exchange_n(p, &a, b, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); }
void saxpy(float *y, const float *x, float a, size_t n) { for (size_t i = 0; i < n; i++) y[i] += a * x[i]; }
int32_t dot(const int8_t *a, const int8_t *b, size_t n) { int32_t s = 0; for (size_t i = 0; i < n; i++) s += a[i] * b[i]; return s; }
void hadd(_Float16 *y, const _Float16 *x, size_t n) { for (size_t i = 0; i < n; i++) y[i] += x[i] * x[i]; }
uint32_t crc(uint32_t c, const uint8_t *p, size_t n) { for (size_t i = 0; i < n; i++) c = __builtin_aarch64_crc32b(c, p[i]); return c; }
`), 0o644)
	cases := [][]string{
		{"aarch64-linux-gnu-gcc", "-march=armv8-a+crc"},
		{"aarch64-linux-gnu-gcc", "-march=armv8.2-a+crypto+fp16+dotprod"},
		{"aarch64-linux-gnu-gcc", "-march=armv8.4-a+sve"},
		{"clang-16", "--target=aarch64-linux-gnu", "-mcpu=neoverse-n1"},
		{"clang-16", "--target=aarch64-linux-gnu", "-march=armv9-a+sve2+i8mm+bf16"},
	}
	total := 0
	for _, c := range cases {
		obj := filepath.Join(t.TempDir(), "k.o")
		src2 := src
		if strings.HasPrefix(c[0], "clang") {
			// clang spells the CRC builtin differently.
			data, _ := os.ReadFile(src)
			src2 = filepath.Join(t.TempDir(), "k.c")
			os.WriteFile(src2, []byte(strings.Replace(string(data), "__builtin_aarch64_crc32b", "__builtin_arm_crc32b", 1)), 0o644)
		}
		args := append(append([]string{}, c[1:]...), "-O3", "-c", src2, "-o", obj)
		if out, err := exec.Command(c[0], args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
		total += compare(t, textWords(t, obj))
	}
	if total < 500 {
		t.Errorf("only %d words checked", total)
	}
}

func word(w uint32) []byte { b := make([]byte, 4); binary.LittleEndian.PutUint32(b, w); return b }

// TestLiteralPoolsAreData: a word an LDR (literal) loads is data, even when it
// looks like SVE (Go's runtime has such pools).
func TestLiteralPoolsAreData(t *testing.T) {
	var code []byte
	code = append(code, word(0x58000040)...) // ldr x0, #8 (loads the next-but-one word, 8 bytes)
	code = append(code, word(0xd65f03c0)...) // ret
	code = append(code, word(0x04000028)...) // pool: looks like SVE
	code = append(code, word(0x00000000)...)
	code = append(code, word(0x04e0e3e0)...) // cntd x0: real SVE code after the pool
	res := Default().Scan([]Code{{Data: code, Addr: 0x1000}})
	sve := Default().Feature("sve")
	if res.Counts[sve] != 1 || len(res.Hits) != 1 || res.Hits[0].Addr != 0x1010 {
		t.Errorf("sve count %d, hits %+v; want only the cntd at 0x1010", res.Counts[sve], res.Hits)
	}
	// Skip ranges ($d mapping symbols) are not classified either.
	res = Default().Scan([]Code{{Data: code, Addr: 0x1000, Skip: [][2]uint64{{0x1010, 0x1014}}}})
	if res.Counts[sve] != 0 {
		t.Errorf("skipped word counted: %+v", res.Hits)
	}
}

func TestGuardPatterns(t *testing.T) {
	for name, want := range map[string]bool{"__aarch64_ldadd8_acq_rel": true, "execute_stack_op": true, "uw_update_context_1": true, "memcpy": false} {
		if got := Default().GuardFor(name, "lse") != "" || Default().GuardFor(name, "sve") != ""; got != want {
			t.Errorf("%s: guarded %v", name, got)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add(uint32(0x04e0e3e0), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint32(0x58000040), []byte{0x40, 0, 0, 0x58, 0xc0, 3, 0x5f, 0xd6})
	f.Fuzz(func(t *testing.T, w uint32, code []byte) {
		feat, _ := Default().Classify(w)
		if int(feat) >= len(Default().Features) {
			t.Fatalf("feature id %d out of range", feat)
		}
		res := Default().Scan([]Code{{Data: code, Addr: uint64(w) &^ 3}})
		if res.Words != uint64(len(code)/4) {
			t.Fatalf("words %d for %d bytes", res.Words, len(code))
		}
	})
}

// BenchmarkScan classifies glibc's code, repeated to 64 MiB.
func BenchmarkScan(b *testing.B) {
	f, err := elf.Open("/usr/aarch64-linux-gnu/lib/libc.so.6")
	if err != nil {
		b.Skip(err)
	}
	text, _ := f.Section(".text").Data()
	f.Close()
	code := make([]byte, 0, 64<<20)
	for len(code)+len(text) <= cap(code) {
		code = append(code, text...)
	}
	b.SetBytes(int64(len(code)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Default().Scan([]Code{{Data: code, Addr: 0x10000}})
	}
}

func TestMCEncoding(t *testing.T) {
	for _, c := range []struct {
		line string
		want uint32
		ok   bool
	}{
		{"\tmov\tx0, #1024                       // encoding: [0x00,0x80,0x80,0xd2]", 0xd2808000, true},
		{"\tfmla\tz0.s, p0/m, z1.s, z2.s        // encoding: [0x20,0x00,0xa2,0x65]", 0x65a20020, true},
		{"\t.text", 0, false},
		{"// encoding: [0x00,0x80]", 0, false},
		{"// encoding: [0x00,0x80,0x80,0xzz]", 0, false},
		{"// encoding: [0x00,0x80,0x80,0xd2", 0, false},
	} {
		w, ok := MCEncoding(c.line)
		if w != c.want || ok != c.ok {
			t.Errorf("MCEncoding(%q) = %#x, %v; want %#x, %v", c.line, w, ok, c.want, c.ok)
		}
	}
}

// TestDispatchedTable: every known runtime-dispatched entry carries its
// package and evidence; an entry without them is refused with its line.
func TestDispatchedTable(t *testing.T) {
	for _, g := range Default().Guarded {
		if g.Package == "" || g.Evidence == "" || g.Why == "" {
			t.Errorf("entry %q/%q lacks package, evidence or why", g.Match, g.Soname)
		}
	}
	tb, err := ParseWithGroups("rules.yaml", []byte("schema: 1\nrules: []\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := "schema: 1\ndispatched:\n  - {match: \"foo_*\", why: \"checks a flag\"}\n  - {soname: \"libx.so\", why: w, package: x, evidence: y, match: z}\n"
	err = tb.LoadDispatched("dispatched.yaml", []byte(bad))
	if err == nil || !strings.Contains(err.Error(), "dispatched.yaml:3:") || !strings.Contains(err.Error(), "evidence are required") || !strings.Contains(err.Error(), "exactly one of match and soname") {
		t.Errorf("bad table: %v", err)
	}
	if err := tb.LoadDispatched("dispatched.yaml", []byte("schema: 2\ndispatched: []\n")); err == nil {
		t.Error("schema 2 accepted")
	}
}

// TestSVECntpIsNotSVE21: SVE's CNTP (predicate count, in every SVE
// compiler's output: vectorscan's graviton3 build) and SVE2.1's CNTP (a
// predicate-as-counter form) differ only in bit 9. A group key without
// that bit called Graviton 3's SVE code SVE2.1 and refused the build.
func TestSVECntpIsNotSVE21(t *testing.T) {
	tab := Default()
	for _, c := range []struct {
		w    uint32
		asm  string
		want string
	}{
		{0x25208028, "cntp x8, p0, p1.b", "sve"},
		{0x25a08c20, "cntp x0, p3, p1.s", "sve"},
		{0x25208308, "cntp x8, pn8.b, vlx2", "sve2p1"},
	} {
		if f, _ := tab.Classify(c.w); tab.Features[f] != c.want {
			t.Errorf("%#08x (%s) classified %q, want %q", c.w, c.asm, tab.Features[f], c.want)
		}
	}
}
