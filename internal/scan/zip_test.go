package scan

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// deflate compresses b as a zip entry's raw deflate stream.
func deflate(b []byte) []byte {
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestCompression)
	fw.Write(b)
	fw.Close()
	return buf.Bytes()
}

// rawZip writes one entry whose headers declare what fh says, whatever
// the data (raw, already compressed by fh.Method) is.
func rawZip(t *testing.T, fh zip.FileHeader, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&fh)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(raw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeZip(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestZipEntryDataMismatch: an entry whose data does not match its
// declared size fails in its first bytes; that error was dropped and the
// entry counted as not code (clean). A JVM reads a deflate stream to its
// end whatever the declared size: that is scanned too.
func TestZipEntryDataMismatch(t *testing.T) {
	obj := x86Object(t)
	comp := deflate(obj)
	size := uint64(len(obj))
	corrupt := append([]byte{0xff, 0xff}, comp[2:]...)
	for _, c := range []struct {
		name     string
		declared uint64
		raw      []byte
		detail   string
		foreign  bool
	}{
		{"size0", 0, comp, fmt.Sprintf("entry's data is %d bytes, not the 0", size), true},
		{"smaller", 600, comp, fmt.Sprintf("entry's data is %d bytes, not the 600", size), true},
		{"larger", size + 100, comp, fmt.Sprintf("entry's data is %d bytes, not the %d", size, size+100), true},
		{"corrupt", size, corrupt, "corrupt entry", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := rawZip(t, zip.FileHeader{Name: "lib/linux-x86_64/libfoo.so", Method: zip.Deflate,
				CRC32: crc32.ChecksumIEEE(obj), CompressedSize64: uint64(len(c.raw)), UncompressedSize64: c.declared}, c.raw)
			p := writeZip(t, "lie.zip", b)
			r, err := scanWithin(t, 30*time.Second, policy(t, "kunpeng920"), Options{}, p)
			if err != nil {
				t.Fatal(err)
			}
			if r.Summary.Clean || !unreadableWith(r, "lie.zip!/lib/linux-x86_64/libfoo.so", c.detail) {
				t.Errorf("%+v %+v", r.Summary, r.Findings)
			}
			if got := len(findings(r, KindForeignArch)) > 0; got != c.foreign {
				t.Errorf("foreign-arch found %v, want %v: %+v", got, c.foreign, r.Findings)
			}
		})
	}
}

// TestZipDirectoryAttributes: only a name ending in '/' is a directory.
// An entry with data whose attributes say "directory" (MS-DOS 0x10, or a
// Unix S_IFDIR mode) was skipped; Java and unzip extract it as a file.
// Data in a '/'-named entry is looked at too.
func TestZipDirectoryAttributes(t *testing.T) {
	obj := x86Object(t)
	comp := deflate(obj)
	for _, c := range []struct {
		name, entry string
		creator     uint16
		attrs       uint32
	}{
		{"msdos", "lib/linux-x86_64/libfoo.so", 0, 0x10},
		{"unix", "lib/linux-x86_64/libfoo.so", 3 << 8, 0o040755 << 16},
		{"slash", "lib/linux-x86_64/libfoo.so/", 3 << 8, 0o040755 << 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			fh := zip.FileHeader{Name: strings.TrimSuffix(c.entry, "/") + "X"[:len(c.entry)-len(strings.TrimSuffix(c.entry, "/"))], Method: zip.Deflate, CreatorVersion: c.creator, ExternalAttrs: c.attrs,
				CRC32: crc32.ChecksumIEEE(obj), CompressedSize64: uint64(len(comp)), UncompressedSize64: uint64(len(obj))}
			b := rawZip(t, fh, comp)
			b = bytes.ReplaceAll(b, []byte(fh.Name), []byte(c.entry)) // archive/zip writes no data for a '/' name
			zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
			if err != nil || !zr.File[0].FileInfo().IsDir() {
				t.Fatalf("the test's zip: %v", err)
			}
			p := writeZip(t, "fatdir.zip", b)
			r := scan(t, policy(t, "kunpeng920"), p)
			fs := findings(r, KindForeignArch)
			if r.Summary.Clean || len(fs) != 1 || !strings.HasSuffix(fs[0].Path, "fatdir.zip!/"+c.entry) {
				t.Errorf("%+v %+v", r.Summary, r.Findings)
			}
		})
	}
}

