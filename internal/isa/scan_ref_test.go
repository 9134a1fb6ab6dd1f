package isa

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

// refClassify is Classify done the long way: the rules in file order, no
// key table. unallocated reports a word a refinement group calls data.
func refClassify(t *Table, w uint32) (feat uint8, hint, unallocated bool) {
	for _, r := range t.rules {
		if w&r.mask != r.value {
			continue
		}
		if r.group != nil {
			f := r.group.lookup(w)
			return f, false, f == 0
		}
		return r.feat, r.hint, false
	}
	return 0, false, false
}

// refLiteral returns the addresses an LDR (literal) word at pc loads, as
// the Arm ARM's load-register-literal table says (opc, V): LDR Wt 4 bytes,
// LDR Xt 8, LDRSW 4, LDR St 4, LDR Dt 8, LDR Qt 16; PRFM loads nothing.
func refLiteral(w uint32, pc uint64) []uint64 {
	if w&0x3b000000 != 0x18000000 {
		return nil
	}
	size := map[[2]uint32]uint64{{0, 0}: 4, {1, 0}: 8, {2, 0}: 4, {0, 1}: 4, {1, 1}: 8, {2, 1}: 16}[[2]uint32{w >> 30, w >> 26 & 1}]
	off := int64(w>>5&0x7ffff) * 4
	if off >= 1<<20 {
		off -= 1 << 21
	}
	var out []uint64
	for k := uint64(0); k < size; k += 4 {
		out = append(out, pc+uint64(off)+k)
	}
	return out
}

// refScan is Scan done word by word, one region after another, as Code and
// Result document it.
func refScan(t *Table, regions []Code) *Result {
	res := &Result{Counts: make([]uint64, len(t.Features)), Hints: make([]uint64, len(t.Features))}
	skipped := func(r Code, a uint64) bool {
		for _, s := range r.Skip {
			if s[0] <= a && a < s[1] {
				return true
			}
		}
		return false
	}
	// Words an LDR (literal) of the same region loads are data.
	lit := map[uint64]bool{}
	for _, r := range regions {
		n := uint64(len(r.Data) / 4)
		for i := uint64(0); i < n; i++ {
			a := r.Addr + 4*i
			if skipped(r, a) {
				continue
			}
			// A load that starts in the region loads data, even past its end.
			if x := refLiteral(binary.LittleEndian.Uint32(r.Data[4*i:]), a); len(x) > 0 && x[0] >= r.Addr && x[0] < r.Addr+4*n {
				for _, a := range x {
					lit[a] = true
				}
			}
		}
	}
	for _, r := range regions {
		for i := 0; i+4 <= len(r.Data); i += 4 {
			res.Words++
			a := r.Addr + uint64(i)
			if skipped(r, a) {
				res.Data++
				continue
			}
			feat, hint, unalloc := refClassify(t, binary.LittleEndian.Uint32(r.Data[i:]))
			switch {
			case unalloc:
				res.Data++
			case feat == 0:
				res.Counts[0]++
			case hint:
				res.Hints[feat]++
			case lit[a]:
				res.Data++
			default:
				res.Counts[feat]++
				res.Hits = append(res.Hits, Hit{Addr: a, Feature: feat})
			}
		}
	}
	sort.SliceStable(res.Hits, func(i, j int) bool { return res.Hits[i].Addr < res.Hits[j].Addr })
	return res
}

// sameScan runs Scan (with 1, 2 and 5 workers, each reading Data itself and
// through a Read function) and refScan and reports the first difference.
// Release must cover each classified byte exactly once, and so must Read.
func sameScan(t *testing.T, name string, tb *Table, regions []Code) {
	t.Helper()
	want := refScan(tb, regions)
	for _, procs := range []int{1, 2, 5} {
		for _, reads := range []string{"", "read", "read, every third fails"} {
			released := make([][][2]int, len(regions))
			read := make([][][2]int, len(regions))
			rs := slices.Clone(regions)
			// Read and Release may be called from several workers at
			// once: serialise.
			var mu sync.Mutex
			for i := range rs {
				rs[i].Release = func(lo, hi int) {
					mu.Lock()
					released[i] = append(released[i], [2]int{lo, hi})
					mu.Unlock()
				}
				if reads == "" {
					continue
				}
				rs[i].Read = func(dst []byte, off int) bool {
					mu.Lock()
					defer mu.Unlock()
					read[i] = append(read[i], [2]int{off, off + len(dst)})
					if reads != "read" && len(read[i])%3 == 0 {
						// A failed read may have written part of dst.
						for k := range dst {
							dst[k] = 0xff
						}
						return false
					}
					copy(dst, regions[i].Data[off:])
					return true
				}
			}
			old := runtime.GOMAXPROCS(procs)
			got := tb.Scan(rs)
			runtime.GOMAXPROCS(old)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, %d workers, %q: %s", name, procs, reads, diffResult(tb, got, want))
			}
			for i, r := range regions {
				covers(t, fmt.Sprintf("%s region %d: released", name, i), released[i], len(r.Data)/4*4)
				if reads != "" {
					covers(t, fmt.Sprintf("%s region %d: read", name, i), read[i], len(r.Data)/4*4)
				}
			}
		}
	}
}

