package isa

import (
	"math/bits"
	"slices"
)

// keyTable narrows the rules a word may match by its key: bits 31:21 (the
// top) and 15:10 (the mid). Tops that admit the same rules share a row of
// cells, so the tables are small enough to stay in a CPU's first-level cache.
type keyTable struct {
	// mark[top<<1|bit 4] has bit mid set when a word with those bits needs
	// a closer look: some rule's fixed bits agree with them, or the word is
	// an LDR (literal), whose target is data. A clear bit means base v8.0.
	// Bit 4 is there because it alone, of the bits outside the key, keeps
	// B.cond (every conditional branch) out: on libLLVM-16's code the words
	// that need a closer look fall from 6.2% to 0.14%.
	mark [1 << 12]uint64
	// row[top] is the top's row of cells; row 0 is the tops no rule admits.
	row [1 << 11]uint16
	// cells[row<<6|mid] lists the rules that can match, in order:
	// pool[off : off+n] stored as off<<8|n (0: none).
	cells []uint32
	pool  []compiled
}

// literalMask/literalValue select LDR (literal) and PRFM (literal) words
// (appendLiteral reads them). Its fixed bits are all in the top, so the
// marks can say which tops hold them.
const (
	literalMask  = 0x3b000000
	literalValue = 0x18000000
	topMask      = 0xffe00000
)

var _ = [1]struct{}{}[literalMask&^topMask] // the literal test needs only the top

func isLiteralLoad(w uint32) bool { return w&literalMask == literalValue }

// marked says whether a word needs a closer look than the marks.
func (k *keyTable) marked(w uint32) bool {
	return k.mark[w>>21<<1|w>>4&1]>>(w>>10&0x3f)&1 != 0
}

// candidates returns the rules a word may match.
func (k *keyTable) candidates(w uint32) []compiled {
	e := k.cells[int(k.row[w>>21])<<6|int(w>>10&0x3f)]
	return k.pool[e>>8 : e>>8+e&0xff]
}

// ruleSet is a set of rule indexes (at most 256 rules).
type ruleSet [4]uint64

func (s *ruleSet) add(i int)  { s[i>>6] |= 1 << (i & 63) }
func (s ruleSet) empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }
func (s ruleSet) and(o ruleSet) ruleSet {
	return ruleSet{s[0] & o[0], s[1] & o[1], s[2] & o[2], s[3] & o[3]}
}
func (s ruleSet) len() int {
	return bits.OnesCount64(s[0]) + bits.OnesCount64(s[1]) + bits.OnesCount64(s[2]) + bits.OnesCount64(s[3])
}

// buildKeys fills t.keyTable from t.rules. A rule admits a key when its
// fixed bits in the top and in the mid agree with the key's. Few distinct
// sets of rules occur among the 2048 tops (74 today), so each distinct set
// gets one row of cells.
func (t *Table) buildKeys() {
	b := &keyBuilder{t: t, byTop: make([]ruleSet, 1<<11)}
	for i, r := range t.rules {
		// Every top that agrees with the rule: the rule's value with each
		// subset of the bits it leaves free (the value has no bits outside
		// the mask: parse checks).
		free, v := ^r.mask>>21&0x7ff, r.value>>21
		for s := uint32(0); ; {
			b.byTop[v|s].add(i)
			if s = (s - free) & free; s == 0 {
				break
			}
		}
		for b4 := range uint32(2) {
			if (b4<<4^r.value)&r.mask&0x10 == 0 {
				b.byBit4[b4].add(i)
			}
		}
	}
	k := &t.keyTable
	k.pool = make([]compiled, 1, 256) // offset 0 is "no rules"
	k.cells = make([]uint32, 64, 64*128)
	rows := map[ruleSet]uint16{}
	rowMark := [][2]uint64{{}}
	prev, prevRow := ruleSet{}, uint16(0)
	for top, set := range b.byTop {
		row := prevRow
		if set != prev {
			var ok bool
			if row, ok = rows[set]; !ok && !set.empty() {
				row = uint16(len(rowMark))
				rows[set] = row
				rowMark = append(rowMark, b.addRow(set))
			}
			prev, prevRow = set, row
		}
		k.row[top] = row
		k.mark[top<<1], k.mark[top<<1|1] = rowMark[row][0], rowMark[row][1]
		if isLiteralLoad(uint32(top) << 21) {
			k.mark[top<<1], k.mark[top<<1|1] = ^uint64(0), ^uint64(0)
		}
	}
}

// keyBuilder holds what buildKeys works with.
type keyBuilder struct {
	t      *Table
	byTop  []ruleSet  // the rules that agree with each top
	byBit4 [2]ruleSet // the rules a word with bit 4 clear, set, may match
	byMid  [64]ruleSet
	runs   []ruleSet // scratch of addRow: the row's distinct cells
	offs   []uint32
}

// addRow appends the 64 cells (one per mid) of a top whose rules are set,
// and returns its marks (bit 4 clear, set). Cells of the row with the same
// rules share a run of the pool.
func (b *keyBuilder) addRow(set ruleSet) [2]uint64 {
	k := &b.t.keyTable
	b.byMid = [64]ruleSet{}
	for w, word := range set {
		for ; word != 0; word &= word - 1 {
			i := w<<6 | bits.TrailingZeros64(word)
			r := b.t.rules[i]
			free, v := ^r.mask>>10&0x3f, r.value>>10&0x3f
			for s := uint32(0); ; {
				b.byMid[v|s].add(i)
				if s = (s - free) & free; s == 0 {
					break
				}
			}
		}
	}
	b.runs, b.offs = b.runs[:0], b.offs[:0]
	var m [2]uint64
	for mid := range b.byMid {
		both := &b.byMid[mid]
		if mid > 0 && *both == b.byMid[mid-1] { // often: rules that leave the mid free
			k.cells = append(k.cells, k.cells[len(k.cells)-1])
			for b4 := range m {
				m[b4] |= (m[b4] >> (mid - 1) & 1) << mid
			}
			continue
		}
		if both.empty() {
			k.cells = append(k.cells, 0)
			continue
		}
		j := slices.Index(b.runs, *both)
		if j < 0 {
			j = len(b.runs)
			b.runs, b.offs = append(b.runs, *both), append(b.offs, uint32(len(k.pool)))
			for w, word := range both {
				for ; word != 0; word &= word - 1 {
					k.pool = append(k.pool, b.t.rules[w<<6|bits.TrailingZeros64(word)])
				}
			}
		}
		k.cells = append(k.cells, b.offs[j]<<8|uint32(both.len()))
		for b4 := range m {
			if !both.and(b.byBit4[b4]).empty() {
				m[b4] |= 1 << mid
			}
		}
	}
	return m
}
