package scan

import (
	"cmp"
	"debug/elf"
	"math/bits"
	"slices"
	"sort"
)

// funcTable finds the function symbol that holds an address, reading the
// symbol table where it lies. A scan asks about a few hundred addresses of
// a table of up to a few hundred thousand symbols, and in a fresh process
// new memory costs more than reading (a page fault per 4 KiB), so:
//   - prepare answers a batch of addresses in one pass over the symbols,
//     with memory for the batch only;
//   - the first sortAfter other questions read the symbols once each;
//   - after that the function symbols are copied out and sorted once.
//
// All three give the same answers (TestFuncTableWays).
type funcTable struct {
	tab    *symtab
	n      int       // 0 when known to have no function symbol, else -1
	syms   []funcSym // once sorted: by address, aliases last-first
	sorted bool
	asked  int
	known  map[uint64]*funcSym // prepared answers (nil: none holds it)
	alias  map[uint64][]funcSym
}

// funcSym is a function symbol; its name is read from its table when
// needed. It holds no pointer, so sorting many is cheap.
type funcSym struct {
	addr, size uint64
	nameOff    uint32
	seq        uint32 // place in the table
}

// sortAfter is how many questions are answered without sorting.
const sortAfter = 32

func isFunc(s rawSym) bool {
	typ := elf.SymType(s.info() & 0xf)
	return (typ == elf.STT_FUNC || typ == elf.STT_GNU_IFUNC) && s.value != 0 && s.shndx() != uint16(elf.SHN_UNDEF)
}

func funcOf(i int, s rawSym) funcSym { return funcSym{s.value, s.size, s.nameOff(), uint32(i)} }

// functions returns the defined function symbols of a table.
func functions(t *symtab) *funcTable { return &funcTable{tab: t, n: -1} }

// empty reports whether the table has no function symbol (it stops at the
// first).
func (t *funcTable) empty() bool {
	if t.n >= 0 {
		return t.n == 0
	}
	for _, s := range t.tab.all() {
		if isFunc(s) {
			return false
		}
	}
	t.n = 0
	return true
}

func (t *funcTable) name(f funcSym) string { return t.tab.name(newSym(f.nameOff, 0, 0, 0, 0)) }

// each yields the function symbols in table order.
func (t *funcTable) each(yield func(funcSym)) {
	for i, s := range t.tab.all() {
		if isFunc(s) {
			yield(funcOf(i, s))
		}
	}
}

// ask counts a question and sorts the table when it has had enough.
func (t *funcTable) ask() bool {
	if !t.sorted {
		if t.asked++; t.asked <= sortAfter {
			return false
		}
		t.sort()
	}
	return true
}

// sort copies the function symbols out and orders them by address; of
// aliases (one address), the first in the table comes last, so that
// holding, which searches back from the end, names it.
func (t *funcTable) sort() {
	t.sorted = true
	t.syms = nil
	fits := true
	t.each(func(f funcSym) {
		t.syms = append(t.syms, f)
		fits = fits && f.addr < 1<<40
	})
	n := len(t.syms)
	if !fits || n >= 1<<24 {
		slices.SortFunc(t.syms, func(a, b funcSym) int {
			if c := cmp.Compare(a.addr, b.addr); c != 0 {
				return c
			}
			return cmp.Compare(b.seq, a.seq)
		})
		return
	}
	// Addresses below 2^40 and fewer than 2^24 symbols (every real object):
	// sort plain integers, address then reversed table place, and reorder.
	keys := make([]uint64, n)
	for i, f := range t.syms {
		keys[i] = f.addr<<24 | uint64(n-1-i)
	}
	slices.Sort(keys)
	out := make([]funcSym, n)
	for i, k := range keys {
		out[i] = t.syms[n-1-int(k&(1<<24-1))]
	}
	t.syms = out
}

// later reports whether a comes after b in sorted order.
func later(a, b *funcSym) bool { return a.addr > b.addr || a.addr == b.addr && a.seq < b.seq }