// zipBomb builds what /tmp/probe/zipbomb.py does: one local entry (obj
// followed by zeros, deflated) and k central-directory entries pointing at
// it, each declaring csize and usize in a zip64 extra field (0: the real
// sizes).
func zipBomb(obj []byte, zeros, k int, csize, usize uint64) []byte {
	data := append(append([]byte{}, obj...), make([]byte, zeros)...)
	comp := deflate(data)
	crc := crc32.ChecksumIEEE(data)
	name := []byte("x.so")
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint32(b, 0x04034b50)
	b = le.AppendUint16(b, 45)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 8)
	b = le.AppendUint32(b, 0) // time, date
	b = le.AppendUint32(b, crc)
	b = le.AppendUint32(b, uint32(len(comp)))
	b = le.AppendUint32(b, uint32(len(data)))
	b = le.AppendUint16(b, uint16(len(name)))
	b = le.AppendUint16(b, 0)
	b = append(b, name...)
	if csize == 0 {
		csize = uint64(len(comp))
	}
	if usize == 0 {
		usize = uint64(len(data))
	}
	b = append(b, comp...)
	dir := len(b)
	for i := range k {
		n := fmt.Appendf(nil, "lib/x%05d.so", i)
		b = le.AppendUint32(b, 0x02014b50)
		b = le.AppendUint16(b, 45)
		b = le.AppendUint16(b, 45)
		b = le.AppendUint16(b, 0)
		b = le.AppendUint16(b, 8)
		b = le.AppendUint32(b, 0)
		b = le.AppendUint32(b, crc)
		b = le.AppendUint32(b, math.MaxUint32)
		b = le.AppendUint32(b, math.MaxUint32)
		b = le.AppendUint16(b, uint16(len(n)))
		b = le.AppendUint16(b, 20)         // extra
		b = append(b, make([]byte, 14)...) // comment length, disk, attributes, offset 0
		b = append(b, n...)
		b = le.AppendUint16(b, 1)
		b = le.AppendUint16(b, 16)
		b = le.AppendUint64(b, usize)
		b = le.AppendUint64(b, csize)
	}
	end := len(b)
	b = le.AppendUint32(b, 0x06054b50)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint16(b, uint16(k))
	b = le.AppendUint16(b, uint16(k))
	b = le.AppendUint32(b, uint32(end-dir))
	b = le.AppendUint32(b, uint32(dir))
	return le.AppendUint16(b, 0)
}

// TestZipSizeOverflow: declared sizes near 2^63 wrapped negative in the
// overlap check (a compressed size) and in the byte budget and
// --max-member check (an uncompressed one): every entry of a bomb was
// inflated in full, without a cap.
func TestZipSizeOverflow(t *testing.T) {
	obj := x86Object(t)
	const k, zeros = 40, 8 << 20
	for _, c := range []struct {
		name         string
		csize, usize uint64
		detail       string
		want         int
	}{
		{"wrap", 1<<63 - 30 - 4 + 1, 0, "runs past the end of the archive", k},
		{"neg", 0, 1 << 63, "exceeds --max-member", 1},
		{"both", 1<<63 - 30 - 4 + 1, 1 << 63, "runs past the end of the archive", k},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeZip(t, "bomb.zip", zipBomb(obj, zeros, k, c.csize, c.usize))
			r, err := scanWithin(t, 20*time.Second, policy(t, "kunpeng920"), Options{}, p)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, f := range r.Findings {
				if f.Kind == KindUnreadable && strings.Contains(f.Detail, c.detail) {
					n++
				}
			}
			if n != c.want || len(findings(r, KindForeignArch)) != 0 {
				t.Errorf("%d findings %q (want %d): %+v", n, c.detail, c.want, r.Findings)
			}
		})
	}
}

