package scan

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestZipBehindInArchives: a zip after other content (an executable jar
// behind its launch script, a self-extracting archive) is found on disk
// (TestExecutableJar, TestZipAfterProgram), but inside a tar, a compressed
// stream, a zip or an ar it was not looked for: the member was not code by
// its first bytes, and an x86 library in it passed unread.
func TestZipBehindInArchives(t *testing.T) {
	obj := x86Object(t)
	prog := compile(t, "f.c", cFunc, "libok.so", "aarch64-linux-gnu-gcc", "-shared", "-fPIC")
	z := x86Zip(t, obj)
	script := []byte("#!/bin/sh\nexec unzip -o \"$0\"\n")
	sfx := append(append([]byte{}, script...), z...)
	withProg := append(append([]byte{}, prog...), z...)

	var gz bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(sfx)
	gw.Close()

	outer := func(method uint16, name string, data []byte) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		w.Write(data)
		zw.Close()
		return b.Bytes()
	}
	// A class file's magic, then a jar: not a class (the JVM refuses the
	// bytes after it), a jar to Java's ZipFile.
	cafe := append([]byte{0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 0x34}, z...)
	// Not zips: text ending in an end record that points at nothing, and
	// a large member of zeros.
	fake := []byte("text\nPK\x05\x06\x00\x00\x00\x00\x01\x00\x01\x00\x2e\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	big := make([]byte, spoolAt+(1<<20))

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "image.tar"), plainTar(map[string][]byte{
		"opt/setup.bin":  sfx,
		"opt/selfx":      withProg,
		"opt/notes.txt":  fake,
		"opt/zeros.bin":  big,
		"opt/libok.so":   prog,
		"opt/README.txt": []byte("nothing here\n"),
	}), 0o644)
	os.WriteFile(filepath.Join(dir, "setup.bin.gz"), gz.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "stored.zip"), outer(zip.Store, "inner/setup.bin", sfx), 0o644)
	os.WriteFile(filepath.Join(dir, "deflated.zip"), outer(zip.Deflate, "inner/setup.bin", sfx), 0o644)
	os.WriteFile(filepath.Join(dir, "plugin.zip"), outer(zip.Deflate, "lib/plugin.jar", cafe), 0o644)
	os.WriteFile(filepath.Join(dir, "bundle.a"), gnuArFile([2]string{"setup.bin", string(sfx)}), 0o644)
	// A jar with libraries for both platforms, last in a .deb's
	// uncompressed data.tar: read once, as the jar it is (clean), not
	// again as a zip after the tar.
	var both bytes.Buffer
	bw := zip.NewWriter(&both)
	for name, lib := range map[string][]byte{"lib/linux-x86_64/libfoo.so": obj, "lib/linux-aarch64/libfoo.so": prog} {
		fw, _ := bw.Create(name)
		fw.Write(lib)
	}
	bw.Close()
	os.WriteFile(filepath.Join(dir, "both_1.0_arm64.deb"), gnuArFile([2]string{"debian-binary", "2.0\n"},
		[2]string{"data.tar", string(plainTar(map[string][]byte{"./usr/share/java/both.jar": both.Bytes()}))}), 0o644)
	r := scan(t, policy(t, "kunpeng920"), dir)
	want := []string{
		"image.tar!/opt/setup.bin!/lib/libx.so",
		"image.tar!/opt/selfx!/lib/libx.so",
		"setup.bin!/lib/libx.so",
		"stored.zip!/inner/setup.bin!/lib/libx.so",
		"deflated.zip!/inner/setup.bin!/lib/libx.so",
		"bundle.a(setup.bin)!/lib/libx.so",
	}
	for _, p := range want {
		if !hasViolation(r, KindForeignArch, p) {
			t.Errorf("%s: not scanned", p)
		}
	}
	if !hasViolation(r, KindJNIMissing, "plugin.zip!/lib/plugin.jar") {
		t.Errorf("plugin.jar, a class file's magic and then a jar: not scanned")
	}
	// Each once, and both.jar only as a jar: plugin.jar and both.jar give
	// an info finding for their x86 libraries.
	if len(withoutFlags(r.Findings)) != len(want)+3 || !r.Summary.Clean && r.Summary.Violations != len(want)+1 {
		t.Errorf("want %d findings, %d violations: %+v", len(want)+3, len(want)+1, r.Findings)
	}
	for _, f := range r.Findings {
		if strings.HasPrefix(f.Path, "both_") && f.Violation() {
			t.Errorf("a jar for both platforms failed: %+v", f)
		}
	}
}

