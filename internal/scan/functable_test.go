package scan

import (
	"math/rand/v2"
	"testing"
)

// TestFuncTableWays: reading the symbols (the first questions) and
// searching the sorted table (the rest) give the same answers, on random
// tables with aliases, zero-sized symbols and overlaps.
func TestFuncTableWays(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 2000; round++ {
		st := &symtab{str: []byte("\x00a\x00b\x00c\x00d\x00e\x00")}
		base := uint64(0)
		if round%2 == 1 {
			base = 1 << 41 // too high to pack: the other sort
		}
		n := r.IntN(12)
		for i := 0; i < n; i++ {
			size := uint64(0)
			if r.IntN(3) > 0 {
				size = uint64(r.IntN(24))
			}
			st.syms = append(st.syms, rawSym{nameOff: uint32(1 + 2*r.IntN(5)), info: byte(2) /* STT_FUNC */, shndx: 1, value: base*uint64(r.IntN(2)) + uint64(1+r.IntN(40)), size: size})
		}
		linear, sorted := functions(st), functions(st)
		sorted.sort()
		for q := 0; q < 60; q++ {
			addr := base*uint64(r.IntN(2)) + uint64(r.IntN(72))
			ln, la := linear.lookup(addr)
			sn, sa := sorted.lookup(addr)
			linear.asked = 0 // keep the linear table linear
			if ln != sn || la != sa {
				t.Fatalf("round %d: lookup(%d): linear %q@%d, sorted %q@%d; symbols %+v", round, addr, ln, la, sn, sa, st.syms)
			}
			lal, sal := linear.aliases(addr), sorted.aliases(addr)
			linear.asked = 0
			if len(lal) != len(sal) {
				t.Fatalf("aliases(%d): %d vs %d", addr, len(lal), len(sal))
			}
			for i := range lal {
				if lal[i].seq != sal[i].seq {
					t.Fatalf("aliases(%d) order: %+v vs %+v", addr, lal, sal)
				}
			}
			hi := addr + uint64(r.IntN(10))
			if a, b := linear.startsIn(addr, hi), sorted.startsIn(addr, hi); a != b {
				t.Fatalf("startsIn(%d, %d): %v vs %v", addr, hi, a, b)
			}
			linear.asked = 0
		}
		if linear.sorted {
			t.Fatal("the linear table sorted itself")
		}
	}
	// After sortAfter questions a table sorts itself.
	ft := functions(&symtab{syms: []rawSym{{info: 2, shndx: 1, value: 8, size: 4}, {info: 2, shndx: 1, value: 4, size: 4}}})
	for i := 0; i <= sortAfter; i++ {
		ft.lookup(5)
	}
	if !ft.sorted || ft.syms[0].addr != 4 {
		t.Errorf("not sorted after %d questions: %+v", sortAfter+1, ft.syms)
	}
}
