package scan

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/dorisarm/dorisarm/internal/isa"
)

// Runtime checks recognised by their shape, for code without symbols.
//
// A feature instruction is guarded when a conditional branch on a CPU
// flag decides whether it runs:
//
//   - skip-over: CBZ/CBNZ/TBZ/TBNZ (or TST/CMP #0 + B.cond) before it, in
//     the same function (no RET in between), branches past it — libgcc's
//     outline atomics (`ldrb w16, [x16, #have_lse]; cbz w16, 1f; cas…; ret;
//     1: ldaxr…`), RocksDB's `if (pmull_runtime_flag)` CRC kernels;
//   - jump-in: the instruction's block starts right after a RET or an
//     unconditional branch, so it is reached only by branches, and a
//     conditional branch on a flag targets that start — glibc's malloc
//     (`cbnz w4, tag; … ret; tag: ldg…` on mtag_enabled), OpenSSL's
//     `tst w16, #ARMV8_SHA256; b.ne .Lv8_entry`.
//
// A flag is a value loaded from a global (the load's base comes from ADRP,
// directly, through ADD or through a GOT load) or a bit tested (TBZ/TBNZ,
// TST #bit) in a function's result (getauxval(AT_HWCAP)). Tests on other
// values — a length, a pointer — are not guards.

const (
	guardBack  = 2048 // bytes before an instruction searched for its check
	guardReach = 8192 // bytes a guarding branch may jump
	provWindow = 32   // instructions searched back for a flag's origin
)

// guardIndex answers guard questions about one code region. It reads the
// code lazily, in blocks of guardBlockWords words, each at most once: a
// question about an instruction reads only the blocks around it (guardBack
// before, guardReach either side of its block's start), so a scan with few
// feature instructions reads little beyond what the classifier read.
type guardIndex struct {
	base   uint64
	code   []byte
	words  int
	bw     int // words per block: guardBlockWords (tests use small blocks)
	blocks []*guardBlock
}

// guardBlockWords is how much code one lazily built block covers (16 KiB).
const guardBlockWords = 1 << 12

// guardBlock holds, for one block, the branches that test flags and where
// basic blocks end, by address.
type guardBlock struct {
	flagBr []flagBranch
	rets   []uint64 // RET addresses
	ends   []uint64 // RET, B, BR addresses: a block ends after them
}

type flagBranch struct{ at, target uint64 }

func w32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i*4:]) }

func condBranch(w uint32, pc uint64) (target uint64, reg int, bit bool, ok bool) {
	switch {
	case w&0x7e000000 == 0x34000000: // CBZ/CBNZ
		return pc + uint64(int64(int32(w<<8)>>13)*4), int(w & 31), false, true
	case w&0x7e000000 == 0x36000000: // TBZ/TBNZ
		return pc + uint64(int64(int32(w<<13)>>18)*4), int(w & 31), true, true
	case w&0xff000010 == 0x54000000: // B.cond
		return pc + uint64(int64(int32(w<<8)>>13)*4), -1, false, true
	}
	return 0, 0, false, false
}

func isRet(w uint32) bool { return w&0xfffffc1f == 0xd65f0000 }

func endsBlock(w uint32) bool {
	return isRet(w) || w&0xfc000000 == 0x14000000 || w&0xfffffc1f == 0xd61f0000
}

func newGuardIndex(code []byte, base uint64) *guardIndex {
	return newGuardIndexBlocks(code, base, guardBlockWords)
}

func newGuardIndexBlocks(code []byte, base uint64, bw int) *guardIndex {
	words := len(code) / 4
	return &guardIndex{base: base, code: code, words: words, bw: bw, blocks: make([]*guardBlock, (words+bw-1)/bw)}
}

// blockOf returns the block holding addr, which must lie in the region.
func (g *guardIndex) blockOf(addr uint64) int { return int((addr-g.base)/4) / g.bw }

// clamp limits addr to the region's last word.
func (g *guardIndex) clamp(addr uint64) uint64 {
	if last := g.base + uint64(g.words-1)*4; addr > last {
		return last
	}
	return addr
}

// block builds (once) and returns block k.
func (g *guardIndex) block(k int) *guardBlock {
	if b := g.blocks[k]; b != nil {
		return b
	}
	b := &guardBlock{}
	code := g.code
	for i, hi := k*g.bw, min(g.words, (k+1)*g.bw); i < hi; i++ {
		w := w32(code, i)
		pc := g.base + uint64(i)*4
		if endsBlock(w) {
			b.ends = append(b.ends, pc)
			if isRet(w) {
				b.rets = append(b.rets, pc)
			}
			continue
		}
		target, reg, bit, ok := condBranch(w, pc)
		if !ok {
			continue
		}
		if reg < 0 { // B.cond: the flags come from TST #imm / CMP #0 just before
			reg, bit = flagSetter(code, i)
			if reg < 0 {
				continue
			}
		}
		if isFlag(code, i, reg, bit) {
			b.flagBr = append(b.flagBr, flagBranch{pc, target})
		}
	}
	g.blocks[k] = b
	return b
}