// TestZipBehindLongMember: a member longer than spoolAt is not held while
// it is read; a zip at its end is a finding, not a pass.
func TestZipBehindLongMember(t *testing.T) {
	obj := x86Object(t)
	z := x86Zip(t, obj)
	long := append(append([]byte("#!/bin/sh\n"), make([]byte, spoolAt+(1<<20))...), z...)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "big.tar"), plainTar(map[string][]byte{"opt/app.run": long}), 0o644)
	r := scan(t, policy(t, "kunpeng920"), dir)
	if len(r.Findings) != 1 || !unreadableWith(r, "big.tar!/opt/app.run", "a zip after other content") {
		t.Errorf("%+v", r.Findings)
	}
}

// TestZipEndsIn: the end of a long member holds a zip when an end record
// there points at a central-directory header, or before what was kept.
func TestZipEndsIn(t *testing.T) {
	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	for _, n := range []string{"a", "b"} {
		w, _ := zw.Create(n)
		w.Write(bytes.Repeat([]byte(n), 100))
	}
	zw.Close()
	b := z.Bytes()
	if !zipEndsIn(b, 1000) {
		t.Error("a whole zip kept: not found")
	}
	if !zipEndsIn(b[len(b)-30:], 1000+int64(len(b))-30) {
		t.Error("an end record whose directory is before the kept tail: not found")
	}
	bad := bytes.Clone(b)
	dir := bytes.Index(bad, []byte("PK\x01\x02"))
	bad[dir] = 'X'
	if zipEndsIn(bad, 1000) {
		t.Error("an end record whose directory starts with no header: taken for a zip")
	}
	if zipEndsIn(bytes.Repeat([]byte("PK\x05\x06"), 3), 0) || zipEndsIn(nil, 0) {
		t.Error("signatures without a whole record: taken for a zip")
	}
}

// TestZipBehindSparse: a tar's sparse member is read at its full size
// (the reader fills its holes with zeros), so 1,778 bytes of tar.gz held
// 600 GiB to read, bounded by nothing. Holes count against --max-bytes,
// and every member against --max-entries.
func TestZipBehindSparse(t *testing.T) {
	need(t, "tar")
	obj := x86Object(t)
	z := x86Zip(t, obj)
	src := t.TempDir()
	f, err := os.Create(filepath.Join(src, "app.run"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("#!/bin/sh\n"))
	f.WriteAt(z, 1<<30) // a 1 GiB hole, then the zip
	f.Close()
	for i := 0; i < 20; i++ {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("note%02d.txt", i)), []byte("text\n"), 0o644)
	}
	dir := t.TempDir()
	tarball := filepath.Join(dir, "sparse.tar")
	run(t, src, "tar", "--sparse", "--format=gnu", "-cf", tarball, ".")
	if st, _ := os.Stat(tarball); st.Size() > 1<<20 {
		t.Fatalf("tar wrote %d bytes: not sparse", st.Size())
	}

	r, err := scanWithin(t, 20*time.Second, policy(t, "kunpeng920"), Options{MaxBytes: 64 << 20}, tarball)
	if err != nil {
		t.Fatal(err)
	}
	if !unreadableWith(r, "sparse.tar!/app.run", "scan limits reached") {
		t.Errorf("1 GiB of holes under --max-bytes 64 MiB: %+v", r.Findings)
	}
	r, err = scanWithin(t, 20*time.Second, policy(t, "kunpeng920"), Options{}, tarball)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 1 || !unreadableWith(r, "sparse.tar!/app.run", "a zip after other content") {
		t.Errorf("within the limits: %+v", r.Findings)
	}
	// A sparse member that is code by its first bytes: its holes count
	// too (it was read whole, up to --max-member).
	big := filepath.Join(t.TempDir(), "obj")
	os.MkdirAll(big, 0o755)
	os.WriteFile(filepath.Join(big, "f.o"), obj, 0o644)
	if err := os.Truncate(filepath.Join(big, "f.o"), 200<<20); err != nil {
		t.Fatal(err)
	}
	objTar := filepath.Join(dir, "obj.tar")
	run(t, big, "tar", "--sparse", "--format=gnu", "-cf", objTar, ".")
	r, err = scanWithin(t, 20*time.Second, policy(t, "kunpeng920"), Options{MaxBytes: 1 << 20}, objTar)
	if err != nil {
		t.Fatal(err)
	}
	if !unreadableWith(r, "obj.tar!/f.o", "scan limits reached") {
		t.Errorf("a sparse object of 200 MiB under --max-bytes 1 MiB: %+v", r.Findings)
	}
	r, err = scanWithin(t, 20*time.Second, policy(t, "kunpeng920"), Options{MaxEntries: 10}, tarball)
	if err != nil {
		t.Fatal(err)
	}
	if !unreadableWith(r, "", "scan limits reached (0 bytes out of archives, 11 entries") {
		t.Errorf("21 members under --max-entries 10: %+v", r.Findings)
	}
}

