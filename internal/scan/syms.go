package scan

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"iter"
)

// rawSym is a symbol read straight from the mapped file: no copies, and its
// name stays bytes in the string table until someone asks for it. It holds
// an ELF64 little-endian entry's three words as they lie (the name offset,
// info, other and section index packed in the first), so that reading one
// is three loads and passing one around stays in registers; other layouts
// are packed the same way.
type rawSym struct {
	head  uint64 // st_name | st_info<<32 | st_other<<40 | st_shndx<<48
	value uint64
	size  uint64
}

// newSym packs a symbol's fields.
func newSym(nameOff uint32, info byte, shndx uint16, value, size uint64) rawSym {
	return rawSym{uint64(nameOff) | uint64(info)<<32 | uint64(shndx)<<48, value, size}
}

func (s rawSym) nameOff() uint32 { return uint32(s.head) }
func (s rawSym) info() byte      { return byte(s.head >> 32) }
func (s rawSym) shndx() uint16   { return uint16(s.head >> 48) }

// symtab is one symbol table (.symtab or .dynsym) with its string table.
// An ELF64 little-endian table (every aarch64 and x86-64 object) stays where
// it is in the mapped file and is decoded when read: a table of 100,000
// symbols costs no memory of its own (fresh memory is what a short scan
// pays most for). Other layouts (ELF32, big-endian) are rewritten once into
// that layout, so that reading a symbol is three loads that the compiler
// inlines into every pass over a table.
type symtab struct {
	ent []byte // the entries after entry 0 (the null symbol), ELF64 little-endian
	str []byte
}

// len is the number of symbols (the null symbol not counted).
func (t *symtab) len() int { return len(t.ent) / 24 }

// at decodes symbol i (0: the first after the null symbol).
func (t *symtab) at(i int) rawSym {
	e := (*[24]byte)(t.ent[i*24:])
	return rawSym{binary.LittleEndian.Uint64(e[:]), binary.LittleEndian.Uint64(e[8:]), binary.LittleEndian.Uint64(e[16:])}
}

// all yields each symbol with its index.
func (t *symtab) all() iter.Seq2[int, rawSym] {
	return func(yield func(int, rawSym) bool) {
		for i, n := 0, t.len(); i < n; i++ {
			if !yield(i, t.at(i)) {
				return
			}
		}
	}
}

func (t *symtab) nameBytes(s rawSym) []byte {
	if int(s.nameOff()) >= len(t.str) {
		return nil
	}
	b := t.str[s.nameOff():]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// nameByte returns the first byte of a symbol's name (0 when it has none).
func (t *symtab) nameByte(s rawSym) byte {
	if int(s.nameOff()) >= len(t.str) {
		return 0
	}
	return t.str[s.nameOff()]
}

// nameHasPrefix reports whether a symbol's name starts with p, without
// looking for the name's end.
func (t *symtab) nameHasPrefix(s rawSym, p string) bool {
	off := uint64(s.nameOff())
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

// decodeSyms makes a table of symbol table entries (entry 0, the null
// symbol, skipped): in place for ELF64 little-endian, else rewritten.
func decodeSyms(f *elf.File, b, str []byte) *symtab {
	t := newSymtab(b, str, f.Class == elf.ELFCLASS64, f.ByteOrder)
	if f.Type == elf.ET_REL {
		t.relocate(f)
	}
	return t
}

// relocate turns a relocatable object's symbol values, offsets in their
// sections, into addresses in the layout layoutRel gave the sections. The
// table is copied first: it may be the mapped file.
func (t *symtab) relocate(f *elf.File) {
	ent := make([]byte, len(t.ent))
	copy(ent, t.ent)
	t.ent = ent
	for i, n := 0, t.len(); i < n; i++ {
		s := t.at(i)
		if sh := int(s.shndx()); sh > 0 && sh < len(f.Sections) && sh < int(elf.SHN_LORESERVE) {
			binary.LittleEndian.PutUint64(t.ent[i*24+8:], s.value+f.Sections[sh].Addr)
		}
	}
}

// layoutRel gives a relocatable object's allocated sections distinct
// addresses, one after another from 64 KiB as a linker would lay them out: in a .o
// every section starts at 0, so an address alone would not say which
// section (or which function) it is in.
func layoutRel(f *elf.File) {
	if f.Type != elf.ET_REL {
		return
	}
	// Not from 0: address 0 means "no function" to the function table.
	at := uint64(0x10000)
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		if a := s.Addralign; a > 1 && a < 1<<20 {
			at = (at + a - 1) &^ (a - 1)
		}
		s.Addr = at
		if at+s.Size < at {
			return // sizes that wrap: leave the rest at 0, as the file says
		}
		at += s.Size
	}
}

// newSymtab makes a table of a symbol table section's bytes.
func newSymtab(b, str []byte, is64 bool, bo binary.ByteOrder) *symtab {
	t := &symtab{str: str}
	es := 16
	if is64 {
		es = 24
	}
	if len(b) < 2*es {
		return t
	}
	b = b[es : len(b)/es*es]
	if is64 && bo == binary.LittleEndian {
		t.ent = b
		return t
	}
	t.ent = make([]byte, len(b)/es*24)
	for i := 0; i < len(b)/es; i++ {
		e, out := b[i*es:], t.ent[i*24:]
		var s rawSym
		if is64 {
			s = newSym(bo.Uint32(e), e[4], bo.Uint16(e[6:]), bo.Uint64(e[8:]), bo.Uint64(e[16:]))
		} else {
			s = newSym(bo.Uint32(e), e[12], bo.Uint16(e[14:]), uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:])))
		}
		binary.LittleEndian.PutUint64(out, s.head)
		binary.LittleEndian.PutUint64(out[8:], s.value)
		binary.LittleEndian.PutUint64(out[16:], s.size)
	}
	return t
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