// each calls fn with the blocks covering [lo, hi] (addresses in the
// region), in address order, until fn returns false.
func (g *guardIndex) each(lo, hi uint64, fn func(*guardBlock) bool) {
	for k := g.blockOf(lo); k <= g.blockOf(g.clamp(hi)); k++ {
		if !fn(g.block(k)) {
			return
		}
	}
}

// flagSetter finds the TST (ANDS #imm, zr) or CMP #0 that set the condition
// flags for the B.cond at word i; it returns the tested register and
// whether a single bit is tested.
func flagSetter(code []byte, i int) (int, bool) {
	for j := i - 1; j >= 0 && j >= i-3; j-- {
		w := w32(code, j)
		switch {
		case w&0x7f80001f == 0x7200001f: // TST Rn, #imm
			return int(w>>5) & 31, singleBit(w)
		case w&0x7ffffc1f == 0x7100001f: // CMP Rn, #0 (SUBS zr, Rn, #0)
			return int(w>>5) & 31, false
		case w&0x1f == 31 && w&0x60000000 == 0x60000000: // another flag setter
			return -1, false
		}
	}
	return -1, false
}

// singleBit reports whether a logical immediate (N:immr:imms) is one bit.
func singleBit(w uint32) bool {
	n, imms := (w>>22)&1, (w>>10)&0x3f
	if n == 1 {
		return imms == 0
	}
	// 32-bit element: imms 0 means one bit set; smaller element sizes repeat the bit.
	return imms == 0
}

// isFlag reports whether register reg, as the instruction at word i reads
// it, holds a CPU flag (see the package comment above).
func isFlag(code []byte, i, reg int, bit bool) bool {
	for j := i - 1; j >= 0 && j >= i-provWindow; j-- {
		w := w32(code, j)
		if endsBlock(w) {
			return false
		}
		if w&0xfc000000 == 0x94000000 { // BL: x0 is the callee's result
			return reg == 0 && bit
		}
		rd := int(w & 31)
		if rd != reg || !writesRd(w) {
			continue
		}
		if base, ok := loadBase(w); ok {
			// A byte is a boolean (glibc's mtag_enabled, libgcc's
			// have_lse_atomics) whatever holds its address; wider values
			// count only when loaded from a global (OpenSSL's armcap).
			return w&0xffc00000 == 0x39400000 || isGlobalBase(code, j, base, 3)
		}
		return false
	}
	return false
}

// loadBase: LDRB/LDRH/LDR (W or X) with an unsigned immediate offset.
func loadBase(w uint32) (int, bool) {
	switch w & 0xffc00000 {
	case 0x39400000, 0x79400000, 0xb9400000, 0xf9400000:
		return int(w>>5) & 31, true
	}
	return 0, false
}

// isGlobalBase: the register holds an address built by ADRP (directly,
// through ADD #imm, or loaded from the GOT).
func isGlobalBase(code []byte, i, reg, depth int) bool {
	if depth == 0 {
		return false
	}
	for j := i - 1; j >= 0 && j >= i-provWindow; j-- {
		w := w32(code, j)
		if w&0xfc000000 == 0x94000000 {
			return false // a call clobbers the caller-saved registers
		}
		if int(w&31) != reg || !writesRd(w) {
			continue
		}
		switch {
		case w&0x9f000000 == 0x90000000: // ADRP
			return true
		case w&0xff800000 == 0x91000000: // ADD Xd, Xn, #imm
			return isGlobalBase(code, j, int(w>>5)&31, depth-1)
		case w&0xffc00000 == 0xf9400000: // LDR Xd, [Xn, #imm]: a GOT entry
			return isGlobalBase(code, j, int(w>>5)&31, depth-1)
		}
		return false
	}
	return false
}

// writesRd reports whether an instruction writes its Rd field (bits 4:0):
// everything but stores, branches, compares into zr and system
// instructions. An over-approximation only shortens the search.
func writesRd(w uint32) bool {
	switch {
	case w&0x0a000000 == 0x08000000 && w&(1<<22) == 0: // stores (loads have L=1)
		return false
	case w&0x1c000000 == 0x14000000: // branches, exceptions, system
		return false
	}
	return true
}