// covers fails unless the ranges, in any order, cover [0, n) once.
func covers(t *testing.T, what string, ranges [][2]int, n int) {
	t.Helper()
	slices.SortFunc(ranges, func(a, b [2]int) int { return a[0] - b[0] })
	at := 0
	for _, x := range ranges {
		if x[0] != at || x[1] <= x[0] {
			t.Fatalf("%s %v: not one run of [0, %d)", what, ranges, n)
		}
		at = x[1]
	}
	if at != n {
		t.Fatalf("%s up to %d of %d bytes", what, at, n)
	}
}

func diffResult(tb *Table, got, want *Result) string {
	switch {
	case got.Words != want.Words || got.Data != want.Data:
		return fmt.Sprintf("words/data %d/%d, reference %d/%d", got.Words, got.Data, want.Words, want.Data)
	case !slices.Equal(got.Counts, want.Counts):
		return fmt.Sprintf("counts %v, reference %v (features %v)", got.Counts, want.Counts, tb.Features)
	case !slices.Equal(got.Hints, want.Hints):
		return fmt.Sprintf("hints %v, reference %v", got.Hints, want.Hints)
	case len(got.Hits) != len(want.Hits):
		return fmt.Sprintf("%d hits, reference %d", len(got.Hits), len(want.Hits))
	}
	for i := range got.Hits {
		if got.Hits[i] != want.Hits[i] {
			return fmt.Sprintf("hit %d: %+v, reference %+v", i, got.Hits[i], want.Hits[i])
		}
	}
	return fmt.Sprintf("nil and empty differ: hits %v / %v", got.Hits == nil, want.Hits == nil)
}

// TestKeyTable: for every key, the rules the key table offers are exactly
// those whose fixed bits in 31:21 and 15:10 agree with it, in file order,
// and the mark (with bit 4) is set exactly for the words some of them may
// match and for LDR (literal) words.
func TestKeyTable(t *testing.T) {
	tb := Default()
	for k := uint32(0); k < 1<<17; k++ {
		w := k>>6<<21 | (k&0x3f)<<10
		var want []compiled
		for _, r := range tb.rules {
			if (w^r.value)&r.mask&0xffe0fc00 == 0 {
				want = append(want, r)
			}
		}
		got := tb.candidates(w)
		if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("key %#x (word %08x): %d candidates, want %d", k, w, len(got), len(want))
		}
		for _, w := range []uint32{w, w | 0x10} {
			may := w&0x3b000000 == 0x18000000
			for _, r := range want {
				may = may || (w^r.value)&r.mask&0xffe0fc10 == 0
			}
			if tb.marked(w) != may {
				t.Fatalf("word %08x: marked %v, but may match a rule or be a literal load: %v", w, tb.marked(w), may)
			}
		}
	}
}

// TestClassifyMatchesReference: Classify (through the key table) equals the
// rule-by-rule reference on random words and on every word of glibc.
func TestClassifyMatchesReference(t *testing.T) {
	tb := Default()
	rng := rand.New(rand.NewSource(1))
	words := make([]uint32, 0, 1<<21)
	for range 1 << 20 {
		words = append(words, rng.Uint32())
	}
	if code := textOf(t, "/usr/aarch64-linux-gnu/lib/libc.so.6"); code != nil {
		for i := 0; i+4 <= len(code); i += 4 {
			words = append(words, binary.LittleEndian.Uint32(code[i:]))
		}
	}
	for _, w := range words {
		f, h := tb.Classify(w)
		rf, rh, _ := refClassify(tb, w)
		if f != rf || h != rh {
			t.Fatalf("word %08x: Classify %d/%v, reference %d/%v", w, f, h, rf, rh)
		}
	}
}