// lookup finds the function containing addr (its name and start): the
// nearest sized symbol at or before addr, when addr lies inside it; a
// zero-sized symbol only when it is the table's last.
func (t *funcTable) lookup(addr uint64) (string, uint64) {
	if f := t.holding(addr); f != nil {
		return t.name(*f), f.addr
	}
	return "", 0
}

// judge decides, from the table's last symbol and the last sized symbol at
// or before addr, which function holds addr.
func judge(last, best *funcSym, addr uint64) *funcSym {
	switch {
	case last == nil:
		return nil
	case last.addr <= addr:
		if last.size == 0 || addr < last.addr+last.size {
			return last
		}
		return nil
	case best != nil && addr < best.addr+best.size:
		return best
	}
	return nil
}

// prepare answers, in one pass over the symbols, which function holds each
// of addrs; later look-ups of them cost nothing.
func (t *funcTable) prepare(addrs []uint64) {
	if t.sorted || len(addrs) == 0 {
		return
	}
	as := slices.Clone(addrs)
	slices.Sort(as)
	as = slices.Compact(as)
	if t.known == nil {
		t.known = make(map[uint64]*funcSym, len(as))
	}
	for k, f := range t.holdingAll(as) {
		t.known[as[k]] = f
	}
}

// holdingAll finds, in one pass over the symbols in table order, the
// function holding each of as (sorted, no repeats); nil where none does.
func (t *funcTable) holdingAll(as []uint64) []*funcSym {
	// cand[k]: the last sized symbol starting in (as[k-1], as[k]]; the best
	// for as[k] is the last of cand[0..k].
	cand := make([]funcSym, len(as))
	have := make([]bool, len(as))
	var last funcSym
	found := false
	// A direct loop: this reads every symbol, and a callback per symbol
	// costs several times the reading.
	tab, maxA, idx := t.tab, as[len(as)-1], newAddrIndex(as)
	for i, n := 0, tab.len(); i < n; i++ {
		s := tab.at(i)
		if !isFunc(s) {
			continue
		}
		if !found || s.value > last.addr {
			last, found = funcOf(i, s), true
		}
		if s.size == 0 || s.value > maxA {
			continue
		}
		if k := idx.firstAtOrAfter(s.value); !have[k] || s.value > cand[k].addr {
			cand[k], have[k] = funcOf(i, s), true
		}
	}
	var lastp, best *funcSym
	if found {
		lastp = &last
	}
	out := make([]*funcSym, len(as))
	for k, a := range as {
		if have[k] && (best == nil || later(&cand[k], best)) {
			best = &cand[k]
		}
		if f := judge(lastp, best, a); f != nil {
			c := *f
			out[k] = &c
		}
	}
	return out
}

func (t *funcTable) holding(addr uint64) *funcSym {
	if f, ok := t.known[addr]; ok {
		return f
	}
	if !t.ask() {
		return t.holdingAll([]uint64{addr})[0]
	}
	fs := t.syms
	i := sort.Search(len(fs), func(i int) bool { return fs[i].addr > addr }) - 1
	for ; i >= 0; i-- {
		f := &fs[i]
		if addr >= f.addr && (addr < f.addr+f.size || f.size == 0 && i == len(fs)-1) {
			return f
		}
		if f.size > 0 && addr >= f.addr+f.size {
			break
		}
	}
	return nil
}

// prepareAliases finds, in one pass, the symbols starting at each of
// starts.
func (t *funcTable) prepareAliases(starts []uint64) {
	if t.sorted || len(starts) == 0 {
		return
	}
	var fresh []uint64 // starts not asked about before
	for _, a := range starts {
		if _, ok := t.alias[a]; !ok && a != 0 {
			fresh = append(fresh, a)
		}
	}
	if len(fresh) == 0 {
		return
	}
	slices.Sort(fresh)
	fresh = slices.Compact(fresh)
	lists := make([][]funcSym, len(fresh))
	lo, hi := fresh[0], fresh[len(fresh)-1]
	tab, idx := t.tab, newAddrIndex(fresh)
	for i, n := 0, tab.len(); i < n; i++ {
		s := tab.at(i)
		if s.value < lo || s.value > hi || !isFunc(s) {
			continue
		}
		if k := idx.firstAtOrAfter(s.value); fresh[k] == s.value {
			lists[k] = append(lists[k], funcOf(i, s))
		}
	}
	if t.alias == nil {
		t.alias = make(map[uint64][]funcSym, len(fresh))
	}
	for k, a := range fresh {
		t.alias[a] = lists[k]
	}
}

