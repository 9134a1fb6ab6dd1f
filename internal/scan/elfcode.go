package scan

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sort"

	"github.com/dorisarm/dorisarm/internal/isa"
)

// sectionNames names the allocated section an address falls in.
type sectionNames struct{ spans []namedSpan }

type namedSpan struct {
	lo, hi uint64
	name   string
}

func (n sectionNames) at(addr uint64) string {
	i := sort.Search(len(n.spans), func(i int) bool { return n.spans[i].hi > addr })
	if i < len(n.spans) && n.spans[i].lo <= addr {
		return "(no symbol, in " + n.spans[i].name + ")"
	}
	return "(no symbol)"
}

// maxSections bounds how many distinct section headers are used for detail.
const maxSections = 1 << 16

// codeRegions decides which bytes are instructions. Linked images: every
// byte of an executable PT_LOAD segment, except what can be shown to be data
// — the ELF and program headers, the tables PT_DYNAMIC, PT_INTERP, PT_NOTE
// and PT_GNU_EH_FRAME locate, non-executable sections and $d ranges — and a
// section or $d range that holds a function the loader or unwinder can reach
// (the entry point, DT_INIT/DT_FINI, a dynamic symbol, an unwind-table entry)
// is not believed: its bytes are classified and the lie is reported.
// Relocatable objects (.o) have no segments: their executable sections.
func (a *analyzed) codeRegions(f *elf.File, data []byte, syms, dyn *symtab, ld loaderDyn) ([]isa.Code, sectionNames) {
	secs := a.allocSections(f)
	var names sectionNames
	for _, s := range secs {
		names.spans = append(names.spans, namedSpan{s.addr, s.end, s.s.Name})
	}
	marks := dataMarks(f, syms)
	segs, wrapped := execSegments(f, uint64(len(data)))
	if wrapped > 0 {
		a.findings = append(a.findings, unreadable(a.file.Path, fmt.Sprintf("%d executable segment(s) whose addresses wrap past the end of the address space; no loader maps them, and their bytes were not scanned", wrapped)))
	}
	if len(segs) == 0 {
		return a.relocatableRegions(f, data, marks), names
	}

	// Functions the loader or unwinder can reach: data does not hold them.
	var roots []uint64 // the entry point, DT_INIT, DT_FINI
	if f.Entry != 0 {
		roots = append(roots, f.Entry)
	}
	for _, t := range []elf.DynTag{elf.DT_INIT, elf.DT_FINI} {
		if v, ok := ld.one(t); ok && v != 0 {
			roots = append(roots, v)
		}
	}
	roots = append(roots, initArrays(f, data, ld)...)
	eh := a.ehTable(f, data)
	// Data the file and program headers and PT_DYNAMIC locate.
	hdrs := headerData(f, data, ld, dyn, eh)
	roots = append(roots, pltStart(f, data, ld)...)

	claims, absurd, code := segmentClaims(segs, secs, hdrs, marks)
	if len(claims) > 0 {
		firstRoots(claims, roots, eh, dyn)
		overCode(claims, code)
	}
	a.reportAbsurd(absurd)
	describe := func(addr uint64) string {
		if addr == f.Entry {
			return "the entry point"
		}
		for _, s := range dyn.all() { // the first dynamic symbol there names it (rare: only for a lie)
			if isFunc(s) && s.value == addr && dyn.nameByte(s) != 0 {
				return "dynamic symbol " + dyn.name(s)
			}
		}
		return fmt.Sprintf("the function at 0x%x (unwind table, DT_INIT/DT_FINI, an init/fini array or the PLT)", addr)
	}
	return a.segmentRegions(data, segs, claims, describe), names
}

// allocSec is an allocated section of a linked image, by address.
type allocSec struct {
	idx            int
	s              *elf.Section
	addr, end, off uint64
}