func textOf(t testing.TB, path string) []byte {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	s := f.Section(".text")
	if s == nil {
		t.Fatalf("%s: no .text", path)
	}
	d, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// execSegments returns a file's executable PT_LOAD segments as regions, as
// internal/scan hands them to Scan, with the non-executable sections inside
// them (dynamic symbols, strings, relocations, read-only data) as Skip
// ranges, and the bytes of executable sections.
func execSegments(t testing.TB, path string) (regions []Code, code int64) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, 0
	}
	defer f.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		r := Code{Data: raw[p.Off : p.Off+p.Filesz], Addr: p.Vaddr}
		for _, s := range f.Sections {
			if s.Addr < p.Vaddr || s.Addr+s.Size > p.Vaddr+p.Filesz || s.Type == elf.SHT_NOBITS || s.Size == 0 {
				continue
			}
			if s.Flags&elf.SHF_EXECINSTR != 0 {
				code += int64(s.Size)
				continue
			}
			r.Skip = append(r.Skip, [2]uint64{s.Addr, s.Addr + s.Size})
		}
		regions = append(regions, r)
	}
	return regions, code
}

var benchLibs = filepath.Join("..", "..", ".cache", "bench", "x", "usr", "lib", "aarch64-linux-gnu")

// randomSkip returns n [start, end) ranges in and around a region: some
// overlapping, some empty or unaligned, in no order.
func randomSkip(rng *rand.Rand, addr uint64, size, n int) [][2]uint64 {
	var out [][2]uint64
	for range n {
		lo := addr + uint64(rng.Intn(size+64)) - 32
		hi := lo + uint64(rng.Intn(1+rng.Intn(4096)))
		out = append(out, [2]uint64{lo, hi})
	}
	return out
}

// TestScanMatchesReference compares Scan with refScan on real code (glibc,
// and the bench libraries when make bench-scan has fetched them), with and
// without random Skip ranges.
func TestScanMatchesReference(t *testing.T) {
	tb := Default()
	rng := rand.New(rand.NewSource(2))
	files := []string{"/usr/aarch64-linux-gnu/lib/libc.so.6", "/usr/lib/aarch64-linux-gnu/libcrypto.so.3"}
	if !testing.Short() {
		files = append(files, filepath.Join(benchLibs, "librocksdb.so.7.8"), filepath.Join(benchLibs, "libLLVM-16.so.1"))
	}
	checked := 0
	for _, path := range files {
		regions, _ := execSegments(t, path)
		if regions == nil {
			t.Logf("%s: absent, not compared", path)
			continue
		}
		checked++
		sameScan(t, path+" without skips", tb, withoutSkips(regions))
		sameScan(t, path, tb, regions)
		for i := range regions {
			regions[i].Skip = randomSkip(rng, regions[i].Addr, len(regions[i].Data), 40)
		}
		sameScan(t, path+" with skips", tb, regions)
	}
	if checked == 0 {
		t.Skip("no arm64 libraries installed (scripts/install-deps.sh)")
	}
}

// TestScanRandomMatchesReference compares Scan with refScan on random
// regions: random words, glibc's words, LDR (literal) words that load from
// nearby, at unaligned and chunk-straddling addresses, with odd lengths,
// overlapping regions and random Skip ranges.
func TestScanRandomMatchesReference(t *testing.T) {
	tb := Default()
	libc := textOf(t, "/usr/aarch64-linux-gnu/lib/libc.so.6")
	rng := rand.New(rand.NewSource(3))
	for iter := range 60 {
		var regions []Code
		for range 1 + rng.Intn(4) {
			size := rng.Intn(64)
			if rng.Intn(3) == 0 {
				size = rng.Intn(3 * chunkBytes)
			}
			data := make([]byte, size)
			for i := 0; i+4 <= size; i += 4 {
				var w uint32
				switch x := rng.Intn(10); {
				case x < 3 && len(libc) >= 4:
					j := rng.Intn(len(libc)/4) * 4
					w = binary.LittleEndian.Uint32(libc[j:])
				case x < 5:
					// LDR (literal) of every size, loading from up to 64 words away.
					w = uint32(rng.Intn(4))<<30 | 0x18000000 | uint32(rng.Intn(2))<<26 | uint32(rng.Intn(129)-64)&0x7ffff<<5 | uint32(rng.Intn(32))
				default:
					w = rng.Uint32()
				}
				binary.LittleEndian.PutUint32(data[i:], w)
			}
			if size%4 != 0 {
				data[size-1] = byte(rng.Intn(256))
			}
			addr := uint64(rng.Intn(1<<24)) &^ 3
			switch rng.Intn(5) {
			case 0:
				addr |= uint64(rng.Intn(4)) // unaligned
			case 1:
				addr = chunkBytes*uint64(1+rng.Intn(8)) - uint64(rng.Intn(64))*4 // just before a chunk boundary
			case 2:
				if len(regions) > 0 { // right after the last region
					last := regions[len(regions)-1]
					addr = last.Addr + uint64(len(last.Data)/4)*4
				}
			case 3:
				if len(regions) > 0 {
					addr = regions[0].Addr + uint64(rng.Intn(64))*4 // overlapping the first region
				}
			}
			var skip [][2]uint64
			if rng.Intn(2) == 0 {
				skip = randomSkip(rng, addr, size, rng.Intn(20))
			}
			regions = append(regions, Code{Data: data, Addr: addr, Skip: skip})
		}
		sameScan(t, fmt.Sprintf("random case %d", iter), tb, regions)
	}
}