// TestReserveOverflow: a size that does not fit an int64 is over any
// budget; it used to lower the running total.
func TestReserveOverflow(t *testing.T) {
	w := &walker{opts: Options{MaxBytes: 1 << 20, MaxEntries: 10}, rep: &Report{}}
	if w.reserve("a", 0, int64(-1<<63)) || w.reserve("b", 1, 0) {
		t.Errorf("a negative size passed, or the scan went on: %+v", w.rep.Findings)
	}
	if len(w.rep.Findings) != 1 || !strings.Contains(w.rep.Findings[0].Detail, "scan limits reached") {
		t.Errorf("%+v", w.rep.Findings)
	}
	w = &walker{opts: Options{MaxBytes: 1 << 20, MaxEntries: 10}, rep: &Report{}}
	if w.reserve("a", math.MaxUint64, 0) || w.ents != 0 {
		t.Errorf("2^64-1 entries passed: %d", w.ents)
	}
}

// manyEntries is a zip of n empty stored entries; its end record declares
// declared of them.
func manyEntries(n, declared int) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range n {
		zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("e%06d", i), Method: zip.Store})
	}
	zw.Close()
	b := buf.Bytes()
	end := bytes.LastIndex(b, []byte("PK\x05\x06"))
	if z := bytes.LastIndex(b, []byte("PK\x06\x06")); z >= 0 { // over 65534 entries: zip64
		binary.LittleEndian.PutUint64(b[z+24:], uint64(declared))
		binary.LittleEndian.PutUint64(b[z+32:], uint64(declared))
		return b
	}
	binary.LittleEndian.PutUint16(b[end+8:], uint16(declared))
	binary.LittleEndian.PutUint16(b[end+10:], uint16(declared))
	return b
}

// TestZipEntriesCounted: archive/zip holds every central-directory entry
// in memory; a zip with more entries than --max-entries allows is refused
// before it is read, whatever its end record declares (archive/zip reads
// headers until they stop and checks the count modulo 2^16).
func TestZipEntriesCounted(t *testing.T) {
	for _, c := range []struct {
		name        string
		n, declared int
		max         int
		refused     bool
	}{
		{"declared", 3000, 3000, 2000, true},
		{"understated", 1<<16 + 5, 5, 2000, true}, // archive/zip takes it
		{"fits", 3000, 3000, 3000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeZip(t, "many.zip", manyEntries(c.n, c.declared))
			r, err := scanWithin(t, 20*time.Second, nil, Options{MaxEntries: c.max}, p)
			if err != nil {
				t.Fatal(err)
			}
			if got := unreadableWith(r, "many.zip", "scan limits reached"); got != c.refused {
				t.Errorf("refused %v, want %v: %+v", got, c.refused, r.Findings)
			}
		})
	}
	// A directory is reserved while its zip is open: zips side by side
	// each fit, a zip inside another does not fit in what the outer one
	// leaves.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.zip"), manyEntries(1500, 1500), 0o644)
	os.WriteFile(filepath.Join(dir, "b.zip"), manyEntries(1500, 1500), 0o644)
	r, err := scanWithin(t, 20*time.Second, nil, Options{MaxEntries: 2000}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if unreadableWith(r, "a.zip", "scan limits reached") || unreadableWith(r, "b.zip", "scan limits reached") {
		t.Errorf("zips side by side: %+v", r.Findings)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range 1000 {
		zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("e%06d", i), Method: zip.Store})
	}
	fw, _ := zw.CreateHeader(&zip.FileHeader{Name: "inner.zip", Method: zip.Store})
	fw.Write(manyEntries(1500, 1500))
	zw.Close()
	p := writeZip(t, "outer.zip", buf.Bytes())
	if r, err = scanWithin(t, 20*time.Second, nil, Options{MaxEntries: 2000}, p); err != nil {
		t.Fatal(err)
	}
	if !unreadableWith(r, "outer.zip!/inner.zip", "scan limits reached") {
		t.Errorf("a zip in a zip: %+v", r.Findings)
	}
	// Entries read count for good, across zips: three zips of 8 objects
	// each do not all get read under --max-entries 10.
	obj := x86Object(t)
	objs := t.TempDir()
	for _, z := range []string{"a.zip", "b.zip", "c.zip"} {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for i := range 8 {
			fw, _ := zw.Create(fmt.Sprintf("lib/x%d.o", i))
			fw.Write(obj)
		}
		zw.Close()
		os.WriteFile(filepath.Join(objs, z), buf.Bytes(), 0o644)
	}
	if r, err = scanWithin(t, 20*time.Second, nil, Options{MaxEntries: 10}, objs); err != nil {
		t.Fatal(err)
	}
	if r.Summary.ELF > 10 || !unreadableWith(r, "", "scan limits reached") {
		t.Errorf("24 objects in zips under --max-entries 10: %d ELF read, %+v", r.Summary.ELF, r.Findings)
	}
}

