package scan

import (
	"debug/elf"
	"encoding/binary"
	"sort"
)

// The loader's view of an ELF image. What runs is decided by the program
// headers: PT_LOAD segments with execute permission hold the code, and
// PT_DYNAMIC holds what the dynamic linker reads (DT_NEEDED, DT_VERNEED,
// the dynamic symbols, relocations). Section headers are ignored by the
// loader, so they can be removed (sstrip) or edited without changing what
// runs: the scanner uses them only for detail (names, data inside code).

// span is a half-open range [lo, hi) of addresses or offsets.
type span struct{ lo, hi uint64 }

// mergeSpans sorts and merges overlapping or touching spans.
func mergeSpans(s []span) []span {
	sort.Slice(s, func(i, j int) bool { return s[i].lo < s[j].lo })
	out := s[:0]
	for _, x := range s {
		if x.hi <= x.lo {
			continue
		}
		if n := len(out); n > 0 && x.lo <= out[n-1].hi {
			if x.hi > out[n-1].hi {
				out[n-1].hi = x.hi
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// segment is an executable PT_LOAD segment's bytes in the file.
type segment struct {
	off, vaddr, size uint64
}

// execSegments returns the executable PT_LOAD segments, clipped to the file
// and with overlapping copies merged, so every byte is classified once
// however many headers describe it.
// cutSpan removes cut from spans (sorted, disjoint), keeping what lies on
// either side of it.
func cutSpan(spans []span, cut span) []span {
	var out []span
	for _, s := range spans {
		if s.hi <= cut.lo || s.lo >= cut.hi {
			out = append(out, s)
			continue
		}
		if s.lo < cut.lo {
			out = append(out, span{s.lo, cut.lo})
		}
		if s.hi > cut.hi {
			out = append(out, span{cut.hi, s.hi})
		}
	}
	return out
}

func execSegments(f *elf.File, n uint64) (segs []segment, wrapped int) {
	var spans []span
	delta := map[uint64]uint64{} // start offset → vaddr-offset of its segment
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 || p.Off >= n {
			continue
		}
		size := min(p.Filesz, n-p.Off)
		if p.Vaddr+size < p.Vaddr {
			wrapped++ // wraps around the address space: no loader maps it
			continue
		}
		spans = append(spans, span{p.Off, p.Off + size})
		if _, ok := delta[p.Off]; !ok {
			delta[p.Off] = p.Vaddr - p.Off
		}
	}
	for _, s := range mergeSpans(spans) {
		segs = append(segs, segment{off: s.lo, vaddr: s.lo + delta[s.lo], size: s.hi - s.lo})
	}
	return segs, wrapped
}

// vaddrOff maps a virtual address to a file offset through the PT_LOAD
// segments, as the loader lays the file out; ok is false outside them.
func vaddrOff(f *elf.File, n uint64, addr uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			off := p.Off + (addr - p.Vaddr)
			if off < n {
				return off, true
			}
		}
	}
	return 0, false
}

// loaderDyn is what PT_DYNAMIC says.
type loaderDyn struct {
	present bool
	tags    map[elf.DynTag][]uint64
	span    span // the dynamic array's file range
}

func (d loaderDyn) one(t elf.DynTag) (uint64, bool) {
	if v := d.tags[t]; len(v) > 0 {
		return v[0], true
	}
	return 0, false
}

// readLoaderDyn reads the dynamic array that PT_DYNAMIC points at.
func readLoaderDyn(f *elf.File, data []byte) loaderDyn {
	n := uint64(len(data))
	var d loaderDyn
	for _, p := range f.Progs {
		if p.Type != elf.PT_DYNAMIC || p.Off >= n {
			continue
		}
		b := data[p.Off : p.Off+min(p.Filesz, n-p.Off)]
		d = loaderDyn{present: true, tags: map[elf.DynTag][]uint64{}, span: span{p.Off, p.Off + uint64(len(b))}}
		dynEntries(f, b, func(tag elf.DynTag, val uint64) { d.tags[tag] = append(d.tags[tag], val) })
		break // the loader uses the first
	}
	return d
}

// dynBytes returns the bytes of a table PT_DYNAMIC locates by address
// (addrTag) and size (sizeTag, or size when sizeTag is 0).
func dynBytes(f *elf.File, data []byte, d loaderDyn, addrTag, sizeTag elf.DynTag, size uint64) []byte {
	a, ok := d.one(addrTag)
	if !ok {
		return nil
	}
	if sizeTag != 0 {
		if size, ok = d.one(sizeTag); !ok {
			return nil
		}
	}
	off, ok := vaddrOff(f, uint64(len(data)), a)
	if !ok {
		return nil
	}
	return data[off : off+min(size, uint64(len(data))-off)]
}

// dynInfoFromLoader reads DT_NEEDED, DT_SONAME and the version needs
// (DT_VERNEED/DT_VERNEEDNUM) through PT_DYNAMIC.
func dynInfoFromLoader(f *elf.File, data []byte, d loaderDyn) dynInfo {
	var out dynInfo
	strs := dynBytes(f, data, d, elf.DT_STRTAB, elf.DT_STRSZ, 0)
	str := func(off uint64) string { return cstr(strs, off) }
	for _, v := range d.tags[elf.DT_NEEDED] {
		out.needed = append(out.needed, str(v))
	}
	if v, ok := d.one(elf.DT_SONAME); ok {
		out.soname = str(v)
	}
	num, _ := d.one(elf.DT_VERNEEDNUM)
	if vn := dynBytes(f, data, d, elf.DT_VERNEED, 0, uint64(len(data))); vn != nil {
		out.verNeed = verNeeds(f.ByteOrder, vn, strs, int(min(num, 1<<16)))
	}
	return out
}

func cstr(b []byte, off uint64) string {
	if off >= uint64(len(b)) {
		return ""
	}
	for i := off; i < uint64(len(b)); i++ {
		if b[i] == 0 {
			return string(b[off:i])
		}
	}
	return ""
}

// verNeeds walks a version-needs table (Elf_Verneed entries with their
// Elf_Vernaux lists), at most max entries (0: until a zero next link).
func verNeeds(bo binary.ByteOrder, b, strs []byte, max int) []string {
	var out []string
	walkVerNeed(bo, b, strs, max, func(_ uint16, name string) { out = append(out, name) })
	return out
}

// walkVerNeed calls fn with each needed version's index (vna_other, what
// the version-symbol table holds) and name.
func walkVerNeed(bo binary.ByteOrder, b, strs []byte, max int, fn func(idx uint16, name string)) {
	for off, n := 0, 0; off >= 0 && off+16 <= len(b) && n < 1<<16 && (max == 0 || n < max); n++ {
		cnt := int(bo.Uint16(b[off+2:]))
		aux := off + int(bo.Uint32(b[off+8:]))
		for j := 0; j < cnt && aux >= 0 && aux+16 <= len(b); j++ {
			if s := cstr(strs, uint64(bo.Uint32(b[aux+8:]))); s != "" {
				fn(bo.Uint16(b[aux+6:]), s)
			}
			next := int(bo.Uint32(b[aux+12:]))
			if next <= 0 {
				break
			}
			aux += next
		}
		next := int(bo.Uint32(b[off+12:]))
		if next <= 0 {
			break
		}
		off += next
	}
}

// versionedImports returns the undefined dynamic symbols that need a
// version want accepts (nil: any), each with the version's name: the
// version-symbol table runs beside the dynamic symbols and its indexes name
// entries of the version-needs table. It reads the loader's view
// (DT_VERSYM, DT_VERNEED), or the section headers when there is no
// PT_DYNAMIC. Only the names of the symbols returned are read.
func versionedImports(f *elf.File, data []byte, ld loaderDyn, dyn *symtab, want func(version string) bool) []elf.ImportedSymbol {
	var versym, verneed, strs []byte
	max := 0
	if ld.present {
		versym = dynBytes(f, data, ld, elf.DT_VERSYM, 0, uint64(dyn.len()+1)*2)
		verneed = dynBytes(f, data, ld, elf.DT_VERNEED, 0, uint64(len(data)))
		strs = dynBytes(f, data, ld, elf.DT_STRTAB, elf.DT_STRSZ, 0)
		num, _ := ld.one(elf.DT_VERNEEDNUM)
		max = int(min(num, 1<<16))
	} else {
		for _, s := range f.Sections {
			switch {
			case s.Type == elf.SHT_GNU_VERSYM && versym == nil:
				versym = sectionBytes(data, s)
			case s.Type == elf.SHT_GNU_VERNEED && verneed == nil && int(s.Link) < len(f.Sections):
				verneed, strs = sectionBytes(data, s), sectionBytes(data, f.Sections[s.Link])
			}
		}
	}
	// Version indexes are small (one per needed version); names[idx] is
	// the version, "" when it is not wanted.
	var names []string
	walkVerNeed(f.ByteOrder, verneed, strs, max, func(idx uint16, name string) {
		idx &= 0x7fff
		if want != nil && !want(name) {
			return
		}
		for int(idx) >= len(names) {
			names = append(names, "")
		}
		names[idx] = name
	})
	if len(names) == 0 {
		return nil
	}
	var out []elf.ImportedSymbol
	for i, n := 0, dyn.len(); i < n; i++ {
		j := (i + 1) * 2 // entry 0, the null symbol, is not in dyn
		if j+2 > len(versym) {
			break
		}
		v := int(f.ByteOrder.Uint16(versym[j:]) & 0x7fff)
		if v >= len(names) || names[v] == "" {
			continue
		}
		if s := dyn.at(i); s.shndx() == uint16(elf.SHN_UNDEF) {
			out = append(out, elf.ImportedSymbol{Name: dyn.name(s), Version: names[v]})
		}
	}
	return out
}

// loaderDynsym returns the entries and string table of the dynamic symbol
// table PT_DYNAMIC locates (64-bit objects only); its length comes from
// DT_HASH or DT_GNU_HASH, as the loader knows it.
func loaderDynsym(f *elf.File, data []byte, d loaderDyn) (entries, str []byte) {
	if f.Class != elf.ELFCLASS64 {
		return nil, nil
	}
	n := symCount(f, data, d)
	return dynBytes(f, data, d, elf.DT_SYMTAB, 0, n*24), dynBytes(f, data, d, elf.DT_STRTAB, elf.DT_STRSZ, 0)
}

func symCount(f *elf.File, data []byte, d loaderDyn) uint64 {
	bo := f.ByteOrder
	if h := dynBytes(f, data, d, elf.DT_HASH, 0, 8); len(h) == 8 {
		return uint64(bo.Uint32(h[4:])) // nchain
	}
	g := dynBytes(f, data, d, elf.DT_GNU_HASH, 0, uint64(len(data)))
	if len(g) < 16 {
		return 0
	}
	nbuckets, symoff, bloom := uint64(bo.Uint32(g)), uint64(bo.Uint32(g[4:])), uint64(bo.Uint32(g[8:]))
	bstart := 16 + bloom*8
	if nbuckets == 0 || bstart+nbuckets*4 > uint64(len(g)) {
		return 0
	}
	var max uint64
	for i := uint64(0); i < nbuckets; i++ {
		if v := uint64(bo.Uint32(g[bstart+i*4:])); v > max {
			max = v
		}
	}
	if max < symoff {
		return symoff
	}
	chains := bstart + nbuckets*4
	for i := max; ; i++ {
		p := chains + (i-symoff)*4
		if p+4 > uint64(len(g)) {
			return i
		}
		if bo.Uint32(g[p:])&1 != 0 {
			return i + 1
		}
	}
}

// ehTable is the unwind table's list of function starts, read where it
// lies: PT_GNU_EH_FRAME points at .eh_frame_hdr's binary-search table. The
// unwinder uses it, so it survives stripping and section-header edits. The
// format says it is sorted; a table that is not is read start to end.
type ehTable struct {
	b      []byte // the table: count entries of (initial location, FDE), 4 bytes each
	vaddr  uint64 // PT_GNU_EH_FRAME's address (the entries are relative to it)
	bo     binary.ByteOrder
	n      int
	sorted int8   // 0: not checked yet; 1: sorted; -1: not
	size   uint64 // the bytes of .eh_frame_hdr the table ends at (0: not read)
}

// length is how long .eh_frame_hdr is by its own header (0: not known).
func (e *ehTable) length() uint64 { return e.size }

// readEhTable finds the unwind table (empty when there is none or it is in
// a form this does not read).
func readEhTable(f *elf.File, data []byte) *ehTable {
	n := uint64(len(data))
	for _, p := range f.Progs {
		if p.Type != elf.PT_GNU_EH_FRAME || p.Off >= n {
			continue
		}
		b := data[p.Off : p.Off+min(p.Filesz, n-p.Off)]
		// version 1; eh_frame_ptr enc; fde_count enc; table enc (datarel|sdata4 = 0x3b).
		if len(b) < 12 || b[0] != 1 || b[3] != 0x3b {
			return &ehTable{}
		}
		pos := 4
		if sz := encSize(b[1]); sz == 0 {
			return &ehTable{}
		} else {
			pos += sz
		}
		if b[2] != 0x03 && b[2] != 0x0b { // udata4 / sdata4, absolute
			return &ehTable{}
		}
		if pos+4 > len(b) {
			return &ehTable{}
		}
		count := uint64(f.ByteOrder.Uint32(b[pos:]))
		pos += 4
		count = min(count, uint64(len(b)-pos)/8)
		return &ehTable{b: b[pos : pos+int(count)*8], vaddr: p.Vaddr, bo: f.ByteOrder, n: int(count), size: uint64(pos) + count*8}
	}
	return &ehTable{}
}

// at returns the start of function i.
func (e *ehTable) at(i int) uint64 {
	return uint64(int64(e.vaddr) + int64(int32(e.bo.Uint32(e.b[i*8:]))))
}

func (e *ehTable) isSorted() bool {
	if e.sorted == 0 {
		e.sorted = 1
		for i := 1; i < e.n; i++ {
			if e.at(i) < e.at(i-1) {
				e.sorted = -1
				break
			}
		}
	}
	return e.sorted > 0
}

// firstIn returns the lowest start in [lo, hi).
func (e *ehTable) firstIn(lo, hi uint64) (uint64, bool) {
	if e.isSorted() {
		i := sort.Search(e.n, func(i int) bool { return e.at(i) >= lo })
		if i < e.n && e.at(i) < hi {
			return e.at(i), true
		}
		return 0, false
	}
	first, ok := uint64(0), false
	for i := 0; i < e.n; i++ {
		if a := e.at(i); a >= lo && a < hi && (!ok || a < first) {
			first, ok = a, true
		}
	}
	return first, ok
}

// lastAtOrBefore returns the highest start at or before addr.
func (e *ehTable) lastAtOrBefore(addr uint64) (uint64, bool) {
	if e == nil {
		return 0, false
	}
	if e.isSorted() {
		if i := sort.Search(e.n, func(i int) bool { return e.at(i) > addr }) - 1; i >= 0 {
			return e.at(i), true
		}
		return 0, false
	}
	last, ok := uint64(0), false
	for i := 0; i < e.n; i++ {
		if a := e.at(i); a <= addr && (!ok || a > last) {
			last, ok = a, true
		}
	}
	return last, ok
}

func encSize(enc byte) int {
	switch enc & 0x0f {
	case 0x03, 0x0b:
		return 4
	case 0x04, 0x0c:
		return 8
	}
	return 0
}

// dynEntries calls fn with each (tag, value) of a dynamic table in b, up
// to DT_NULL, in the file's class and byte order.
func dynEntries(f *elf.File, b []byte, fn func(tag elf.DynTag, val uint64)) {
	size := 16
	if f.Class == elf.ELFCLASS32 {
		size = 8
	}
	for i := 0; i+size <= len(b); i += size {
		var tag, val uint64
		if size == 16 {
			tag, val = f.ByteOrder.Uint64(b[i:]), f.ByteOrder.Uint64(b[i+8:])
		} else {
			tag, val = uint64(f.ByteOrder.Uint32(b[i:])), uint64(f.ByteOrder.Uint32(b[i+4:]))
		}
		if elf.DynTag(tag) == elf.DT_NULL {
			return
		}
		fn(elf.DynTag(tag), val)
	}
}