func withoutSkips(regions []Code) []Code {
	out := slices.Clone(regions)
	for i := range out {
		out[i].Skip = nil
	}
	return out
}

// BenchmarkScanLibraries classifies the executable segments of the bench
// libraries (make bench-scan fetches them; skipped when absent), their
// non-executable sections skipped. MB/s is over the segments; code-MB/s over
// their executable sections (.text, .plt…):
// go test -run XXX -bench ScanLibraries ./internal/isa
func BenchmarkScanLibraries(b *testing.B) {
	for _, name := range []string{"librocksdb.so.7.8", "libLLVM-16.so.1"} {
		regions, code := execSegments(b, filepath.Join(benchLibs, name))
		if regions == nil {
			b.Logf("%s: not fetched (make bench-scan)", name)
			continue
		}
		var size int64
		for _, r := range regions {
			size += int64(len(r.Data))
		}
		b.Run(name, func(b *testing.B) {
			Default()
			b.SetBytes(size)
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				Default().Scan(regions)
			}
			b.ReportMetric(float64(code)*float64(b.N)/time.Since(start).Seconds()/1e6, "code-MB/s")
		})
	}
}

// TestLiteralPastRegionEnd: an LDR (literal) whose load starts in the last
// word of its region makes the words after it data, in the next region too.
func TestLiteralPastRegionEnd(t *testing.T) {
	tb := Default()
	var a, b []byte
	a = append(a, word(0x9c000020)...) // ldr q0, #4: loads 16 bytes from 0x1004
	a = append(a, word(0xd65f03c0)...) // ret, then the load's first word
	b = append(b, word(0x04e0e3e0)...) // 0x1008, loaded: looks like cntd x0
	b = append(b, word(0x04e0e3e0)...) // 0x100c, loaded
	b = append(b, word(0x04e0e3e0)...) // 0x1010, loaded
	b = append(b, word(0x04e0e3e0)...) // 0x1014: real cntd x0
	regions := []Code{{Data: a, Addr: 0x1000}, {Data: b, Addr: 0x1008}}
	sameScan(t, "literal past the end", tb, regions)
	res := tb.Scan(regions)
	if sve := tb.Feature("sve"); res.Counts[sve] != 1 || len(res.Hits) != 1 || res.Hits[0].Addr != 0x1014 || res.Data != 3 {
		t.Errorf("sve %d, data %d, hits %+v; want only the cntd at 0x1014, three data words", res.Counts[sve], res.Data, res.Hits)
	}
}

// FuzzScanMatchesReference: Scan equals refScan on any bytes at any
// address, with one Skip range and a second region after the first.
func FuzzScanMatchesReference(f *testing.F) {
	f.Add(append(word(0x9c000020), word(0x04e0e3e0)...), uint64(0x1000), uint64(0x1004), uint64(0x1008), 4)
	f.Add(append(word(0x58000040), word(0xd65f03c0)...), uint64(0xfff0), uint64(0), uint64(0), 0)
	f.Add(append(append(word(0x9c000020), word(0x04e0e3e0)...), word(0x04e0e3e0)...), uint64(0xfffffffffffffff8), uint64(0), uint64(4), 4)
	f.Fuzz(func(t *testing.T, code []byte, addr, s0, s1 uint64, split int) {
		split = min(max(split, 0), len(code))
		regions := []Code{
			{Data: code[:split], Addr: addr, Skip: [][2]uint64{{s0, s1}}},
			{Data: code[split:], Addr: addr + uint64(split)},
		}
		got, want := Default().Scan(regions), refScan(Default(), regions)
		if !reflect.DeepEqual(got, want) {
			t.Fatal(diffResult(Default(), got, want))
		}
	})
}
