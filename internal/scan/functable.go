package scan

import (
	"cmp"
	"debug/elf"
	"slices"
	"sort"
)

// funcTable finds the function symbol that holds an address. A scan asks
// few questions of tables of up to a few hundred thousand symbols (a
// library with a handful of extension instructions), so the first
// sortAfter questions are answered by reading the symbols in table order;
// after that the table is sorted once and searched. Both ways give the
// same answers (TestFuncTableWays).
type funcTable struct {
	tab    *symtab
	syms   []funcSym // table order until sorted: by address, aliases last-first
	sorted bool
	asked  int
}

// sortAfter is how many questions are answered without sorting.
const sortAfter = 32

// functions returns the defined function symbols of a table.
func functions(t *symtab) *funcTable {
	ft := &funcTable{tab: t}
	for i, s := range t.syms {
		typ := elf.SymType(s.info & 0xf)
		if (typ == elf.STT_FUNC || typ == elf.STT_GNU_IFUNC) && s.value != 0 && s.shndx != uint16(elf.SHN_UNDEF) {
			ft.syms = append(ft.syms, funcSym{s.value, s.size, s.nameOff, uint32(i)})
		}
	}
	return ft
}

func (t *funcTable) len() int { return len(t.syms) }

func (t *funcTable) name(f funcSym) string { return t.tab.name(rawSym{nameOff: f.nameOff}) }

// expect tells the table how many questions are coming: more than
// sortAfter, and it sorts at once rather than reading the symbols first.
func (t *funcTable) expect(n int) {
	if !t.sorted && t.asked+n > sortAfter {
		t.sort()
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

// sort orders the symbols by address; of aliases (one address), the first
// in the table comes last, so that lookup, which searches back from the
// end, names it.
func (t *funcTable) sort() {
	t.sorted = true
	n := len(t.syms)
	fits := n < 1<<24
	for _, f := range t.syms {
		fits = fits && f.addr < 1<<40
	}
	if !fits {
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

func (t *funcTable) holding(addr uint64) *funcSym {
	if t.ask() {
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
	var last, best *funcSym // the last symbol; the last sized one at or before addr
	for i := range t.syms {
		f := &t.syms[i]
		if last == nil || later(f, last) {
			last = f
		}
		if f.size > 0 && f.addr <= addr && (best == nil || later(f, best)) {
			best = f
		}
	}
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

// aliases returns the function symbols that start at addr, in table order.
func (t *funcTable) aliases(addr uint64) []funcSym {
	if addr == 0 {
		return nil
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
	for _, f := range t.syms {
		if f.addr == addr {
			out = append(out, f)
		}
	}
	return out
}

// startsIn reports whether a function starts in (lo, hi].
func (t *funcTable) startsIn(lo, hi uint64) bool {
	if t.ask() {
		fs := t.syms
		j := sort.Search(len(fs), func(j int) bool { return fs[j].addr > lo })
		return j < len(fs) && fs[j].addr <= hi
	}
	for _, f := range t.syms {
		if f.addr > lo && f.addr <= hi {
			return true
		}
	}
	return false
}