// guarded returns why the instruction at addr runs only after a CPU check,
// or "".
func (g *guardIndex) guarded(addr uint64) string {
	if g.words == 0 || addr < g.base || addr-g.base >= uint64(g.words)*4 {
		return ""
	}
	// Skip-over: a flag test before addr that branches past it, no RET between.
	lo := addr - min(addr-g.base, guardBack)
	why := ""
	g.each(lo, addr, func(b *guardBlock) bool {
		i := sort.Search(len(b.flagBr), func(i int) bool { return b.flagBr[i].at >= lo })
		for ; i < len(b.flagBr) && b.flagBr[i].at < addr; i++ {
			br := b.flagBr[i]
			switch {
			case br.target > addr && br.target-br.at <= guardReach && !g.between(br.at, addr, true):
				why = fmt.Sprintf("behind the CPU check at 0x%x (a branch on a flag past it)", br.at)
			case br.target <= br.at && !g.between(br.at, addr, false):
				why = fmt.Sprintf("behind the CPU check at 0x%x (a branch on a flag away from it)", br.at)
			}
			if why != "" {
				return false
			}
		}
		return true
	})
	if why != "" {
		return why
	}
	// Jump-in: the block holding addr is entered only by branches, and a
	// flag branch within reach targets its start (the last such names the
	// check).
	end, ok := g.lastEndBefore(addr)
	if !ok {
		return ""
	}
	start := end + 4
	var at uint64
	found := false
	g.each(start-min(start-g.base, guardReach), start+guardReach, func(b *guardBlock) bool {
		for _, br := range b.flagBr {
			if br.target == start && absDiff(br.at, start) <= guardReach {
				at, found = br.at, true
			}
		}
		return true
	})
	if found {
		return fmt.Sprintf("reached only from the CPU check at 0x%x (a branch on a flag to 0x%x)", at, start)
	}
	return ""
}

// between reports whether a block ends (only a RET, with rets) strictly
// between a and b, both in the region.
func (g *guardIndex) between(a, b uint64, rets bool) bool {
	hit := false
	g.each(a, b, func(blk *guardBlock) bool {
		list := blk.ends
		if rets {
			list = blk.rets
		}
		k := sort.Search(len(list), func(k int) bool { return list[k] > a })
		hit = k < len(list) && list[k] < b
		return !hit && (k == len(list))
	})
	return hit
}

