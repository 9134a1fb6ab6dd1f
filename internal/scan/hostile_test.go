package scan

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// x86Object compiles a small x86-64 object: foreign code in any arm64 build.
func x86Object(t *testing.T) []byte {
	t.Helper()
	return compile(t, "x.c", cFunc, "x86.o", "gcc", "-c")
}

// scanWithin scans with a deadline: a hang is a failure, not a stuck test.
func scanWithin(t *testing.T, d time.Duration, pol *Policy, opts Options, inputs ...string) (*Report, error) {
	t.Helper()
	type res struct {
		r   *Report
		err error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := Scan(context.Background(), inputs, pol, opts)
		ch <- res{r, err}
	}()
	select {
	case x := <-ch:
		return x.r, x.err
	case <-time.After(d):
		t.Fatalf("scan of %v did not finish in %v", inputs, d)
	}
	return nil, nil
}

func unreadableWith(r *Report, pathSuffix, detail string) bool {
	for _, f := range r.Findings {
		if f.Kind == KindUnreadable && f.Violation() && strings.HasSuffix(f.Path, pathSuffix) && strings.Contains(f.Detail, detail) {
			return true
		}
	}
	return false
}

// TestSymlinkToDirectory: a link to a directory on the command line is
// that directory (it used to scan 0 files and report clean).
func TestSymlinkToDirectory(t *testing.T) {
	obj := x86Object(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "real/lib/x86.o"), string(obj))
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "real"), link); err != nil {
		t.Fatal(err)
	}
	r := scan(t, policy(t, "kunpeng920"), link)
	if r.Summary.Files != 1 || !hasViolation(r, KindForeignArch, "lib/x86.o") || r.Summary.Clean {
		t.Errorf("scan through a link: %+v %+v", r.Summary, r.Findings)
	}
}

// TestLinksOutsideAreNamed: a link in a scanned tree whose target is
// outside it is not followed, and every format says so; a link inside is
// not a note (its target is scanned where it is).
func TestLinksOutsideAreNamed(t *testing.T) {
	outside := t.TempDir()
	write(t, filepath.Join(outside, "x86.o"), string(x86Object(t)))
	dir := t.TempDir()
	write(t, filepath.Join(dir, "lib/README"), "text")
	os.Symlink(filepath.Join(outside, "x86.o"), filepath.Join(dir, "lib/libout.so"))
	os.Symlink("README", filepath.Join(dir, "lib/inside"))
	r := scan(t, policy(t, "kunpeng920"), dir)
	var notes []Finding
	for _, f := range r.Findings {
		if f.Kind == KindLinkOutside {
			notes = append(notes, f)
		}
	}
	if len(notes) != 1 || notes[0].Path != "lib/libout.so" || notes[0].Violation() || r.Summary.LinksOutside != 1 {
		t.Fatalf("notes %+v, summary %+v", notes, r.Summary)
	}
	for _, format := range Formats {
		var b strings.Builder
		if err := Write(&b, r, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "lib/libout.so") {
			t.Errorf("%s output does not name the link out of the tree:\n%s", format, b.String())
		}
	}
}

