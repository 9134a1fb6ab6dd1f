package scan

import (
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

// guardIndex holds, for one code region, the branches that test flags and
// where blocks end. It is built once, lazily, in one pass.
type guardIndex struct {
	base    uint64
	words   int
	flagBr  []flagBranch // by address
	targets map[uint64]uint64
	rets    []uint64 // RET addresses
	ends    []uint64 // RET, B, BR addresses: a block ends after them
	bl      map[uint64][]uint64
	taken   map[uint64]bool // code addresses computed by ADRP+ADD or ADR (function pointers)
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

// buildGuardIndex reads the region once; release, when set, drops the
// pages of a mapped file behind the pass (as isa.Scan does).
func buildGuardIndex(code []byte, base uint64, release func(lo, hi int)) *guardIndex {
	g := &guardIndex{base: base, words: len(code) / 4, targets: map[uint64]uint64{}}
	for i := 0; i < g.words; i++ {
		if release != nil && i > 0 && i%(1<<20) == 0 {
			release((i-1<<20)*4, i*4)
		}
		w := w32(code, i)
		pc := base + uint64(i)*4
		if endsBlock(w) {
			g.ends = append(g.ends, pc)
			if isRet(w) {
				g.rets = append(g.rets, pc)
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
			g.flagBr = append(g.flagBr, flagBranch{pc, target})
			g.targets[target] = pc
		}
	}
	return g
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
func (g *guardIndex) guarded(code []byte, addr uint64) string {
	// Skip-over: a flag test before addr that branches past it, no RET between.
	lo := addr - min(addr-g.base, guardBack)
	i := sort.Search(len(g.flagBr), func(i int) bool { return g.flagBr[i].at >= lo })
	for ; i < len(g.flagBr) && g.flagBr[i].at < addr; i++ {
		b := g.flagBr[i]
		switch {
		case b.target > addr && b.target-b.at <= guardReach && !g.retBetween(b.at, addr):
			return fmt.Sprintf("behind the CPU check at 0x%x (a branch on a flag past it)", b.at)
		case b.target <= b.at && !g.endBetween(b.at, addr):
			return fmt.Sprintf("behind the CPU check at 0x%x (a branch on a flag away from it)", b.at)
		}
	}
	// Jump-in: the block holding addr is entered only by branches.
	k := sort.Search(len(g.ends), func(k int) bool { return g.ends[k] >= addr }) - 1
	if k < 0 {
		return ""
	}
	start := g.ends[k] + 4
	if at, ok := g.targets[start]; ok && absDiff(at, start) <= guardReach {
		return fmt.Sprintf("reached only from the CPU check at 0x%x (a branch on a flag to 0x%x)", at, start)
	}
	return ""
}

func (g *guardIndex) endBetween(a, b uint64) bool {
	k := sort.Search(len(g.ends), func(k int) bool { return g.ends[k] > a })
	return k < len(g.ends) && g.ends[k] < b
}

func (g *guardIndex) retBetween(a, b uint64) bool {
	k := sort.Search(len(g.rets), func(k int) bool { return g.rets[k] > a })
	return k < len(g.rets) && g.rets[k] < b
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
func (g *guardIndex) probe(code []byte, addr uint64) bool {
	i := int((addr - g.base) / 4)
	if i+1 >= g.words || !isRet(w32(code, i+1)) {
		return false
	}
	if i == 0 {
		return true
	}
	p := w32(code, i-1)
	return endsBlock(p) || p == 0xd503201f || p&0xffffff3f == 0xd503241f // after a RET/B, a NOP or a BTI
}

// takenAt reports whether code computes addr with ADRP+ADD or ADR (a
// function pointer); the addresses are collected on first use.
func (g *guardIndex) takenAt(code []byte, addr uint64) bool {
	if g.taken == nil {
		g.taken = map[uint64]bool{}
		var page [32]uint64 // ADRP results by register
		for i := 0; i < g.words; i++ {
			w := w32(code, i)
			pc := g.base + uint64(i)*4
			switch {
			case w&0x9f000000 == 0x90000000: // ADRP
				imm := int64(int32(((w>>5)&0x7ffff)<<2|(w>>29)&3) << 11 >> 11)
				page[w&31] = uint64(int64(pc&^0xfff) + imm<<12)
			case w&0xff800000 == 0x91000000 && page[(w>>5)&31] != 0: // ADD Xd, Xn, #imm
				if a := page[(w>>5)&31] + uint64((w>>10)&0xfff); a >= g.base && a-g.base < uint64(len(code)) {
					g.taken[a] = true
				}
				page[w&31] = 0
			case w&0x9f000000 == 0x10000000: // ADR
				imm := int64(int32(((w>>5)&0x7ffff)<<2|(w>>29)&3) << 11 >> 11)
				g.taken[uint64(int64(pc)+imm)] = true
			}
		}
	}
	return g.taken[addr]
}

// callers returns the direct calls (BL, and B as a tail call) to target.
func (g *guardIndex) callers(code []byte, target uint64) []uint64 {
	if g.bl == nil {
		g.bl = map[uint64][]uint64{}
		for i := 0; i < g.words; i++ {
			// BL, or B: a tail call.
			if w := w32(code, i); w&0x7c000000 == 0x14000000 {
				pc := g.base + uint64(i)*4
				t := pc + uint64(int64(int32(w<<6)>>6)*4)
				if len(g.bl[t]) < 64 {
					g.bl[t] = append(g.bl[t], pc)
				}
			}
		}
	}
	return g.bl[target]
}

// shapeGuards finds guards for the given hits, one index per region.
type shapeGuards struct {
	regions []isa.Code
	idx     map[int]*guardIndex
	calls   map[uint64]string // function start → why its callers guard it
	// exported are the functions others can call (dynamic symbols);
	// dataPointers calls back with every value that may be a code pointer
	// (relocation addends, words of the data segments).
	exported     map[uint64]bool
	dataPointers func(func(uint64))
	pointers     map[uint64]bool
}

// why says why the instruction at addr, in the function starting at fn
// (0: unknown), runs only after a CPU check, or "".
func (s *shapeGuards) why(addr, fn uint64) string {
	g, code := s.index(addr)
	if g == nil {
		return ""
	}
	if why := g.guarded(code, addr); why != "" {
		return why
	}
	if g.probe(code, addr) {
		return "a CPU probe (the instruction and RET, run under a SIGILL handler)"
	}
	// A function called only from behind CPU checks (glibc's
	// __libc_mtag_tag_region after `if (mtag_enabled)`).
	if fn == 0 {
		return ""
	}
	if s.calls == nil {
		s.calls = map[uint64]string{}
	}
	if why, ok := s.calls[fn]; ok {
		return why
	}
	why := ""
	if cg, ccode := s.index(fn); cg != nil && !s.escapes(cg, ccode, fn) {
		sites := cg.callers(ccode, fn)
		for i, c := range sites {
			if cg.guarded(ccode, c) == "" {
				break
			}
			if i == len(sites)-1 {
				why = fmt.Sprintf("called only from behind CPU checks (%d call(s), the first at 0x%x)", len(sites), sites[0])
			}
		}
	}
	s.calls[fn] = why
	return why
}

// escapes reports whether a function can be called other than by the
// direct calls seen: it is exported, or its address is taken in code
// (ADRP+ADD, ADR), in a relocation or in the data segments.
func (s *shapeGuards) escapes(g *guardIndex, code []byte, fn uint64) bool {
	if s.exported[fn] || g.takenAt(code, fn) {
		return true
	}
	if s.pointers == nil {
		s.pointers = map[uint64]bool{}
		if s.dataPointers != nil {
			s.dataPointers(func(v uint64) {
				if _, code := s.index(v); code != nil {
					s.pointers[v] = true
				}
			})
		}
	}
	return s.pointers[fn]
}

func (s *shapeGuards) index(addr uint64) (*guardIndex, []byte) {
	for ri, r := range s.regions {
		if r.Addr <= addr && addr-r.Addr < uint64(len(r.Data)) {
			g := s.idx[ri]
			if g == nil {
				g = buildGuardIndex(r.Data, r.Addr, r.Release)
				s.idx[ri] = g
			}
			return g, r.Data
		}
	}
	return nil, nil
}
