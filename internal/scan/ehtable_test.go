package scan

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEhTable: the unwind table's starts are searched when sorted and read
// start to end when not (a hostile table), with the same answers as a
// plain walk.
func TestEhTable(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 500; round++ {
		n := r.IntN(20)
		starts := make([]uint64, n)
		for i := range starts {
			starts[i] = 0x1000 + uint64(r.IntN(64))*4
		}
		if round%2 == 0 {
			slices.Sort(starts)
		}
		b := make([]byte, 8*n)
		const vaddr = 0x800
		for i, s := range starts {
			binary.LittleEndian.PutUint32(b[8*i:], uint32(int32(int64(s)-vaddr)))
		}
		e := &ehTable{b: b, vaddr: vaddr, bo: binary.LittleEndian, n: n}
		if e.isSorted() != slices.IsSorted(starts) {
			t.Fatalf("isSorted %v for %v", e.isSorted(), starts)
		}
		for q := 0; q < 30; q++ {
			lo := 0x1000 + uint64(r.IntN(70))*4
			hi := lo + uint64(r.IntN(40))
			var wantFirst, wantLast uint64
			okFirst, okLast := false, false
			for _, s := range starts {
				if s >= lo && s < hi && (!okFirst || s < wantFirst) {
					wantFirst, okFirst = s, true
				}
				if s <= lo && (!okLast || s > wantLast) {
					wantLast, okLast = s, true
				}
			}
			if got, ok := e.firstIn(lo, hi); got != wantFirst || ok != okFirst {
				t.Fatalf("firstIn(%#x, %#x) = %#x %v, want %#x %v (%v)", lo, hi, got, ok, wantFirst, okFirst, starts)
			}
			if got, ok := e.lastAtOrBefore(lo); got != wantLast || ok != okLast {
				t.Fatalf("lastAtOrBefore(%#x) = %#x %v, want %#x %v (%v)", lo, got, ok, wantLast, okLast, starts)
			}
		}
	}
	var none *ehTable
	if _, ok := none.lastAtOrBefore(0x1000); ok {
		t.Error("no table found a start")
	}
}

func TestCutSpan(t *testing.T) {
	spans := []span{{0, 10}, {20, 30}, {40, 50}}
	for _, c := range []struct {
		cut  span
		want []span
	}{
		{span{0, 0}, spans},
		{span{10, 20}, spans},
		{span{5, 25}, []span{{0, 5}, {25, 30}, {40, 50}}},
		{span{0, 50}, nil},
		{span{22, 28}, []span{{0, 10}, {20, 22}, {28, 30}, {40, 50}}},
		{span{45, 100}, []span{{0, 10}, {20, 30}, {40, 45}}},
	} {
		if got := cutSpan(spans, c.cut); !slices.Equal(got, c.want) {
			t.Errorf("cutSpan(%v) = %v, want %v", c.cut, got, c.want)
		}
	}
}
