package scan

import (
	"debug/elf"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// ehTableOf lays function starts out as .eh_frame_hdr's search table
// relative to vaddr, in the order given.
func ehTableOf(vaddr uint64, starts []uint64) *ehTable {
	b := make([]byte, 8*len(starts))
	for i, s := range starts {
		binary.LittleEndian.PutUint32(b[8*i:], uint32(int32(int64(s)-int64(vaddr))))
	}
	return &ehTable{b: b, vaddr: vaddr, bo: binary.LittleEndian, n: len(starts)}
}

// TestFirstRoots: the one-pass answer for many claims agrees with asking,
// claim by claim, every root, unwind entry and dynamic function symbol, on
// random overlapping claims; symbols that are not defined functions never
// count.
func TestFirstRoots(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 3000; round++ {
		const space = 4096
		addr := func() uint64 { return 0x1000 + uint64(r.IntN(space)) }
		var syms []rawSym
		var funcs []uint64
		for i, n := 0, r.IntN(40); i < n; i++ {
			info, shndx := byte(elf.STT_FUNC), uint16(1)
			switch r.IntN(5) {
			case 0:
				info = byte(elf.STT_OBJECT)
			case 1:
				shndx = uint16(elf.SHN_UNDEF)
			case 2:
				info = byte(elf.STT_GNU_IFUNC)
			}
			s := newSym(0, info, shndx, addr(), 0)
			if isFunc(s) {
				funcs = append(funcs, s.value)
			}
			syms = append(syms, s)
		}
		var roots, starts []uint64
		for i, n := 0, r.IntN(3); i < n; i++ {
			roots = append(roots, addr())
		}
		for i, n := 0, r.IntN(20); i < n; i++ {
			starts = append(starts, addr())
		}
		if round%3 != 0 {
			slices.Sort(starts) // mostly sorted, as the format says; sometimes not
		}
		var cs []claimed
		for i, n := 0, 1+r.IntN(12); i < n; i++ {
			lo := addr()
			cs = append(cs, claimed{lo: lo, hi: lo + uint64(r.IntN(space/4))})
		}
		firstRoots(cs, roots, ehTableOf(0x800, starts), symtabOf("", syms...))
		all := slices.Concat(roots, starts, funcs)
		for i, c := range cs {
			want, ok := uint64(0), false
			for _, v := range all {
				if v >= c.lo && v < c.hi && (!ok || v < want) {
					want, ok = v, true
				}
			}
			if c.ok != ok || c.root != want {
				t.Fatalf("round %d claim %d [%#x, %#x): got %#x %v, want %#x %v", round, i, c.lo, c.hi, c.root, c.ok, want, ok)
			}
		}
	}
}

// TestInSpans checks the search against a scan of the spans.
func TestInSpans(t *testing.T) {
	spans := []span{{10, 20}, {20, 25}, {30, 31}, {100, 200}}
	for v := uint64(0); v < 250; v++ {
		want := false
		for _, s := range spans {
			want = want || v >= s.lo && v < s.hi
		}
		if got := inSpans(spans, v); got != want {
			t.Errorf("inSpans(%d) = %v, want %v", v, got, want)
		}
	}
	if inSpans(nil, 5) {
		t.Error("inSpans(nil) is true")
	}
}