// firstAtOrAfter returns the index of the first of as (sorted) at or after
// v, len(as) when there is none. The search has no data-dependent branch
// (a comparison's borrow moves the base): the passes over a
// symbol table search once per symbol, and mispredicted halvings cost
// more than the rest of the pass.
func firstAtOrAfter(as []uint64, v uint64) int {
	n := len(as)
	if n == 0 {
		return 0
	}
	base := 0
	for n > 1 {
		half := n >> 1
		_, less := bits.Sub64(as[base+half], v, 0) // 1 when as[base+half] < v
		base += half * int(less)
		n -= half
	}
	_, less := bits.Sub64(as[base], v, 0)
	return base + int(less)
}

// aliases returns the function symbols that start at addr, in table order.
func (t *funcTable) aliases(addr uint64) []funcSym {
	if addr == 0 {
		return nil
	}
	if list, ok := t.alias[addr]; ok {
		return list
	}
	var out []funcSym
	if t.ask() {
		fs := t.syms
		for i := sort.Search(len(fs), func(i int) bool { return fs[i].addr >= addr }); i < len(fs) && fs[i].addr == addr; i++ {
			out = append(out, fs[i])
		}
		slices.Reverse(out)
		return out
	}
	t.each(func(f funcSym) {
		if f.addr == addr {
			out = append(out, f)
		}
	})
	return out
}

// startsIn reports whether a function starts in (lo, hi].
func (t *funcTable) startsIn(lo, hi uint64) bool {
	if t.ask() {
		fs := t.syms
		j := sort.Search(len(fs), func(j int) bool { return fs[j].addr > lo })
		return j < len(fs) && fs[j].addr <= hi
	}
	found := false
	t.each(func(f funcSym) { found = found || f.addr > lo && f.addr <= hi })
	return found
}

// addrIndex answers firstAtOrAfter for one sorted list of addresses that is
// asked once per symbol of a table: buckets (about four per address, of
// equal width over their range) say where to start, so most questions cost
// a load and a comparison or two rather than a binary search, whose every
// step waits for the previous one's load.
type addrIndex struct {
	as    []uint64
	lo    uint64
	shift uint
	start []int32 // start[b]: the first of as at or after lo + b<<shift
}

// maxIndexBuckets bounds an index's memory (256 KiB).
const maxIndexBuckets = 1 << 16

func newAddrIndex(as []uint64) addrIndex {
	x := addrIndex{as: as}
	if len(as) < 8 || len(as) >= 1<<31 {
		return x // a search is as fast
	}
	x.lo = as[0]
	nb := 1
	for nb < 4*len(as) && nb < maxIndexBuckets {
		nb <<= 1
	}
	for (as[len(as)-1]-x.lo)>>x.shift >= uint64(nb) {
		x.shift++
	}
	// start[b] is the first address whose bucket, (a-lo)>>shift, is b or
	// more: an address in bucket b has its answer in [start[b], start[b+1]].
	x.start = make([]int32, nb+1)
	k := 0
	for b := range x.start {
		for k < len(as) && (as[k]-x.lo)>>x.shift < uint64(b) {
			k++
		}
		x.start[b] = int32(k)
	}
	return x
}

// firstAtOrAfter returns the index of the first address at or after v,
// len(as) when there is none.
func (x *addrIndex) firstAtOrAfter(v uint64) int {
	if x.start == nil {
		return firstAtOrAfter(x.as, v)
	}
	if v <= x.lo {
		return 0
	}
	b := (v - x.lo) >> x.shift
	if b >= uint64(len(x.start)-1) {
		return firstAtOrAfter(x.as, v)
	}
	k, end := int(x.start[b]), int(x.start[b+1])
	if end-k > 4 {
		return k + firstAtOrAfter(x.as[k:end], v)
	}
	for k < end && x.as[k] < v {
		k++
	}
	return k
}