// allocSections are the distinct allocated sections, by address (copies
// of one header count once; at most maxSections).
func (a *analyzed) allocSections(f *elf.File) []allocSec {
	var secs []allocSec
	seen := map[[3]uint64]bool{}
	for i, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Size == 0 || s.Addr+s.Size < s.Addr {
			continue
		}
		k := [3]uint64{s.Addr, s.Size, uint64(s.Flags)}
		if seen[k] {
			continue
		}
		seen[k] = true
		if len(secs) == maxSections {
			a.findings = append(a.findings, Finding{Kind: KindHeaders, Severity: SevInfo, Path: a.file.Path,
				Detail: fmt.Sprintf("more than %d distinct section headers; the rest are not used for detail (the code is judged from the program headers)", maxSections)})
			break
		}
		secs = append(secs, allocSec{i, s, s.Addr, s.Addr + s.Size, s.Offset})
	}
	sort.Slice(secs, func(i, j int) bool { return secs[i].addr < secs[j].addr })
	return secs
}

// relocatableRegions are a relocatable object's code: its executable
// sections, each byte range once, less their $d ranges.
func (a *analyzed) relocatableRegions(f *elf.File, data []byte, marks map[int][]span) []isa.Code {
	var regions []isa.Code
	var taken []span
	for i, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 || s.Type != elf.SHT_PROGBITS {
			continue
		}
		b := sectionBytes(data, s)
		if b == nil {
			a.findings = append(a.findings, unreadable(a.file.Path, fmt.Sprintf("section %s lies outside the file (truncated?)", s.Name)))
			continue
		}
		if s.Addr+uint64(len(b)) < s.Addr {
			a.findings = append(a.findings, unreadable(a.file.Path, fmt.Sprintf("section %s: its addresses wrap past the end of the address space; not scanned", s.Name)))
			continue
		}
		sp := span{s.Offset, s.Offset + s.Size}
		if slices.ContainsFunc(taken, func(t span) bool { return sp.lo >= t.lo && sp.hi <= t.hi }) {
			continue
		}
		if len(taken) >= maxSections {
			a.findings = append(a.findings, unreadable(a.file.Path, fmt.Sprintf("more than %d executable sections; the rest were not scanned", maxSections)))
			break
		}
		taken = append(taken, sp)
		r := isa.Code{Data: b, Addr: s.Addr, Read: reader(b), Release: release(b)}
		for _, m := range marks[i] {
			r.Skip = append(r.Skip, [2]uint64{m.lo, m.hi})
		}
		r.Skip = mergeSkip(r.Skip)
		regions = append(regions, r)
	}
	return regions
}

// segmentClaims are what the headers, PT_DYNAMIC, the section headers and
// $d mapping symbols (in section order) claim is data, per segment, in
// order (each is believed unless a reachable function starts in it); the
// header ranges not believed because they overrun their segment; and the
// executable sections that describe a segment's bytes.
func segmentClaims(segs []segment, secs []allocSec, hdrs []headerRange, marks map[int][]span) (claims []claimed, absurd []headerRange, code []codeSpan) {
	for k, sg := range segs {
		for _, s := range secs {
			if s.s.Flags&elf.SHF_EXECINSTR != 0 && s.s.Type == elf.SHT_PROGBITS && s.addr >= sg.vaddr && s.off == s.addr-sg.vaddr+sg.off {
				code = append(code, codeSpan{s.addr, s.end, s.s.Name})
			}
		}
		claim := func(lo, hi uint64, what string, hdr bool) {
			if lo, hi = max(lo, sg.vaddr), min(hi, sg.vaddr+sg.size); lo < hi {
				claims = append(claims, claimed{seg: k, lo: lo, hi: hi, what: what, hdr: hdr})
			}
		}
		for _, h := range hdrs {
			lo, hi := max(h.off, sg.off), min(h.off+h.size, sg.off+sg.size)
			switch {
			case lo >= hi:
			case !h.sane:
				absurd = append(absurd, h)
			default:
				claim(lo-sg.off+sg.vaddr, hi-sg.off+sg.vaddr, h.what, true)
			}
		}
		for _, s := range secs {
			if s.s.Flags&elf.SHF_EXECINSTR != 0 || s.s.Type == elf.SHT_NOBITS {
				continue // code, or nothing in the file: the segment's bytes stand
			}
			// A section whose file offset disagrees with the segment's
			// mapping does not describe these bytes.
			if s.addr < sg.vaddr || s.off != s.addr-sg.vaddr+sg.off {
				continue
			}
			claim(s.addr, s.end, "section "+s.s.Name, false)
		}
		// In section order: which claims are reported (the first eight
		// lies) must not depend on a map's iteration order.
		for _, si := range slices.Sorted(maps.Keys(marks)) {
			for _, m := range marks[si] {
				claim(m.lo, m.hi, "a $d mapping symbol", false)
			}
		}
	}
	return claims, absurd, code
}

