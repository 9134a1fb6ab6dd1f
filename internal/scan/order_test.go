package scan

import (
	"math/rand"
	"slices"
	"testing"
)

// TestFindingsTotalOrder: findings that agree on path, kind, function and
// feature (a file's data-span claims, found by iterating a map) still sort
// one way, by address as a number and then detail, whatever order they
// were found in: a scan's report is the same bytes every run (it differed
// between runs on Debian's arm64 libc).
func TestFindingsTotalOrder(t *testing.T) {
	base := Finding{Kind: KindISA, Path: "lib/libc.so.6", Function: "f", Feature: "sve"}
	var want []Finding
	for _, a := range []struct{ addr, detail string }{{"", "none"}, {"0x20", "a"}, {"0x6590", "claims 0x0-0x59fe4"}, {"0x6590", "claims 0x20-0xd840"}, {"0xd930", "b"}, {"0x10000", "c"}} {
		f := base
		f.Address, f.Detail = a.addr, a.detail
		want = append(want, f)
	}
	for i := 0; i < 50; i++ {
		got := slices.Clone(want)
		rand.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
		slices.SortStableFunc(got, compareFindings)
		if !slices.Equal(got, want) {
			t.Fatalf("order %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
}