// lastEndBefore returns the last RET, B or BR before addr.
func (g *guardIndex) lastEndBefore(addr uint64) (uint64, bool) {
	for k := g.blockOf(addr); k >= 0; k-- {
		b := g.block(k)
		if i := sort.Search(len(b.ends), func(i int) bool { return b.ends[i] >= addr }) - 1; i >= 0 {
			return b.ends[i], true
		}
	}
	return 0, false
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// probe reports whether the instruction at addr is a CPU probe: a
// function of that one instruction and RET, which a library runs under a
// SIGILL handler to learn whether the CPU has the feature (OpenSSL's
// _armv8_*_probe).
func (g *guardIndex) probe(addr uint64) bool {
	if addr < g.base || addr-g.base >= uint64(g.words)*4 {
		return false
	}
	i := int((addr - g.base) / 4)
	if i+1 >= g.words || !isRet(w32(g.code, i+1)) {
		return false
	}
	if i == 0 {
		return true
	}
	p := w32(g.code, i-1)
	return endsBlock(p) || p == 0xd503201f || p&0xffffff3f == 0xd503241f // after a RET/B, a NOP or a BTI
}

// judgeEvery is how many calls to a function are kept before they are
// judged: memory stays bounded however often a function is called.
const judgeEvery = 4096

// refs reads the whole region once and finds, for the functions in fns,
// the direct calls to each (BL, and B as a tail call), judging whether each
// is behind a CPU check, and whether the code takes the function's address
// (ADRP+ADD or ADR: a function pointer).
func (g *guardIndex) refs(fns map[uint64]*fnRefs) {
	var page [32]uint64 // ADRP results by register (set: which hold one; page 0 is a page)
	var set uint32
	code, base := g.code, g.base
	size := uint64(len(code))
	for i := 0; i < g.words; i++ {
		w := w32(code, i)
		switch {
		case w&0x7c000000 == 0x14000000: // B, BL
			pc := base + uint64(i)*4
			if r := fns[pc+uint64(int64(int32(w<<6)>>6)*4)]; r != nil {
				if r.calls++; r.calls == 1 {
					r.first = pc
				}
				if !r.unguarded {
					if r.pending = append(r.pending, pc); len(r.pending) == judgeEvery {
						g.judge(r)
					}
				}
			}
		case w&0x9f000000 == 0x90000000: // ADRP
			pc := base + uint64(i)*4
			imm := int64(int32(((w>>5)&0x7ffff)<<2|(w>>29)&3) << 11 >> 11)
			page[w&31] = uint64(int64(pc&^0xfff) + imm<<12)
			set |= 1 << (w & 31)
		case w&0xff800000 == 0x91000000: // ADD Xd, Xn, #imm
			if set>>((w>>5)&31)&1 != 0 {
				if a := page[(w>>5)&31] + uint64((w>>10)&0xfff); a >= base && a-base < size {
					if r := fns[a]; r != nil {
						r.escapes = true
					}
				}
			}
			set &^= 1 << (w & 31) // it holds an address now, not a page
		case w&0x9f000000 == 0x10000000: // ADR
			pc := base + uint64(i)*4
			imm := int64(int32(((w>>5)&0x7ffff)<<2|(w>>29)&3) << 11 >> 11)
			if r := fns[uint64(int64(pc)+imm)]; r != nil {
				r.escapes = true
			}
		}
	}
}

// judge decides whether the pending calls are behind CPU checks.
func (g *guardIndex) judge(r *fnRefs) {
	for _, c := range r.pending {
		if g.guarded(c) == "" {
			r.unguarded = true
			break
		}
	}
	r.pending = r.pending[:0]
}

// fnRefs is what refs finds about one function.
type fnRefs struct {
	calls     int      // direct calls
	first     uint64   // the first, by address
	pending   []uint64 // calls not judged yet
	unguarded bool     // a call not behind a CPU check was seen
	escapes   bool
}

// shapeGuards finds guards for the given hits, one index per region.
type shapeGuards struct {
	regions []isa.Code
	idx     map[int]*guardIndex
	// dynamic are the dynamic symbols: functions others can call;
	// dataPointers calls back with every value that may be a code pointer
	// (relocation addends, words of the data segments).
	dynamic      *symtab
	dataPointers func(func(uint64))
}

// local says why the instruction at addr runs only after a CPU check,
// judged from the code around it, or "".
func (s *shapeGuards) local(addr uint64) string {
	g := s.index(addr)
	if g == nil {
		return ""
	}
	if why := g.guarded(addr); why != "" {
		return why
	}
	if g.probe(addr) {
		return "a CPU probe (the instruction and RET, run under a SIGILL handler)"
	}
	return ""
}

// calledOnlyGuarded judges the functions starting at fns: one that others
// cannot call but directly (not exported, its address not taken in code,
// relocations or data) and whose every direct call is behind a CPU check
// runs only after that check (glibc's __libc_mtag_tag_region after
// `if (mtag_enabled)`). It returns why, for those that do. Each region
// holding one of fns is read once, and the data once.
func (s *shapeGuards) calledOnlyGuarded(fns []uint64) map[uint64]string {
	byRegion := map[*guardIndex]map[uint64]*fnRefs{}
	all := map[uint64]*fnRefs{}
	for _, fn := range fns {
		g := s.index(fn)
		if g == nil || all[fn] != nil {
			continue
		}
		if byRegion[g] == nil {
			byRegion[g] = map[uint64]*fnRefs{}
		}
		r := &fnRefs{}
		byRegion[g][fn], all[fn] = r, r
	}
	if s.dynamic != nil {
		for _, sym := range s.dynamic.all() {
			if all[sym.value] != nil && sym.shndx() != uint16(elf.SHN_UNDEF) {
				delete(byRegion[s.index(sym.value)], sym.value) // exported
				delete(all, sym.value)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	for g, refs := range byRegion {
		g.refs(refs)
	}
	if s.dataPointers != nil {
		s.dataPointers(func(v uint64) {
			if r := all[v]; r != nil {
				r.escapes = true
			}
		})
	}
	out := map[uint64]string{}
	for g, refs := range byRegion {
		for fn, r := range refs {
			if r.escapes || r.calls == 0 {
				continue
			}
			if g.judge(r); !r.unguarded {
				out[fn] = fmt.Sprintf("called only from behind CPU checks (%d call(s), the first at 0x%x)", r.calls, r.first)
			}
		}
	}
	return out
}

// index returns the guard index of the region holding addr, or nil.
func (s *shapeGuards) index(addr uint64) *guardIndex {
	for ri, r := range s.regions {
		if r.Addr <= addr && addr-r.Addr < uint64(len(r.Data)) {
			g := s.idx[ri]
			if g == nil {
				g = newGuardIndex(r.Data, r.Addr)
				s.idx[ri] = g
			}
			return g
		}
	}
	return nil
}