// reportAbsurd reports the header ranges not believed (the first eight).
func (a *analyzed) reportAbsurd(absurd []headerRange) {
	for i, h := range absurd {
		if i == 8 {
			a.findings = append(a.findings, Finding{Kind: KindHeaders, Severity: SevInfo, Path: a.file.Path,
				Detail: fmt.Sprintf("%d more tables the headers locate overrun their segment; judged as code", len(absurd)-8)})
			break
		}
		a.findings = append(a.findings, Finding{Kind: KindHeaders, Severity: SevInfo, Path: a.file.Path,
			Detail: fmt.Sprintf("%s says %d bytes of data start at file offset 0x%x, past the end of the segment that maps them (or of the file); not believed, so the executable bytes it covers are judged as code", h.what, h.size, h.off)})
	}
}

// segmentRegions are the executable segments, less the data claims
// believed; the claims not believed (a reachable function or code in
// them) are reported, the first eight by name.
func (a *analyzed) segmentRegions(data []byte, segs []segment, claims []claimed, describe func(uint64) string) []isa.Code {
	var regions []isa.Code
	lies := 0
	for k, sg := range segs {
		b := data[sg.off : sg.off+sg.size]
		r := isa.Code{Data: b, Addr: sg.vaddr, Read: reader(b), Release: release(b)}
		var skip []span
		for _, c := range claims {
			if c.seg != k {
				continue
			}
			if !c.ok {
				skip = append(skip, span{c.lo, c.hi})
				continue
			}
			lies++
			if lies <= 8 {
				a.findings = append(a.findings, Finding{Kind: KindHeaders, Severity: SevInfo, Path: a.file.Path, Address: fmt.Sprintf("0x%x", c.root),
					Detail: c.lie(describe)})
			}
		}
		for _, s := range mergeSpans(skip) {
			r.Skip = append(r.Skip, [2]uint64{s.lo, s.hi})
		}
		regions = append(regions, r)
	}
	if lies > 8 {
		a.findings = append(a.findings, Finding{Kind: KindHeaders, Severity: SevInfo, Path: a.file.Path,
			Detail: fmt.Sprintf("%d more data claims of the headers or mapping symbols hold reachable functions or code; judged as code", lies-8)})
	}
	return regions
}

// claimed is a range of a segment that the headers, PT_DYNAMIC, the
// section headers or a $d mapping symbol say is data (hdr: the ELF or
// program headers or PT_DYNAMIC), and the first reachable function in it
// (ok) if any, or the executable section it overlaps (code).
type claimed struct {
	seg    int
	lo, hi uint64
	what   string
	hdr    bool
	root   uint64
	ok     bool
	code   string
}

// lie says why the claim is not believed; describe names a root.
func (c claimed) lie(describe func(uint64) string) string {
	if c.code != "" {
		return fmt.Sprintf("%s claims 0x%x-0x%x is data, but it overlaps the executable section %s; those bytes are judged as code", c.what, c.lo, c.hi, c.code)
	}
	if c.hdr {
		return fmt.Sprintf("%s claims 0x%x-0x%x is data, but %s starts there; those bytes are judged as code", c.what, c.lo, c.hi, describe(c.root))
	}
	return fmt.Sprintf("%s claims 0x%x-0x%x is data, but %s starts there; the section headers disagree with what the loader runs, so those bytes are judged as code", c.what, c.lo, c.hi, describe(c.root))
}

