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
	return compile(t, "sve.c", sveProgram, "sve", "aarch64-linux-gnu-gcc", "-O2", "-march=armv8.2-a+sve")
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

// bytesScanner returns a function that writes b to a file named name in a
// temporary directory and scans it against pol.
func bytesScanner(t *testing.T, pol *Policy) func(name string, b []byte) *Report {
	dir := t.TempDir()
	return func(name string, b []byte) *Report {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return scan(t, pol, p)
	}
}

// TestSectionHeaderLies: the loader runs PT_LOAD segments and reads
// PT_DYNAMIC; removing the section headers (sstrip) or editing them does not
// hide SVE code or the glibc version it needs.
func TestSectionHeaderLies(t *testing.T) {
	orig := sveBinary(t)
	scanBytes := bytesScanner(t, policy(t, "kunpeng920"))
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

// sveLibrary builds an aarch64 shared library whose exported function s
// runs one SVE instruction.
func sveLibrary(t *testing.T) []byte {
	t.Helper()
	return compile(t, "sve.c", "#include <stdio.h>\nvoid s(void){__asm__ volatile(\"ptrue p0.b\");puts(\"sve ran\");}\n", "libsve.so",
		"aarch64-linux-gnu-gcc", "-march=armv8.2-a+sve", "-shared", "-fPIC", "-Wl,-soname,libsve.so", "-Wl,-z,max-page-size=65536")
}

// progHeaders calls edit with each program header of a copy of b (64-bit,
// little-endian), and returns the copy.
func progHeaders(b []byte, edit func(ph []byte)) []byte {
	out := append([]byte{}, b...)
	phoff, n := binary.LittleEndian.Uint64(out[32:]), int(binary.LittleEndian.Uint16(out[56:]))
	for i := 0; i < n; i++ {
		edit(out[phoff+uint64(i)*56 : phoff+uint64(i+1)*56])
	}
	return out
}

// setDyn sets the value of every PT_DYNAMIC entry with the tag in a copy of b.
func setDyn(t *testing.T, b []byte, tag elf.DynTag, val uint64) []byte {
	t.Helper()
	set := 0
	var base, size uint64
	out := progHeaders(b, func(ph []byte) {
		if elf.ProgType(binary.LittleEndian.Uint32(ph)) == elf.PT_DYNAMIC {
			base, size = binary.LittleEndian.Uint64(ph[8:]), binary.LittleEndian.Uint64(ph[32:])
		}
	})
	for i := base; i+16 <= base+size; i += 16 {
		if elf.DynTag(binary.LittleEndian.Uint64(out[i:])) == tag {
			binary.LittleEndian.PutUint64(out[i+8:], val)
			set++
		}
	}
	if set == 0 {
		t.Fatalf("no %v in PT_DYNAMIC", tag)
	}
	return out
}

// TestProgramHeaderDataLies: the tables the program headers and PT_DYNAMIC
// locate are data only where they lie inside their segment and no function
// the loader reaches (or executable section) is in them. Each edit below
// leaves a library the loader still loads and runs SVE from; none of them
// hides the SVE instruction.
func TestProgramHeaderDataLies(t *testing.T) {
	orig := sveLibrary(t)
	f, err := elf.NewFile(bytes.NewReader(orig))
	if err != nil {
		t.Fatal(err)
	}
	var text *elf.Prog // the executable PT_LOAD
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			text = p
		}
	}
	strtab, _ := f.DynValue(elf.DT_STRTAB)
	size := uint64(len(orig))
	// overText makes a program header of type from describe the executable segment.
	overText := func(from, to elf.ProgType) []byte {
		n := 0
		out := progHeaders(orig, func(ph []byte) {
			if elf.ProgType(binary.LittleEndian.Uint32(ph)) == from && n == 0 {
				n++
				binary.LittleEndian.PutUint32(ph, uint32(to))
				for i, v := range []uint64{text.Off, text.Vaddr, text.Paddr, text.Filesz, text.Memsz} {
					binary.LittleEndian.PutUint64(ph[8+8*i:], v)
				}
			}
		})
		if n == 0 {
			t.Fatalf("no %v header", from)
		}
		return out
	}
	sstrip := func(b []byte) []byte {
		b = append([]byte{}, b...)
		binary.LittleEndian.PutUint64(b[40:], 0) // e_shoff
		binary.LittleEndian.PutUint16(b[60:], 0) // e_shnum
		binary.LittleEndian.PutUint16(b[62:], 0) // e_shstrndx
		return b
	}
	toSegEnd := text.Filesz - (strtab[0] - text.Vaddr)
	scanBytes := bytesScanner(t, policy(t, "kunpeng920"))
	base, _ := sveAndGlibc(t, scanBytes("orig", orig))
	if base != 1 {
		t.Fatalf("the unedited library: %d SVE instructions, want 1", base)
	}
	for _, c := range []struct {
		name  string
		b     []byte
		quiet bool // nothing to report: the table's own length bounds it
	}{
		{"strsz-absurd", setDyn(t, orig, elf.DT_STRSZ, 0xffffffffffff0000), false},
		{"strsz-to-segment-end", setDyn(t, orig, elf.DT_STRSZ, toSegEnd), false},
		{"strsz-to-segment-end-sstripped", sstrip(setDyn(t, orig, elf.DT_STRSZ, toSegEnd)), false},
		{"relasz-past-eof", setDyn(t, orig, elf.DT_RELASZ, size), false},
		{"pltrelsz-past-eof", setDyn(t, orig, elf.DT_PLTRELSZ, size), false},
		{"note-over-text", overText(elf.PT_NOTE, elf.PT_NOTE), false},
		{"note-over-text-sstripped", sstrip(overText(elf.PT_NOTE, elf.PT_NOTE)), false},
		{"eh-frame-over-text", overText(elf.PT_GNU_EH_FRAME, elf.PT_GNU_EH_FRAME), false},
		{"eh-frame-over-text-sstripped", sstrip(overText(elf.PT_GNU_EH_FRAME, elf.PT_GNU_EH_FRAME)), false},
		{"interp-over-text-sstripped", sstrip(overText(elf.PT_GNU_STACK, elf.PT_INTERP)), true}, // the string ends at the first NUL
	} {
		// Where a table is not believed, what it really holds is judged as
		// code too: more SVE-like words may turn up, never fewer.
		r := scanBytes(c.name, c.b)
		inS := false
		for _, f := range r.Findings {
			inS = inS || f.Kind == KindISA && f.Function == "s" && f.Feature == "sve" && f.Violation()
		}
		if sve, _ := sveAndGlibc(t, r); sve < base || !inS || !c.quiet && len(findings(r, KindHeaders)) == 0 {
			t.Errorf("%s: %d SVE instructions (want %d in s), %d elf-headers findings (want some): %+v", c.name, sve, base, len(findings(r, KindHeaders)), r.Findings)
		}
	}
}