// TestExecutableJar: a jar after a shell script (java -jar runs it) or
// any self-extracting zip is a zip; it was not recognised (not 'PK' at
// byte 0) and passed unexamined.
func TestExecutableJar(t *testing.T) {
	obj := x86Object(t)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("lib/linux-x86_64/libfoo.so")
	w.Write(obj)
	zw.SetComment("a comment after the end record")
	zw.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "exec.jar"), append([]byte("#!/bin/sh\nexec java -jar \"$0\" \"$@\"\n"), buf.Bytes()...), 0o755)
	// Not a zip: an end record that points at no central directory.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("text\nPK\x05\x06\x00\x00\x00\x00\x01\x00\x01\x00\x2e\x00\x00\x00\x00\x00\x00\x00\x00\x00"), 0o644)
	// A zip whose comment is cut short: Java opens it, archive/zip does
	// not: a finding.
	os.WriteFile(filepath.Join(dir, "cut.bin"), append([]byte("#!/bin/sh\n"), buf.Bytes()[:buf.Len()-5]...), 0o644)
	r := scan(t, policy(t, "kunpeng920"), dir)
	fs := findings(r, KindJNIMissing)
	if len(fs) != 1 || fs[0].Path != "exec.jar" || len(r.Findings) != 3 || !unreadableWith(r, "cut.bin", "malformed zip") {
		t.Errorf("%+v", r.Findings)
	}
}

// TestZipAfterProgram: an ELF program with a zip appended (a
// self-extracting archive, a jar behind a launcher) holds the zip's
// members too: java -jar and unzip open it. An x86 library there was not
// looked at and the file passed as one clean aarch64 ELF.
func TestZipAfterProgram(t *testing.T) {
	prog := compile(t, "f.c", cFunc, "libok.so", "aarch64-linux-gnu-gcc", "-shared", "-fPIC")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	fw, _ := zw.Create("lib/libx.so")
	fw.Write(x86Object(t))
	zw.Close()
	in := t.TempDir()
	os.WriteFile(filepath.Join(in, "selfextract"), append(append([]byte{}, prog...), buf.Bytes()...), 0o755)
	os.WriteFile(filepath.Join(in, "libok.so"), prog, 0o644)
	r := scan(t, policy(t, "kunpeng920"), in)
	if !hasViolation(r, KindForeignArch, "selfextract!/lib/libx.so") {
		t.Errorf("the zip after the program was not scanned: %+v", r.Findings)
	}
	if len(withoutFlags(r.Findings)) != 1 || r.Summary.ELF != 3 {
		t.Errorf("want one finding and 3 ELF (the program, its copy, the zip's library): %d ELF, %+v", r.Summary.ELF, r.Findings)
	}
}

