package scan

import (
	"debug/dwarf"
	"debug/elf"
)

// The DWARF the flag read-back reads is only each compile unit's first
// entry (its DW_AT_producer). debug/elf's File.DWARF reads, relocates and
// decompresses every debug section whole, line tables and all; these
// read what a unit entry needs and no more.

// maxProducerDWARF bounds the .debug_info of a relocatable object copied
// to be relocated (or of compressed sections, decompressed) for
// DW_AT_producer. A linked file's is read in place, whatever its size.
const maxProducerDWARF = 64 << 20

// unitSections are the sections a unit entry's attributes may need:
// .debug_info and .debug_abbrev, the strings (DWARF 5 indexes them
// through .debug_str_offsets) and, for an entry's indexed address and
// range list forms to decode, .debug_addr and .debug_rnglists.
var unitSections = []string{".debug_info", ".debug_abbrev", ".debug_str", ".debug_str_offsets", ".debug_line_str", ".debug_addr", ".debug_rnglists"}

// producerDWARF opens f's DWARF for its units' producers: a linked
// file's sections in place (their offsets are final; nothing is copied,
// so a 2 GB doris_be's is read too); a relocatable object's with the
// offsets in its unit entries relocated (dwarfRelocated); else, with
// compressed sections, through debug/elf, within maxProducerDWARF.
func producerDWARF(f *elf.File, data []byte) *dwarf.Data {
	di := f.Section(".debug_info")
	if di == nil {
		return nil
	}
	secs, ok := unitSectionBytes(f, data)
	switch {
	case ok && f.Type != elf.ET_REL:
		return newUnitDWARF(secs)
	case ok && di.Size <= maxProducerDWARF:
		if d := dwarfRelocated(f, data, secs); d != nil {
			return d
		}
	}
	if di.Size > maxProducerDWARF {
		return nil
	}
	d, err := f.DWARF()
	if err != nil {
		return nil
	}
	return d
}

// unitSectionBytes gives unitSections' bytes in the mapped file (nil for
// one f lacks); ok is false when one is compressed or lies outside it.
func unitSectionBytes(f *elf.File, data []byte) (secs [][]byte, ok bool) {
	secs = make([][]byte, len(unitSections))
	for i, name := range unitSections {
		s := f.Section(name)
		if s == nil {
			continue
		}
		if s.Flags&elf.SHF_COMPRESSED != 0 || s.Type == elf.SHT_NOBITS {
			return nil, false
		}
		if secs[i] = sectionBytes(data, s); secs[i] == nil {
			return nil, false
		}
	}
	return secs, secs[0] != nil
}

// newUnitDWARF is a DWARF reader over unitSections' bytes.
func newUnitDWARF(secs [][]byte) *dwarf.Data {
	d, err := dwarf.New(secs[1], nil, nil, secs[0], nil, nil, nil, secs[2])
	if err != nil {
		return nil
	}
	for i := 3; i < len(unitSections); i++ {
		if secs[i] != nil && d.AddSection(unitSections[i], secs[i]) != nil {
			return nil
		}
	}
	return d
}

// dwarfRelocated reads a relocatable object's unit entries: in a .o the
// offsets DWARF keeps in .debug_info (to a unit's abbreviations, its
// strings, its string-offset base) and in .debug_str_offsets are
// relocations yet, so those two sections and .debug_abbrev are copied
// with their absolute relocations applied; the rest is read in place.
// nil when it cannot be done so (not ELF64 RELA, a relocation out of
// bounds): debug/elf then reads the whole.
func dwarfRelocated(f *elf.File, data []byte, secs [][]byte) *dwarf.Data {
	if f.Class != elf.ELFCLASS64 {
		return nil
	}
	out := make([][]byte, len(secs))
	copy(out, secs)
	for _, i := range []int{0, 1, 3} { // .debug_info, .debug_abbrev, .debug_str_offsets
		if secs[i] == nil {
			continue
		}
		b, ok := relocated(f, data, unitSections[i], secs[i])
		if !ok {
			return nil
		}
		out[i] = b
	}
	return newUnitDWARF(out)
}

// relocated copies section name's bytes b and applies its RELA section's
// absolute relocations (R_AARCH64_ABS32/64, R_X86_64_32/64: what DWARF's
// offsets and addresses use; others are left as they are); b itself when
// nothing relocates it.
func relocated(f *elf.File, data []byte, name string, b []byte) ([]byte, bool) {
	rela, symtab := relaFor(f, data, name)
	if rela == nil {
		return b, true
	}
	out := append([]byte(nil), b...)
	bo := f.ByteOrder
	for off := 0; off+24 <= len(rela); off += 24 {
		at, info, addend := bo.Uint64(rela[off:]), bo.Uint64(rela[off+8:]), int64(bo.Uint64(rela[off+16:]))
		size := absSize(f.Machine, elf.R_TYPE64(info))
		if size == 0 {
			continue
		}
		sym := info >> 32
		if (sym+1)*24 > uint64(len(symtab)) || at > uint64(len(out)) || uint64(size) > uint64(len(out))-at {
			return nil, false
		}
		v := bo.Uint64(symtab[sym*24+8:]) + uint64(addend) // st_value + addend
		if size == 8 {
			bo.PutUint64(out[at:], v)
		} else {
			bo.PutUint32(out[at:], uint32(v))
		}
	}
	return out, true
}

// relaFor finds the RELA section that relocates section name, and its
// symbol table, in the mapped file; nil when there is none.
func relaFor(f *elf.File, data []byte, name string) (rela, symtab []byte) {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_RELA || int(s.Info) >= len(f.Sections) || f.Sections[s.Info].Name != name || int(s.Link) >= len(f.Sections) {
			continue
		}
		return sectionBytes(data, s), sectionBytes(data, f.Sections[s.Link])
	}
	return nil, nil
}

// absSize is the size of an absolute relocation of machine m's type t, 0
// for any other type.
func absSize(m elf.Machine, t uint32) int {
	switch {
	case m == elf.EM_AARCH64 && t == uint32(elf.R_AARCH64_ABS64), m == elf.EM_X86_64 && t == uint32(elf.R_X86_64_64):
		return 8
	case m == elf.EM_AARCH64 && t == uint32(elf.R_AARCH64_ABS32), m == elf.EM_X86_64 && t == uint32(elf.R_X86_64_32):
		return 4
	}
	return 0
}