// TestNotAFileOrDirectory: a FIFO named on the command line is an input
// error (it used to block forever); so is a missing path that is not
// clearly an image reference (it used to go to Docker Hub).
func TestNotAFileOrDirectory(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	_, err := scanWithin(t, 10*time.Second, nil, Options{}, fifo)
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "not a regular file or directory") {
		t.Errorf("fifo: %v", err)
	}
	// A FIFO inside a tree is not read either (and does not block).
	os.MkdirAll(filepath.Join(dir, "tree"), 0o755)
	syscall.Mkfifo(filepath.Join(dir, "tree", "pipe.so"), 0o644)
	os.WriteFile(filepath.Join(dir, "tree", "README"), []byte("text"), 0o644)
	if r, err := scanWithin(t, 10*time.Second, nil, Options{}, filepath.Join(dir, "tree")); err != nil || r.Summary.Files != 1 {
		t.Errorf("a tree with a FIFO and a file: %v, %+v", err, r)
	}
	for _, in := range []string{"build/out/kunpeng920", "library/ubuntu:22.04", "docker.io/library/ubuntu", "./x/y:1"} {
		_, err := Scan(context.Background(), []string{filepath.Join(dir, in)}, nil, Options{})
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "no such file or directory") {
			t.Errorf("%s: %v", in, err)
		}
		if in[0] != '.' {
			if r, err := resolveInput(in); err == nil || r.kind == inRemote {
				t.Errorf("%s was taken for an image reference", in)
			}
		}
	}
	for _, in := range []string{"docker://ubuntu:22.04", "registry.example.com/doris/be:2.1.8", "localhost:5000/doris/be@sha256:" + strings.Repeat("a", 64)} {
		if r, err := resolveInput(in); err != nil || r.kind != inRemote {
			t.Errorf("%s: %v %v", in, r.kind, err)
		}
	}
}

// oldGNUSparse builds a tar holding one old-GNU sparse member ('S'): the
// data is stored once and the map places it at offset 0 of the file.
func oldGNUSparse(name string, data []byte) []byte {
	h := make([]byte, 512)
	copy(h, name)
	copy(h[100:], "0000644\x00")
	copy(h[108:], "0000000\x00")
	copy(h[116:], "0000000\x00")
	copy(h[124:], fmt.Sprintf("%011o\x00", len(data)))
	copy(h[136:], "00000000000\x00")
	h[156] = 'S'
	copy(h[257:], "ustar  \x00")
	// sparse map: one entry (offset 0, numbytes len) at 386; realsize at 483.
	copy(h[386:], fmt.Sprintf("%011o\x00", 0))
	copy(h[398:], fmt.Sprintf("%011o\x00", len(data)))
	copy(h[483:], fmt.Sprintf("%011o\x00", len(data)+4096)) // a hole at the end
	for i := range 8 {
		h[148+i] = ' '
	}
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
	var b bytes.Buffer
	b.Write(h)
	b.Write(data)
	b.Write(make([]byte, (512-len(data)%512)%512+1024))
	return b.Bytes()
}

// TestTarTypesGNUExtractsAsFiles: old-GNU sparse members ('S') and
// unknown entry types are extracted by GNU tar as regular files; they are
// scanned (contiguous '7' is in TestTarMetadataAndContiguousMembers).
func TestTarTypesGNUExtractsAsFiles(t *testing.T) {
	obj := x86Object(t)
	dir := t.TempDir()
	sparse := filepath.Join(dir, "sparse.tar")
	os.WriteFile(sparse, oldGNUSparse("lib/x86.o", obj), 0o644)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: 'A', Name: "lib/vendor.o", Size: int64(len(obj)), Mode: 0o644, Format: tar.FormatGNU})
	tw.Write(obj)
	tw.Close()
	unknown := filepath.Join(dir, "unknown.tar")
	os.WriteFile(unknown, buf.Bytes(), 0o644)
	for _, c := range [][2]string{{sparse, "sparse.tar!/lib/x86.o"}, {unknown, "unknown.tar!/lib/vendor.o"}} {
		r := scan(t, policy(t, "kunpeng920"), c[0])
		if !hasViolation(r, KindForeignArch, c[1]) {
			t.Errorf("%s: %+v", c[1], r.Findings)
		}
	}
}

