package scan

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sveProgram = `#include <arm_sve.h>
#include <stdint.h>
int64_t sve_sum(const int32_t *v, int64_t n) {
	svint64_t acc = svdup_s64(0);
	for (int64_t i = 0; i < n; i += svcntd()) {
		svbool_t pg = svwhilelt_b64(i, n);
		acc = svadd_s64_m(pg, acc, svld1sw_s64(pg, v + i));
	}
	return svaddv_s64(svptrue_b64(), acc);
}
int main(int argc, char **argv) { int32_t v[4] = {argc, 2, 3, 4}; return (int)sve_sum(v, 4); }
`

// sveBinary builds an aarch64 executable with an SVE function, linked
// against Debian 12's glibc (it needs GLIBC_2.34, newer than Kylin's 2.28).
func sveBinary(t *testing.T) []byte {
	t.Helper()
	need(t, "aarch64-linux-gnu-gcc")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "sve.c"), sveProgram)
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", "-march=armv8.2-a+sve", "sve.c", "-o", "sve")
	b, err := os.ReadFile(filepath.Join(dir, "sve"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// editSection rewrites one field of every section header the predicate picks.
func editSection(t *testing.T, b []byte, pick func(*elf.Section) bool, edit func(hdr []byte)) []byte {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte{}, b...)
	shoff := binary.LittleEndian.Uint64(out[40:])
	n := 0
	for i, s := range f.Sections {
		if pick(s) {
			edit(out[shoff+uint64(i)*64 : shoff+uint64(i+1)*64])
			n++
		}
	}
	if n == 0 {
		t.Fatal("no section picked")
	}
	return out
}

func sveAndGlibc(t *testing.T, r *Report) (sve int, glibc bool) {
	for _, f := range r.Findings {
		if f.Kind == KindISA && f.Feature == "sve" && f.Violation() {
			sve += f.Count
		}
		if f.Kind == KindGlibc && f.Violation() && f.Feature == "GLIBC_2.34" {
			glibc = true
		}
	}
	return
}

// TestSectionHeaderLies: the loader runs PT_LOAD segments and reads
// PT_DYNAMIC; removing the section headers (sstrip) or editing them does not
// hide SVE code or the glibc version it needs.
func TestSectionHeaderLies(t *testing.T) {
	orig := sveBinary(t)
	dir := t.TempDir()
	pol := policy(t, "kunpeng920")
	scanBytes := func(name string, b []byte) *Report {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return scan(t, pol, p)
	}
	base, glibc := sveAndGlibc(t, scanBytes("orig", orig))
	if base < 3 || !glibc {
		t.Fatalf("the unedited binary: %d SVE, glibc %v", base, glibc)
	}
	sstrip := append([]byte{}, orig...)
	binary.LittleEndian.PutUint64(sstrip[40:], 0) // e_shoff
	binary.LittleEndian.PutUint16(sstrip[60:], 0) // e_shnum
	binary.LittleEndian.PutUint16(sstrip[62:], 0) // e_shstrndx
	isText := func(s *elf.Section) bool { return s.Name == ".text" }
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"sstripped", sstrip},
		{"text-not-executable", editSection(t, orig, isText, func(h []byte) { binary.LittleEndian.PutUint64(h[8:], uint64(elf.SHF_ALLOC)) })},
		{"text-nobits", editSection(t, orig, isText, func(h []byte) { binary.LittleEndian.PutUint32(h[4:], uint32(elf.SHT_NOBITS)) })},
		{"text-renamed-rodata-size-0", editSection(t, orig, isText, func(h []byte) { binary.LittleEndian.PutUint64(h[32:], 0) })},
		{"text-moved", editSection(t, orig, isText, func(h []byte) { binary.LittleEndian.PutUint64(h[24:], 64) })},
		{"dynamic-sections-erased", editSection(t, orig, func(s *elf.Section) bool {
			return s.Type == elf.SHT_DYNAMIC || s.Type == elf.SHT_GNU_VERNEED || s.Type == elf.SHT_DYNSYM
		}, func(h []byte) { binary.LittleEndian.PutUint32(h[4:], uint32(elf.SHT_NULL)) })},
	} {
		r := scanBytes(c.name, c.b)
		sve, glibc := sveAndGlibc(t, r)
		if sve != base || !glibc {
			t.Errorf("%s: %d SVE instructions (want %d), GLIBC_2.34 finding %v: %+v", c.name, sve, base, glibc, r.Findings)
		}
	}
	// A data section over the code is not believed: the entry point is there.
	lie := editSection(t, orig, isText, func(h []byte) { binary.LittleEndian.PutUint64(h[8:], uint64(elf.SHF_ALLOC|elf.SHF_WRITE)) })
	r := scanBytes("text-as-data", lie)
	found := false
	for _, f := range r.Findings {
		if f.Kind == KindHeaders && strings.Contains(f.Detail, "section .text claims") {
			found = true
		}
	}
	if sve, _ := sveAndGlibc(t, r); sve != base || !found {
		t.Errorf("text-as-data: %d SVE, header finding %v: %+v", sve, found, r.Findings)
	}
}

// TestManySectionHeaders: 60,000 copies of the .text header cost what the
// file costs, and the code is counted once.
func TestManySectionHeaders(t *testing.T) {
	orig := sveBinary(t)
	f, err := elf.NewFile(bytes.NewReader(orig))
	if err != nil {
		t.Fatal(err)
	}
	shoff := binary.LittleEndian.Uint64(orig[40:])
	var textHdr []byte
	for i, s := range f.Sections {
		if s.Name == ".text" {
			textHdr = orig[shoff+uint64(i)*64 : shoff+uint64(i+1)*64]
		}
	}
	// Keep the real headers, then append copies: e_shnum is 16 bits, so
	// 60,000 fits; shstrndx stays valid.
	nsec := int(binary.LittleEndian.Uint16(orig[60:]))
	b := append([]byte{}, orig...)
	newOff := uint64(len(b))
	b = append(b, orig[shoff:shoff+uint64(nsec)*64]...)
	const copies = 60000 - 64
	for i := 0; i < copies; i++ {
		b = append(b, textHdr...)
	}
	binary.LittleEndian.PutUint64(b[40:], newOff)
	binary.LittleEndian.PutUint16(b[60:], uint16(nsec+copies))
	dir := t.TempDir()
	p := filepath.Join(dir, "many")
	os.WriteFile(p, b, 0o755)
	one := scan(t, policy(t, "kunpeng920"), filepath.Join(dir, "many"))
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, orig, 0o755)
	ref := scan(t, nil, plain)
	if one.Summary.TextBytes != ref.Summary.TextBytes || one.Files[0].Features["sve"] != ref.Files[0].Features["sve"] {
		t.Errorf("copies counted: %d bytes of code (want %d), sve %d (want %d)", one.Summary.TextBytes, ref.Summary.TextBytes,
			one.Files[0].Features["sve"], ref.Files[0].Features["sve"])
	}
	sve, _ := sveAndGlibc(t, one)
	if sve == 0 {
		t.Errorf("no SVE violation: %+v", one.Findings)
	}
}