// TestPLTStart: the first lazily bound GOT slot points at the PLT, code
// that has neither a symbol nor an unwind entry.
func TestPLTStart(t *testing.T) {
	b := sveLibrary(t)
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	got := pltStart(f, b, readLoaderDyn(f, b))
	if plt := f.Section(".plt"); plt == nil || len(got) != 1 || got[0] != plt.Addr {
		t.Errorf("pltStart = %#x, want .plt's address (%+v)", got, plt)
	}
}

// TestInitArrayRoot: a constructor is reached through DT_INIT_ARRAY even
// with no symbol and no unwind entry; a PT_NOTE over it does not hide it.
func TestInitArrayRoot(t *testing.T) {
	orig := compile(t, "c.c", "static void __attribute__((constructor)) c(void){__asm__ volatile(\"ptrue p0.b\");}\nvoid s(void){}\n", "libc.so",
		"aarch64-linux-gnu-gcc", "-march=armv8.2-a+sve", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
		"-shared", "-fPIC", "-Wl,-z,max-page-size=65536")
	dir := t.TempDir()
	f, err := elf.NewFile(bytes.NewReader(orig))
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	var c elf.Symbol
	for _, s := range syms {
		if s.Name == "c" {
			c = s
		}
	}
	if c.Size == 0 {
		t.Fatal("no symbol c")
	}
	// The note covers c exactly (the first segment maps offset = address);
	// the section headers go.
	b := progHeaders(orig, func(ph []byte) {
		if elf.ProgType(binary.LittleEndian.Uint32(ph)) == elf.PT_NOTE {
			for i, v := range []uint64{c.Value, c.Value, c.Value, c.Size, c.Size} {
				binary.LittleEndian.PutUint64(ph[8+8*i:], v)
			}
		}
	})
	binary.LittleEndian.PutUint64(b[40:], 0)
	binary.LittleEndian.PutUint16(b[60:], 0)
	binary.LittleEndian.PutUint16(b[62:], 0)
	p := filepath.Join(dir, "noted.so")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	r := scan(t, policy(t, "kunpeng920"), p)
	if sve, _ := sveAndGlibc(t, r); sve != 1 || len(findings(r, KindHeaders)) == 0 {
		t.Errorf("%d SVE instructions (want 1), %d elf-headers findings: %+v", sve, len(findings(r, KindHeaders)), r.Findings)
	}
}