// headerRange is a table the ELF or program headers or PT_DYNAMIC locate:
// its file range as declared and whether it lies inside the PT_LOAD segment
// that maps its start (sane); a table that overruns its segment or the file
// is not taken as data.
type headerRange struct {
	off, size uint64
	what      string
	sane      bool
}

// headerData returns the tables the ELF header, the program headers and
// PT_DYNAMIC locate. Sizes are those the headers state, except where the
// table says its own length (the unwind table's header, PT_INTERP's
// string), which bounds them.
func headerData(f *elf.File, data []byte, ld loaderDyn, dyn *symtab, eh *ehTable) []headerRange {
	n := uint64(len(data))
	var out []headerRange
	byOff := func(off, size, vaddr uint64, what string) {
		out = append(out, headerRange{off, size, what, loadHolds(f, n, off, size, vaddr)})
	}
	ehsize, phoff, phsize := elfHeaderLayout(f, data)
	out = append(out, headerRange{0, ehsize, "the ELF header", ehsize <= n},
		headerRange{phoff, phsize, "the program header table", phoff <= n && phsize <= n-phoff})
	for _, p := range f.Progs {
		size := p.Filesz
		switch p.Type {
		case elf.PT_GNU_EH_FRAME:
			if l := eh.length(); l > 0 {
				size = min(size, l)
			}
		case elf.PT_INTERP:
			if p.Off < n {
				if i := bytes.IndexByte(data[p.Off:p.Off+min(size, n-p.Off)], 0); i >= 0 {
					size = uint64(i) + 1
				}
			}
		case elf.PT_DYNAMIC, elf.PT_NOTE:
		default:
			continue
		}
		byOff(p.Off, size, p.Vaddr, p.Type.String())
	}
	byAddr := func(tag elf.DynTag, size uint64, what string) {
		if a, ok := ld.one(tag); ok {
			if off, ok := vaddrOff(f, n, a); ok {
				byOff(off, size, a, what)
			}
		}
	}
	for _, t := range [][2]elf.DynTag{{elf.DT_STRTAB, elf.DT_STRSZ}, {elf.DT_RELA, elf.DT_RELASZ}, {elf.DT_JMPREL, elf.DT_PLTRELSZ}} {
		if size, ok := ld.one(t[1]); ok {
			byAddr(t[0], size, t[0].String()+"/"+t[1].String())
		}
	}
	nsym := uint64(dyn.len() + 1)
	byAddr(elf.DT_SYMTAB, nsym*uint64(symEntSize(f)), "DT_SYMTAB (with the dynamic symbol count)")
	byAddr(elf.DT_VERSYM, nsym*2, "DT_VERSYM (with the dynamic symbol count)")
	return out
}

// loadHolds reports whether the file range [off, off+size) lies inside
// the bytes of the PT_LOAD segment that holds off, at the address vaddr
// that segment gives it.
func loadHolds(f *elf.File, n, off, size, vaddr uint64) bool {
	if off > n || size > n-off {
		return false
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && off >= p.Off && off-p.Off < p.Filesz {
			return size <= p.Filesz-(off-p.Off) && vaddr-p.Vaddr == off-p.Off
		}
	}
	return false
}

// pltStart returns where the PLT starts, as the first lazily bound GOT
// slot says (it holds the PLT's first entry until the loader binds it):
// code the loader jumps to that need have no symbol or unwind entry.
func pltStart(f *elf.File, data []byte, ld loaderDyn) []uint64 {
	rel := dynBytes(f, data, ld, elf.DT_JMPREL, 0, 24)
	if len(rel) < 24 || f.Class != elf.ELFCLASS64 {
		return nil
	}
	got := f.ByteOrder.Uint64(rel)
	off, ok := vaddrOff(f, uint64(len(data)), got)
	if !ok || off+8 > uint64(len(data)) {
		return nil
	}
	if v := f.ByteOrder.Uint64(data[off:]); v != 0 {
		return []uint64{v}
	}
	return nil
}

