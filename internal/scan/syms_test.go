package scan

import (
	"encoding/binary"
	"testing"
)

// TestSymtabLayouts: ELF64 little-endian entries (read in place) and the
// other layouts (ELF64 big-endian, ELF32 either way) decode to the same
// fields.
func TestSymtabLayouts(t *testing.T) {
	const (
		name  = 0x01020304
		info  = 0x12
		shndx = 0xfff1
		value = 0x1122334455667788
		size  = 0x99aabbccddeeff00
	)
	want := newSym(name, info, shndx, value, size)
	for _, c := range []struct {
		desc string
		is64 bool
		bo   binary.ByteOrder
	}{{"elf64 le", true, binary.LittleEndian}, {"elf64 be", true, binary.BigEndian}, {"elf32 le", false, binary.LittleEndian}, {"elf32 be", false, binary.BigEndian}} {
		es := 16
		if c.is64 {
			es = 24
		}
		e := make([]byte, 2*es) // the null symbol, then the symbol
		s := e[es:]
		w := want
		if c.is64 {
			c.bo.PutUint32(s, name)
			s[4] = info
			c.bo.PutUint16(s[6:], shndx)
			c.bo.PutUint64(s[8:], value)
			c.bo.PutUint64(s[16:], size)
		} else {
			c.bo.PutUint32(s, name)
			c.bo.PutUint32(s[4:], value&0xffffffff)
			c.bo.PutUint32(s[8:], size&0xffffffff)
			s[12] = info
			c.bo.PutUint16(s[14:], shndx)
			w = newSym(name, info, shndx, value&0xffffffff, size&0xffffffff)
		}
		tab := newSymtab(e, nil, c.is64, c.bo)
		got := tab.at(0)
		if got != w || got.nameOff() != name || got.info() != info || got.shndx() != shndx {
			t.Errorf("%s: %+v (name %#x info %#x shndx %#x), want %+v", c.desc, got, got.nameOff(), got.info(), got.shndx(), w)
		}
	}
}
