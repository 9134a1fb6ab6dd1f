package scan

import (
	"bytes"
	"debug/elf"
)

// rawSym is a symbol read straight from the mapped file: no copies, and its
// name stays bytes in the string table until someone asks for it.
type rawSym struct {
	nameOff uint32
	info    byte
	shndx   uint16
	value   uint64
	size    uint64
}

// symtab is one symbol table (.symtab or .dynsym) with its string table.
type symtab struct {
	syms []rawSym
	str  []byte
}

func (t *symtab) nameBytes(s rawSym) []byte {
	if int(s.nameOff) >= len(t.str) {
		return nil
	}
	b := t.str[s.nameOff:]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// nameHasPrefix reports whether a symbol's name starts with p, without
// looking for the name's end.
func (t *symtab) nameHasPrefix(s rawSym, p string) bool {
	off := uint64(s.nameOff)
	return off+uint64(len(p)) <= uint64(len(t.str)) && string(t.str[off:off+uint64(len(p))]) == p
}

func (t *symtab) name(s rawSym) string { return string(t.nameBytes(s)) }

// readSymtab parses the first section of type typ, or returns an empty table.
func readSymtab(f *elf.File, data []byte, typ elf.SectionType) *symtab {
	b, str := symtabSection(f, data, typ)
	return decodeSyms(f, b, str)
}

// symtabSection returns the entries and string table of the first section
// of type typ, undecoded (nil when there is none).
func symtabSection(f *elf.File, data []byte, typ elf.SectionType) (entries, str []byte) {
	for _, s := range f.Sections {
		if s.Type != typ {
			continue
		}
		b := sectionBytes(data, s)
		if b == nil || int(s.Link) >= len(f.Sections) {
			return nil, nil
		}
		return b, sectionBytes(data, f.Sections[s.Link])
	}
	return nil, nil
}

// symEntSize is the size of one symbol table entry.
func symEntSize(f *elf.File) int {
	if f.Class == elf.ELFCLASS64 {
		return 24
	}
	return 16
}

// decodeSyms reads symbol table entries (entry 0, the null symbol, skipped).
func decodeSyms(f *elf.File, b, str []byte) *symtab {
	t := &symtab{str: str}
	bo := f.ByteOrder
	if f.Class == elf.ELFCLASS64 {
		t.syms = make([]rawSym, 0, max(len(b)/24-1, 0))
		for i := 24; i+24 <= len(b); i += 24 {
			e := b[i : i+24]
			t.syms = append(t.syms, rawSym{bo.Uint32(e), e[4], bo.Uint16(e[6:]), bo.Uint64(e[8:]), bo.Uint64(e[16:])})
		}
	} else {
		t.syms = make([]rawSym, 0, max(len(b)/16-1, 0))
		for i := 16; i+16 <= len(b); i += 16 {
			e := b[i : i+16]
			t.syms = append(t.syms, rawSym{bo.Uint32(e), e[12], bo.Uint16(e[14:]), uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:]))})
		}
	}
	return t
}

// funcSym is a function symbol; its name is read from its table when
// needed. It holds no pointer, so sorting many is cheap.
type funcSym struct {
	addr, size uint64
	nameOff    uint32
	seq        uint32 // place in the table
}

// dynInfo is what the scanner needs from .dynamic and .gnu.version_r, read
// from the mapped file (debug/elf copies the whole string table per call).
type dynInfo struct {
	needed  []string
	soname  string
	verNeed []string // every version name needed (GLIBC_2.34, GLIBCXX_3.4.30…)
}

// readDynamic reads the first .dynamic and .gnu.version_r sections: for
// objects without PT_DYNAMIC (the loader's view is preferred, see elfload.go).
func readDynamic(f *elf.File, data []byte) dynInfo {
	var d dynInfo
	for _, s := range f.Sections {
		if s.Type != elf.SHT_DYNAMIC || int(s.Link) >= len(f.Sections) {
			continue
		}
		dynstr := sectionBytes(data, f.Sections[s.Link])
		dynEntries(f, sectionBytes(data, s), func(tag elf.DynTag, val uint64) {
			switch tag {
			case elf.DT_NEEDED:
				d.needed = append(d.needed, cstr(dynstr, val))
			case elf.DT_SONAME:
				d.soname = cstr(dynstr, val)
			}
		})
		break
	}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_GNU_VERNEED || int(s.Link) >= len(f.Sections) {
			continue
		}
		d.verNeed = verNeeds(f.ByteOrder, sectionBytes(data, s), sectionBytes(data, f.Sections[s.Link]), 0)
		break
	}
	return d
}