// maxInitArray bounds the entries read of each init/fini array.
const maxInitArray = 1 << 12

// initArrays returns the functions DT_PREINIT_ARRAY, DT_INIT_ARRAY and
// DT_FINI_ARRAY list, as the file holds them (the linker writes the
// relocated value there too; a zero slot is left out).
func initArrays(f *elf.File, data []byte, ld loaderDyn) []uint64 {
	if f.Class != elf.ELFCLASS64 {
		return nil
	}
	var out []uint64
	for _, t := range [][2]elf.DynTag{{elf.DT_PREINIT_ARRAY, elf.DT_PREINIT_ARRAYSZ}, {elf.DT_INIT_ARRAY, elf.DT_INIT_ARRAYSZ}, {elf.DT_FINI_ARRAY, elf.DT_FINI_ARRAYSZ}} {
		size, _ := ld.one(t[1])
		b := dynBytes(f, data, ld, t[0], 0, min(size, 8*maxInitArray))
		for i := 0; i+8 <= len(b); i += 8 {
			if v := f.ByteOrder.Uint64(b[i:]); v != 0 {
				out = append(out, v)
			}
		}
	}
	return out
}

// codeSpan is an executable section's address range, as its segment maps it.
type codeSpan struct {
	lo, hi uint64
	name   string
}

// overCode marks the header claims that overlap an executable section
// (headers that would hide code a section header says is there).
func overCode(cs []claimed, code []codeSpan) {
	for i := range cs {
		c := &cs[i]
		if !c.hdr || c.ok {
			continue
		}
		for _, s := range code {
			if s.lo < c.hi && c.lo < s.hi {
				c.code, c.ok, c.root = s.name, true, max(s.lo, c.lo)
				break
			}
		}
	}
}

// firstRoots sets, for each claim that bytes are data, the first function
// the loader or unwinder can reach in it: of roots, the unwind table
// (searched, being sorted) and the dynamic function symbols. The symbols
// are read in one pass for all claims; only those inside a claim (one
// search of the claims' union each; in a sound object, none) are kept and
// sorted.
func firstRoots(cs []claimed, roots []uint64, eh *ehTable, dyn *symtab) {
	union := make([]span, len(cs))
	for i, c := range cs {
		union[i] = span{c.lo, c.hi}
	}
	union = mergeSpans(union)
	inside := slices.Clone(roots)
	for _, s := range dyn.all() {
		if isFunc(s) && inSpans(union, s.value) {
			inside = append(inside, s.value)
		}
	}
	slices.Sort(inside)
	for i := range cs {
		c := &cs[i]
		c.root, c.ok = eh.firstIn(c.lo, c.hi)
		if j, _ := slices.BinarySearch(inside, c.lo); j < len(inside) && inside[j] < c.hi && (!c.ok || inside[j] < c.root) {
			c.root, c.ok = inside[j], true
		}
	}
}

// inSpans reports whether v lies in one of spans (sorted, disjoint). Like
// firstAtOrAfter, the search has no data-dependent branch.
func inSpans(spans []span, v uint64) bool {
	n := len(spans)
	if n == 0 {
		return false
	}
	base := 0
	for n > 1 {
		half := n >> 1
		_, below := bits.Sub64(v, spans[base+half].hi, 0) // 1 when v < hi
		base += half * int(1-below)
		n -= half
	}
	_, below := bits.Sub64(v, spans[base].hi, 0)
	base += int(1 - below)
	return base < len(spans) && spans[base].lo <= v
}