// Hand-made zip records, for zips no writer makes.
func zipLocal(name string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x04034b50)
	b = binary.LittleEndian.AppendUint16(b, 20)
	b = append(b, make([]byte, 8)...) // flags, method (stored), time, date
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(data))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	b = binary.LittleEndian.AppendUint16(b, 0)
	return append(append(b, name...), data...)
}

func zipCentral(name string, data []byte, off int, comment []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x02014b50)
	b = binary.LittleEndian.AppendUint16(b, 45)
	b = binary.LittleEndian.AppendUint16(b, 20)
	b = append(b, make([]byte, 8)...)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(data))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(comment)))
	b = append(b, make([]byte, 8)...) // disk, internal and external attributes
	b = binary.LittleEndian.AppendUint32(b, uint32(off))
	return append(append(b, name...), comment...)
}

func zip64Record(entries, size, off uint64) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x06064b50)
	b = binary.LittleEndian.AppendUint64(b, 44)
	b = binary.LittleEndian.AppendUint16(b, 45)
	b = binary.LittleEndian.AppendUint16(b, 45)
	b = append(b, make([]byte, 8)...)
	b = binary.LittleEndian.AppendUint64(b, entries)
	b = binary.LittleEndian.AppendUint64(b, entries)
	b = binary.LittleEndian.AppendUint64(b, size)
	return binary.LittleEndian.AppendUint64(b, off)
}

func zip64Locator(at uint64, disks uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x07064b50)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, at)
	return binary.LittleEndian.AppendUint32(b, disks)
}

func zipEndRecord(entries uint16, size, off uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x06054b50)
	b = append(b, make([]byte, 4)...)
	b = binary.LittleEndian.AppendUint16(b, entries)
	b = binary.LittleEndian.AppendUint16(b, entries)
	b = binary.LittleEndian.AppendUint32(b, size)
	b = binary.LittleEndian.AppendUint32(b, off)
	return binary.LittleEndian.AppendUint16(b, 0)
}

// zip64After is prefix, then a zip64 zip of one stored entry whose zip64
// record is gap bytes before its locator, which says disks disks.
func zip64After(prefix []byte, name string, data []byte, gap int, disks uint32) []byte {
	out := append([]byte{}, prefix...)
	out = append(out, zipLocal(name, data)...)
	cd := len(out)
	out = append(out, zipCentral(name, data, len(prefix), nil)...)
	z64 := len(out)
	out = append(out, zip64Record(1, uint64(len(out)-cd), uint64(cd))...)
	out = append(out, bytes.Repeat([]byte{'\n'}, gap)...)
	out = append(out, zip64Locator(uint64(z64), disks)...)
	return append(out, zipEndRecord(0xffff, 0xffffffff, 0xffffffff)...)
}