// TestMaxMember: a compressed single file (.so.gz) or a tar member over
// --max-member is a finding, not a silently truncated scan; an ELF header
// followed by nothing real is not clean.
func TestMaxMember(t *testing.T) {
	dir := t.TempDir()
	big := append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 3<<20)...)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(big)
	zw.Close()
	os.WriteFile(filepath.Join(dir, "libbig.so.gz"), gz.Bytes(), 0o644)
	writeTarGz(t, filepath.Join(dir, "big.tar.gz"), map[string][]byte{"lib/libbig.so": big})
	r, err := Scan(context.Background(), []string{dir}, nil, Options{MaxMember: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if !unreadableWith(r, "libbig.so!", "exceeds --max-member") && !unreadableWith(r, "libbig.so!", "larger than --max-member") {
		t.Errorf(".so.gz: %+v", r.Findings)
	}
	if !unreadableWith(r, "big.tar.gz!/lib/libbig.so", "exceeds --max-member") {
		t.Errorf("tar member: %+v", r.Findings)
	}
	// Under the limit, a valid ELF header over zeros: nothing to run, not clean.
	hdr := x86Object(t)[:64]
	hdr[16] = byte(3) // ET_DYN, no program headers
	hdr[17] = 0
	writeTarGz(t, filepath.Join(dir, "hollow.tar.gz"), map[string][]byte{"lib/libhollow.so": append(hdr, make([]byte, 1<<20)...)})
	r = scan(t, nil, filepath.Join(dir, "hollow.tar.gz"))
	if !unreadableWith(r, "libhollow.so", "malformed ELF") {
		t.Errorf("hollow ELF: %+v", r.Findings)
	}
}

// zipSharedStream builds a zip whose n central-directory entries all point
// at one local entry (the "overlapping entries" zip bomb).
func zipSharedStream(n int, body []byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("lib/a000.so")
	w.Write(body)
	zw.Close()
	b := buf.Bytes()
	cd := bytes.Index(b, []byte("PK\x01\x02"))
	eocd := bytes.LastIndex(b, []byte("PK\x05\x06"))
	rec := b[cd:eocd]
	var out bytes.Buffer
	out.Write(b[:cd])
	for i := range n {
		r := append([]byte{}, rec...)
		copy(r[46:], fmt.Sprintf("lib/a%03d.so", i))
		out.Write(r)
	}
	end := append([]byte{}, b[eocd:]...)
	binary.LittleEndian.PutUint16(end[8:], uint16(n))
	binary.LittleEndian.PutUint16(end[10:], uint16(n))
	binary.LittleEndian.PutUint32(end[12:], uint32(len(rec)*n))
	out.Write(end)
	return out.Bytes()
}

// TestZipOverlappingEntries: entries that share one stream are read once;
// the others are findings.
func TestZipOverlappingEntries(t *testing.T) {
	obj := x86Object(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "bomb.zip")
	os.WriteFile(p, zipSharedStream(100, append(obj, make([]byte, 4<<20)...)), 0o644)
	r, err := scanWithin(t, 30*time.Second, policy(t, "kunpeng920"), Options{}, p)
	if err != nil {
		t.Fatal(err)
	}
	over, foreign := 0, 0
	for _, f := range r.Findings {
		if f.Kind == KindUnreadable && strings.Contains(f.Detail, "overlaps") {
			over++
		}
		if f.Kind == KindForeignArch {
			foreign++
		}
	}
	if over != 99 || foreign != 1 {
		t.Errorf("%d overlap findings (want 99), %d foreign (want 1): %+v", over, foreign, r.Summary)
	}
}

// thinArchive writes a GNU thin archive whose members are the given paths.
func thinArchive(paths ...string) []byte {
	var names bytes.Buffer
	var offs []int
	for _, p := range paths {
		offs = append(offs, names.Len())
		names.WriteString(p + "/\n")
	}
	if names.Len()%2 == 1 {
		names.WriteByte('\n')
	}
	var b bytes.Buffer
	b.WriteString("!<thin>\n")
	fmt.Fprintf(&b, "%-16s%-12d%-6d%-6d%-8o%-10d`\n", "//", 0, 0, 0, 0, names.Len())
	b.Write(names.Bytes())
	for _, o := range offs {
		fmt.Fprintf(&b, "%-16s%-12d%-6d%-6d%-8o%-10d`\n", fmt.Sprintf("/%d", o), 0, 0, 0, 0o644, 1<<30)
	}
	return b.Bytes()
}

// TestThinArchiveMembers: thin members resolve inside the scanned tree,
// to regular files only: ../dev/zero, a FIFO, a file outside the tree and
// a link out of it are findings, and nothing blocks or grows.
func TestThinArchiveMembers(t *testing.T) {
	obj := x86Object(t)
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	write(t, filepath.Join(tree, "lib/in.o"), string(obj))
	write(t, filepath.Join(dir, "outside.o"), string(obj))
	if err := syscall.Mkfifo(filepath.Join(tree, "lib/pipe.o"), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	os.Symlink(filepath.Join(dir, "outside.o"), filepath.Join(tree, "lib/link.o"))
	zero := strings.Repeat("../", strings.Count(tree, "/")+2) + "dev/zero"
	write(t, filepath.Join(tree, "lib/libthin.a"), string(thinArchive("in.o", zero, "pipe.o", "../../outside.o", "link.o")))
	r, err := scanWithin(t, 20*time.Second, policy(t, "kunpeng920"), Options{}, tree)
	if err != nil {
		t.Fatal(err)
	}
	if !hasViolation(r, KindForeignArch, "lib/libthin.a(in.o)") {
		t.Errorf("the member inside the tree was not scanned: %+v", r.Findings)
	}
	for _, c := range [][2]string{{"(zero)", "outside the scanned tree"}, {"(pipe.o)", "not a regular file"}, {"(outside.o)", "outside the scanned tree"}, {"(link.o)", "outside the scanned tree"}} {
		if !unreadableWith(r, c[0], c[1]) {
			t.Errorf("%s: no finding %q: %+v", c[0], c[1], r.Findings)
		}
	}
	// The archive alone: its directory is the root.
	r, _ = scanWithin(t, 20*time.Second, policy(t, "kunpeng920"), Options{}, filepath.Join(tree, "lib/libthin.a"))
	if !hasViolation(r, KindForeignArch, "libthin.a(in.o)") || !unreadableWith(r, "(outside.o)", "outside the scanned tree") {
		t.Errorf("archive as the input: %+v", r.Findings)
	}
}

// hollowMemberTarGz is a small tar.gz holding one member of size bytes: a
// valid aarch64 ELF header followed by zeros (the shape of the "3 GiB
// ELF-headed member" report, smaller).
func hollowMemberTarGz(t testing.TB, size int64) []byte {
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "be/lib/doris_be", Size: size, Mode: 0o755, Typeflag: tar.TypeReg})
	hdr := make([]byte, 64)
	copy(hdr, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(hdr[16:], 3)   // ET_DYN
	binary.LittleEndian.PutUint16(hdr[18:], 183) // EM_AARCH64
	binary.LittleEndian.PutUint32(hdr[20:], 1)
	binary.LittleEndian.PutUint16(hdr[52:], 64)
	tw.Write(hdr)
	zero := make([]byte, 1<<20)
	for left := size - 64; left > 0; left -= int64(len(zero)) {
		tw.Write(zero[:min(int64(len(zero)), left)])
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// peakRSS resets and reads the process's peak resident set (Linux).
func peakRSS(t *testing.T, reset bool) int64 {
	if reset {
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			t.Skip("cannot reset the peak RSS:", err)
		}
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	t.Skip("no VmHWM")
	return 0
}

// TestLargeMemberMemory: a 192 MiB member is spooled to a file, not read
// into memory; peak RSS grows far less than the member. The hollow ELF is
// reported, not clean.
func TestLargeMemberMemory(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector's shadow memory makes RSS no measure of the scanner's (make test runs this without -race)")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "doris.tar.gz")
	os.WriteFile(p, hollowMemberTarGz(t, 192<<20), 0o644)
	before := peakRSS(t, true)
	r, err := Scan(context.Background(), []string{p}, policy(t, "kunpeng920"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	grew := peakRSS(t, false) - before
	t.Logf("peak RSS grew by %d MiB", grew>>20)
	if grew > 96<<20 {
		t.Errorf("peak RSS grew by %d MiB scanning a 192 MiB member", grew>>20)
	}
	if r.Summary.Clean || !unreadableWith(r, "be/lib/doris_be", "malformed ELF") {
		t.Errorf("hollow member: %+v", r.Findings)
	}
}

// TestZipEntryCRC: a zip entry whose stored data was changed is a finding
// (the CRC is checked at the end of the entry, which the scan now reaches).
func TestZipEntryCRC(t *testing.T) {
	obj := x86Object(t)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "lib/x.o", Method: zip.Store})
	w.Write(obj)
	zw.Close()
	b := buf.Bytes()
	i := bytes.Index(b, obj)
	b[i+len(obj)-1] ^= 0xff // the last byte: after everything the ELF analysis reads
	p := filepath.Join(t.TempDir(), "x.jar")
	os.WriteFile(p, b, 0o644)
	r := scan(t, nil, p)
	if !unreadableWith(r, "x.jar!/lib/x.o", "checksum") {
		t.Errorf("%+v", r.Findings)
	}
}

// TestReadErrorIsUnreadable: a regular file whose read fails is an
// unreadable finding, not a clean non-binary (the read error was dropped).
// /proc/self/mem is a regular file whose read at offset 0 fails with EIO.
func TestReadErrorIsUnreadable(t *testing.T) {
	const mem = "/proc/self/mem"
	f, err := os.Open(mem)
	if err != nil {
		t.Skip(err)
	}
	_, rerr := f.Read(make([]byte, 16))
	f.Close()
	if rerr == nil {
		t.Skip(mem, "reads at offset 0 here")
	}
	r, err := scanWithin(t, 10*time.Second, nil, Options{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	if !unreadableWith(r, "mem", "reading it failed") || r.Summary.Clean {
		t.Errorf("a file that cannot be read passed: %+v %+v", r.Summary, r.Findings)
	}
}

// TestWrappingAddresses: a relocatable object's section address that would
// run past 2^64 is not used: its code is neither counted twice nor passed
// over. (Linked files' wrapping segments: TestWrappingSegment.)
func TestWrappingAddresses(t *testing.T) {
	b := compile(t, "w.S", ".arch armv8.1-a\n.text\nldadd w3, w1, [x2]\nldadd w3, w1, [x2]\n", "w.o", "aarch64-linux-gnu-gcc", "-c")
	dir := t.TempDir()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	shoff, shentsize := le.Uint64(b[40:]), uint64(le.Uint16(b[58:]))
	patched := false
	for i, s := range f.Sections {
		if s.Name == ".text" {
			le.PutUint64(b[shoff+uint64(i)*shentsize+16:], 0xfffffffffffffffd) // sh_addr
			patched = true
		}
	}
	if !patched {
		t.Fatal("no .text section")
	}
	p := filepath.Join(dir, "wrap.o")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// A relocatable object's section addresses are not believed (a linker
	// places its sections; the scanner lays them out itself): the code is
	// read once, at an address that does not wrap, and judged.
	r := scan(t, policy(t, "generic-armv8"), p)
	if n := r.Files[0].Features["lse"]; n != 2 || r.Summary.Clean || len(findings(r, KindISA)) != 1 {
		t.Errorf("wrapping .text in a .o: %d lse instructions, findings %+v", n, r.Findings)
	}
}

// TestWrappingSegment: a linked file's executable segment whose addresses
// would run past 2^64 (no loader maps it) is reported unread, not
// classified with wrapped addresses nor passed over in silence.
func TestWrappingSegment(t *testing.T) {
	b := compile(t, "w.S", ".arch armv8.1-a\n.text\n.globl _start\n_start:\nldadd w3, w1, [x2]\nldadd w3, w1, [x2]\n", "w", "aarch64-linux-gnu-gcc", "-nostdlib", "-static")
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	phoff, phentsize := le.Uint64(b[32:]), uint64(le.Uint16(b[54:]))
	patched := false
	for i, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			le.PutUint64(b[phoff+uint64(i)*phentsize+16:], 0xfffffffffffffffd) // p_vaddr
			patched = true
		}
	}
	if !patched {
		t.Fatal("no executable PT_LOAD")
	}
	p := filepath.Join(t.TempDir(), "wrap")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	r := scan(t, policy(t, "generic-armv8"), p)
	if r.Summary.Clean || !unreadableWith(r, "wrap", "wrap past the end of the address space") {
		t.Errorf("wrapping segment: %+v", r.Findings)
	}
}

// An input with nothing in it to scan (an empty directory, a tree of FIFOs,
// a layout whose index lists no image), or, with RequireCode (dorisarm
// scan), with nothing in it the scanner judges (text files, data, an
// archive of them), is an input error naming it and what the scanner
// judges, not a clean report of nothing: the path is most likely wrong,
// and nothing was checked.
func TestEmptyInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.MkdirAll(filepath.Join(empty, "sub"), 0o755)
	layout := filepath.Join(dir, "layout")
	os.MkdirAll(layout, 0o755)
	os.WriteFile(filepath.Join(layout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	os.WriteFile(filepath.Join(layout, "index.json"), []byte(`{"schemaVersion":2,"manifests":[]}`), 0o644)
	docs := filepath.Join(dir, "docs")
	os.MkdirAll(filepath.Join(docs, "img"), 0o755)
	os.WriteFile(filepath.Join(docs, "README.md"), []byte("# text\n"), 0o644)
	os.WriteFile(filepath.Join(docs, "conf.yaml"), []byte("a: 1\n"), 0o644)
	os.WriteFile(filepath.Join(docs, "img", "logo.png"), []byte("\x89PNG\r\n\x1a\n"), 0o644)
	var tgz bytes.Buffer // an archive of text: nothing judged in it either
	gz := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "NOTICE", Mode: 0o644, Size: 4, Typeflag: tar.TypeReg})
	tw.Write([]byte("text"))
	tw.Close()
	gz.Close()
	os.WriteFile(filepath.Join(docs, "notes.tar.gz"), tgz.Bytes(), 0o644)
	file := filepath.Join(dir, "README")
	os.WriteFile(file, []byte("text"), 0o644)
	for _, c := range []struct {
		in, want    string
		requireCode bool
	}{
		{empty, "holds no file to scan", false},
		{"oci:" + layout, "holds no image to scan", false},
		{docs, "holds 5 file(s), none of them code the scanner judges (it judges ELF programs", true},
		{file, "is not code the scanner judges", true},
	} {
		r, err := Scan(context.Background(), []string{c.in}, policy(t, "kunpeng920"), Options{RequireCode: c.requireCode})
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.in) || !strings.Contains(err.Error(), c.want) || r != nil {
			t.Errorf("%s: %v, want an input error naming it and %q", c.in, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "clean") && !strings.Contains(err.Error(), "not clean") {
			t.Errorf("%s: %v says clean", c.in, err)
		}
	}
	// With RequireCode, any input with nothing to judge fails the scan,
	// beside one with code.
	obj := filepath.Join(dir, "x.o")
	os.WriteFile(obj, x86Object(t), 0o644)
	if _, err := Scan(context.Background(), []string{obj, docs}, policy(t, "kunpeng920"), Options{RequireCode: true}); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), docs) {
		t.Errorf("code and a tree of text: %v", err)
	}
	// Without it (the build's check of the files a package installed:
	// headers, pkg-config files), files with no code in them were looked
	// at, and the report says how many.
	if r, err := Scan(context.Background(), []string{file, docs}, policy(t, "kunpeng920"), Options{}); err != nil || !r.Summary.Clean || r.Summary.Files != 6 {
		t.Errorf("text files without RequireCode: %v %+v", err, r)
	}
}