// elfHeaderLayout returns the ELF header's size and the program header
// table's offset and size, as the file header states them.
func elfHeaderLayout(f *elf.File, data []byte) (ehsize, phoff, phsize uint64) {
	bo := f.ByteOrder
	if f.Class == elf.ELFCLASS64 && len(data) >= 64 {
		return uint64(bo.Uint16(data[52:])), bo.Uint64(data[32:]), uint64(bo.Uint16(data[54:])) * uint64(bo.Uint16(data[56:]))
	}
	if f.Class == elf.ELFCLASS32 && len(data) >= 52 {
		return uint64(bo.Uint16(data[40:])), uint64(bo.Uint32(data[28:])), uint64(bo.Uint16(data[42:])) * uint64(bo.Uint16(data[44:]))
	}
	return 0, 0, 0
}

// dataMarks returns, per section index, the address ranges that $d mapping
// symbols mark as data (up to the next $x/$d of the section, or its end).
func dataMarks(f *elf.File, syms *symtab) map[int][]span {
	type mark struct {
		addr uint64
		data bool
	}
	marks := map[int][]mark{}
	for _, s := range syms.all() {
		n := syms.nameBytes(s)
		if len(n) >= 2 && n[0] == '$' && (n[1] == 'd' || n[1] == 'x') && (len(n) == 2 || n[2] == '.') {
			marks[int(s.shndx())] = append(marks[int(s.shndx())], mark{s.value, n[1] == 'd'})
		}
	}
	out := map[int][]span{}
	for si, ms := range marks {
		if si <= 0 || si >= len(f.Sections) {
			continue
		}
		sec := f.Sections[si]
		sort.Slice(ms, func(i, j int) bool { return ms[i].addr < ms[j].addr })
		end := sec.Addr + sec.Size
		for i, m := range ms {
			if !m.data {
				continue
			}
			stop := end
			if i+1 < len(ms) {
				stop = ms[i+1].addr
			}
			if stop > m.addr {
				out[si] = append(out[si], span{m.addr, stop})
			}
		}
	}
	return out
}

func mergeSkip(s [][2]uint64) [][2]uint64 {
	sp := make([]span, len(s))
	for i, x := range s {
		sp[i] = span{x[0], x[1]}
	}
	var out [][2]uint64
	for _, x := range mergeSpans(sp) {
		out = append(out, [2]uint64{x.lo, x.hi})
	}
	return out
}

const rAArch64Relative = 1027

// dataPointers returns a function that calls back with every value that may
// be a code address stored as data: R_AARCH64_RELATIVE addends (pointers in
// position-independent objects) and the 8-byte words of the non-executable
// PT_LOAD segments (pointers in fixed-address executables). Each byte of
// the file is read at most once per call.
func dataPointers(f *elf.File, data []byte, ld loaderDyn) func(func(uint64)) {
	return func(yield func(uint64)) {
		n := uint64(len(data))
		var relas, segs []span
		for _, t := range [][2]elf.DynTag{{elf.DT_RELA, elf.DT_RELASZ}, {elf.DT_JMPREL, elf.DT_PLTRELSZ}} {
			if a, ok := ld.one(t[0]); ok {
				if off, ok := vaddrOff(f, n, a); ok {
					sz, _ := ld.one(t[1])
					relas = append(relas, span{off, off + min(sz, n-off)})
				}
			}
		}
		for _, r := range mergeSpans(relas) {
			b := data[r.lo:r.hi]
			for i := 0; i+24 <= len(b); i += 24 {
				if elf.R_AARCH64(binary.LittleEndian.Uint64(b[i+8:])&0xffffffff) == rAArch64Relative {
					yield(binary.LittleEndian.Uint64(b[i+16:]))
				}
			}
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X == 0 && p.Off < n {
				segs = append(segs, span{p.Off, p.Off + min(p.Filesz, n-p.Off)})
			}
		}
		for _, sg := range mergeSpans(segs) {
			b := data[sg.lo:sg.hi]
			for i := 0; i+8 <= len(b); i += 8 {
				if v := binary.LittleEndian.Uint64(b[i:]); v != 0 {
					yield(v)
				}
			}
		}
	}
}