// x86Zip is a zip holding obj as lib/libx.so.
func x86Zip(t *testing.T, obj []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	fw, err := zw.Create("lib/libx.so")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(obj)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// TestAfterEnd: what follows a tar's end or a legacy lzma stream's, which
// their readers stop before, is looked at: a second tar (tar -i reads it),
// a program, a second lzma stream, and a jar too long to hold while
// reading (read where it lies in the file); bytes that are neither zeros
// nor known content are a finding. They passed clean.
func TestAfterEnd(t *testing.T) {
	obj := x86Object(t)
	small := plainTar(map[string][]byte{"x.c": []byte(cFunc)})
	xc := xzTool(t, []byte(cFunc), "--format=lzma")
	var big bytes.Buffer
	zw := zip.NewWriter(&big)
	for _, n := range []string{"pad.bin", "lib/libx.so"} {
		fw, _ := zw.CreateHeader(&zip.FileHeader{Name: n, Method: zip.Store})
		if n == "pad.bin" {
			fw.Write(bytes.Repeat([]byte{0x5a}, spoolAt+(1<<20)))
		} else {
			fw.Write(obj)
		}
	}
	zw.Close()
	dir := t.TempDir()
	for name, b := range map[string][]byte{
		"tar_tar.tar":  append(append([]byte{}, small...), plainTar(map[string][]byte{"x86.o": obj})...),
		"tar_elf.tar":  append(append([]byte{}, small...), obj...),
		"tar_big.tar":  append(append([]byte{}, small...), big.Bytes()...),
		"lzma_lzma.lz": append(append([]byte{}, xc...), xzTool(t, obj, "--format=lzma")...),
		"junk.tar":     append(append([]byte{}, small...), []byte("left over: some text after the end\n")...),
		"padded.tar":   append(append([]byte{}, small...), make([]byte, 20480)...),
		// Over spoolAt after the end: zeros are nothing, a second tar
		// cannot be held while read (a finding).
		"zeros.tar":    append(append([]byte{}, small...), make([]byte, spoolAt+(1<<20))...),
		"long_tar.tar": append(append([]byte{}, small...), plainTar(map[string][]byte{"x86.o": obj, "pad": bytes.Repeat([]byte{1}, spoolAt)})...),
	} {
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	r := scan(t, policy(t, "kunpeng920"), dir)
	for _, p := range []string{"tar_tar.tar(trailing)!/x86.o", "tar_elf.tar(trailing)", "tar_big.tar(trailing)!/lib/libx.so", "lzma_lzma.lz(trailing)!"} {
		if !hasViolation(r, KindForeignArch, p) {
			t.Errorf("%s: not scanned", p)
		}
	}
	if !unreadableWith(r, "junk.tar(trailing)", "after the end that are neither zeros") {
		t.Errorf("text after a tar's end: %+v", r.Findings)
	}
	if !unreadableWith(r, "long_tar.tar(trailing)", "more than dorisarm holds") {
		t.Errorf("a long second tar after a tar's end: %+v", r.Findings)
	}
	if len(r.Findings) != 6 {
		t.Errorf("want 6 findings (none for padding or zeros): %+v", r.Findings)
	}
}