// TestZipEndQuirks: end records that archive/zip and Java read
// differently hid an x86 library from the scan while java -jar loads it.
func TestZipEndQuirks(t *testing.T) {
	obj := x86Object(t)
	script := []byte("#!/bin/sh\nexec java -jar \"$0\" \"$@\"\n")
	dir := t.TempDir()
	// A zip64 locator saying 2 disks: Java ignores the field, archive/zip
	// ignores the record; the zip was not even taken for one.
	os.WriteFile(filepath.Join(dir, "disk2.run"), zip64After(script, "lib/libx.so", obj, 0, 2), 0o755)
	// A zip64 zip after a script, its offsets not adjusted: unzip
	// extracts it (Java refuses it); it passed as "not a zip".
	os.WriteFile(filepath.Join(dir, "fz.run"), append(append([]byte{}, script...), zip64After(nil, "lib/libx.so", obj, 0, 1)...), 0o755)
	// A 32-bit central directory of exactly 0xffff bytes, which
	// archive/zip takes for a zip64 marker; a locator in the last
	// entry's comment sends it to a decoy directory listing README alone.
	readme := []byte("hello\n")
	out := zipLocal("README", readme)
	lib := len(out)
	out = append(out, zipLocal("lib/libx.so", obj)...)
	decoy := zipCentral("README", readme, 0, nil)
	decoyAt := len(out)
	out = append(out, decoy...)
	z64 := len(out)
	out = append(out, zip64Record(1, uint64(len(decoy)), uint64(decoyAt))...)
	loc := zip64Locator(uint64(z64), 1)
	head := append(zipCentral("README", readme, 0, nil), zipCentral("lib/libx.so", obj, lib, nil)...)
	pad := 0xffff - len(head) - len(loc)
	cd := append(zipCentral("README", readme, 0, nil), zipCentral("lib/libx.so", obj, lib, append(bytes.Repeat([]byte{' '}, pad), loc...))...)
	if len(cd) != 0xffff {
		t.Fatalf("directory of %d bytes", len(cd))
	}
	cdAt := len(out)
	out = append(out, cd...)
	out = append(out, zipEndRecord(2, 0xffff, uint32(cdAt))...)
	os.WriteFile(filepath.Join(dir, "cen0xffff.jar"), out, 0o644)
	// A jar after a tar: the tar reader stops at the tar's end, unzip and
	// Java open the jar.
	z := x86Zip(t, obj)
	tarzip := append(plainTar(map[string][]byte{"x.c": []byte(cFunc)}), z...)
	os.WriteFile(filepath.Join(dir, "tarzip.tar"), tarzip, 0o644)
	// The same inside a tar and inside a gzip stream.
	os.WriteFile(filepath.Join(dir, "nest.tar"), plainTar(map[string][]byte{"tarzip.tar": tarzip}), 0o644)
	var gz bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(tarzip)
	gw.Close()
	os.WriteFile(filepath.Join(dir, "tarzip.tar.gz"), gz.Bytes(), 0o644)
	// A jar after a legacy .lzma stream, which its decoder stops before.
	os.WriteFile(filepath.Join(dir, "x.c.lzma"), append(xzTool(t, []byte(cFunc), "--format=lzma"), z...), 0o644)
	// A tar whose last member is a jar is not a zip after a tar: its
	// library is found once.
	os.WriteFile(filepath.Join(dir, "jarlast.tar"), plainTar(map[string][]byte{"lib/last.jar": z}), 0o644)
	r := scan(t, policy(t, "kunpeng920"), dir)
	if !unreadableWith(r, "disk2.run", "malformed zip") {
		t.Errorf("zip64 locator on 2 disks: %+v", r.Findings)
	}
	if !unreadableWith(r, "fz.run", "malformed zip") {
		t.Errorf("a zip64 zip after a script, offsets not adjusted: %+v", r.Findings)
	}
	if !unreadableWith(r, "cen0xffff.jar", "names another central directory") {
		t.Errorf("a decoy zip64 directory: %+v", r.Findings)
	}
	for _, p := range []string{"/tarzip.tar(trailing)!/lib/libx.so", "nest.tar!/tarzip.tar(trailing)!/lib/libx.so", "tarzip.tar.gz!(trailing)!/lib/libx.so", "x.c.lzma(trailing)!/lib/libx.so"} {
		if !hasViolation(r, KindForeignArch, p) {
			t.Errorf("%s: the jar after the tar or stream was not read", p)
		}
	}
	if !hasViolation(r, KindJNIMissing, "jarlast.tar!/lib/last.jar") || detailOf(r, "jarlast.tar!/lib/libx.so") != "" || len(r.Findings) != 9 {
		t.Errorf("want the jar last in a tar read once, as its member: %+v", r.Findings)
	}

	// The end of a long member: a zip64 record before the 65 KiB kept is
	// a zip, not nothing.
	long := zip64After(script, "lib/libx.so", obj, 70000, 1)
	tail := long[len(long)-zipEndSearch:]
	if !zipEndsIn(tail, int64(len(long)-zipEndSearch)) {
		t.Error("a zip64 record before the tail: not taken for a zip")
	}
}

// withoutFlags drops the flag read-back's findings (the test programs are
// compiled without a flag record), for tests about something else.
func withoutFlags(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if !isFlagKind(f.Kind) {
			out = append(out, f)
		}
	}
	return out
}
