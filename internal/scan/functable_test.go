package scan

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// symtabOf lays symbols out as ELF64 little-endian entries, the null
// symbol first, as a symbol table section holds them.
func symtabOf(str string, syms ...rawSym) *symtab {
	b := make([]byte, 24*(len(syms)+1))
	for i, s := range syms {
		e := b[24*(i+1):]
		binary.LittleEndian.PutUint32(e, s.nameOff())
		e[4] = s.info()
		binary.LittleEndian.PutUint16(e[6:], s.shndx())
		binary.LittleEndian.PutUint64(e[8:], s.value)
		binary.LittleEndian.PutUint64(e[16:], s.size)
	}
	return newSymtab(b, []byte(str), true, binary.LittleEndian)
}

// TestFuncTableWays: reading the symbols (the first questions), answering a
// prepared batch in one pass and searching the sorted table (the rest)
// give the same answers, on random tables with aliases, zero-sized symbols
// and overlaps.
func TestFuncTableWays(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 2000; round++ {
		base := uint64(0)
		if round%2 == 1 {
			base = 1 << 41 // too high to pack: the other sort
		}
		var syms []rawSym
		for i, n := 0, r.IntN(12); i < n; i++ {
			size := uint64(0)
			if r.IntN(3) > 0 {
				size = uint64(r.IntN(24))
			}
			info := byte(2) // STT_FUNC
			if r.IntN(8) == 0 {
				info = 1 // STT_OBJECT: not a function
			}
			syms = append(syms, newSym(uint32(1+2*r.IntN(5)), info, 1, base*uint64(r.IntN(2))+uint64(1+r.IntN(40)), size))
		}
		st := symtabOf("\x00a\x00b\x00c\x00d\x00e\x00", syms...)
		var qs []uint64
		for q := 0; q < 60; q++ {
			qs = append(qs, base*uint64(r.IntN(2))+uint64(r.IntN(72)))
		}
		linear, prepared, sorted := functions(st), functions(st), functions(st)
		prepared.prepare(qs)
		prepared.prepareAliases(qs)
		prepared.prepare(qs[:len(qs)/2]) // asked again: the same answers, no doubled aliases
		prepared.prepareAliases(qs[:len(qs)/2])
		sorted.sort()
		for _, addr := range qs {
			ln, la := linear.lookup(addr)
			pn, pa := prepared.lookup(addr)
			sn, sa := sorted.lookup(addr)
			linear.asked, prepared.asked = 0, 0 // keep them from sorting
			if ln != sn || la != sa || pn != sn || pa != sa {
				t.Fatalf("round %d: lookup(%d): linear %q@%d, prepared %q@%d, sorted %q@%d; symbols %+v", round, addr, ln, la, pn, pa, sn, sa, syms)
			}
			lal, pal, sal := linear.aliases(addr), prepared.aliases(addr), sorted.aliases(addr)
			linear.asked, prepared.asked = 0, 0
			if len(lal) != len(sal) || len(pal) != len(sal) {
				t.Fatalf("aliases(%d): %d, %d, %d", addr, len(lal), len(pal), len(sal))
			}
			for i := range lal {
				if lal[i].seq != sal[i].seq || pal[i].seq != sal[i].seq {
					t.Fatalf("aliases(%d) order: %+v, %+v, %+v", addr, lal, pal, sal)
				}
			}
			hi := addr + uint64(r.IntN(10))
			if a, b := linear.startsIn(addr, hi), sorted.startsIn(addr, hi); a != b {
				t.Fatalf("startsIn(%d, %d): %v vs %v", addr, hi, a, b)
			}
			linear.asked = 0
		}
		if linear.sorted || prepared.sorted {
			t.Fatal("a reading table sorted itself")
		}
	}
	// After sortAfter questions a table sorts itself.
	ft := functions(symtabOf("\x00", newSym(0, 2, 1, 8, 4), newSym(0, 2, 1, 4, 4)))
	for i := 0; i <= sortAfter; i++ {
		ft.lookup(5)
	}
	if !ft.sorted || ft.syms[0].addr != 4 {
		t.Errorf("not sorted after %d questions: %+v", sortAfter+1, ft.syms)
	}
}

// BenchmarkFuncTablePrepare: one batch of 164 addresses and their aliases
// against 16,000 function symbols (librocksdb's dynamic table has 15,835
// symbols and its scan asks about 164 hits).
func BenchmarkFuncTablePrepare(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	var syms []rawSym
	for i := 0; i < 16000; i++ {
		syms = append(syms, newSym(0, 2, 1, 0x10000+uint64(r.IntN(6<<20)), uint64(16+r.IntN(400))))
	}
	st := symtabOf("\x00", syms...)
	var as []uint64
	for i := 0; i < 164; i++ {
		as = append(as, 0x10000+uint64(r.IntN(6<<20)))
	}
	b.Run("prepare", func(b *testing.B) {
		for b.Loop() {
			functions(st).prepare(as)
		}
	})
	b.Run("aliases", func(b *testing.B) {
		for b.Loop() {
			functions(st).prepareAliases(as)
		}
	})
}

// TestAddrIndex: the bucketed search answers as a plain search does, on
// sorted lists with repeats, clusters, and addresses at both ends of the
// address space.
func TestAddrIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	plain := func(as []uint64, v uint64) int {
		k := 0
		for k < len(as) && as[k] < v {
			k++
		}
		return k
	}
	for round := 0; round < 3000; round++ {
		n := r.IntN(300)
		var as []uint64
		base := uint64(r.IntN(1 << 20))
		switch round % 4 {
		case 1:
			base = ^uint64(0) - 1<<20 // near the top
		case 2:
			base = 0
		}
		for i := 0; i < n; i++ {
			switch r.IntN(4) {
			case 0:
				as = append(as, base+uint64(r.IntN(16))) // a cluster
			default:
				as = append(as, base+uint64(r.IntN(1<<20)))
			}
		}
		if round%7 == 0 && n > 0 {
			as = append(as, ^uint64(0), 0)
		}
		slices.Sort(as)
		x := newAddrIndex(as)
		probe := func(v uint64) {
			if got, want := x.firstAtOrAfter(v), plain(as, v); got != want {
				t.Fatalf("round %d: firstAtOrAfter(%#x) = %d, want %d (%d addresses)", round, v, got, want, len(as))
			}
			if got, want := firstAtOrAfter(as, v), plain(as, v); got != want {
				t.Fatalf("round %d: plain firstAtOrAfter(%#x) = %d, want %d", round, v, got, want)
			}
		}
		for _, a := range as {
			probe(a)
			probe(a - 1)
			probe(a + 1)
		}
		for i := 0; i < 50; i++ {
			probe(base + uint64(r.IntN(1<<21)))
		}
		probe(0)
		probe(^uint64(0))
	}
}
