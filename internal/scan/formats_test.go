package scan

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// gnuArFile builds a GNU ar archive of the named members (names up to 15 bytes).
func gnuArFile(members ...[2]string) []byte {
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	for _, m := range members {
		fmt.Fprintf(&b, "%-16s%-12d%-6d%-6d%-8o%-10d`\n", m[0]+"/", 0, 0, 0, 0o644, len(m[1]))
		b.WriteString(m[1])
		if len(m[1])%2 == 1 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// plainTar builds an uncompressed tar of the named members.
func plainTar(files map[string][]byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR})
		tw.Write(data)
	}
	tw.Close()
	return buf.Bytes()
}

// xzTool compresses b with the xz command and its arguments.
func xzTool(t *testing.T, b []byte, args ...string) []byte {
	t.Helper()
	need(t, "xz")
	cmd := exec.Command("xz", append([]string{"-c"}, args...)...)
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xz %v: %v", args, err)
	}
	return out
}

// TestDebWithXz: a Debian package (an ar archive of debian-binary,
// control.tar.xz and data.tar.xz, xz being dpkg's default) is looked
// inside: an x86-64 library in it is foreign code. It used to be "0 ELF,
// clean". Legacy .lzma and multi-block xz are read too.
func TestDebWithXz(t *testing.T) {
	obj := x86Object(t)
	dir := t.TempDir()
	data := plainTar(map[string][]byte{"./usr/lib/libevil.so": obj})
	deb := gnuArFile([2]string{"debian-binary", "2.0\n"},
		[2]string{"control.tar.xz", string(xzTool(t, plainTar(map[string][]byte{"./control": []byte("Package: evil\n")})))},
		[2]string{"data.tar.xz", string(xzTool(t, data))})
	os.WriteFile(filepath.Join(dir, "evil_1.0_arm64.deb"), deb, 0o644)
	os.WriteFile(filepath.Join(dir, "evil.tar.lzma"), xzTool(t, data, "--format=lzma"), 0o644)
	// Many small blocks, as multi-threaded xz writes them, then stream
	// padding and a second stream (after the tar's end: not scanned).
	padded := plainTar(map[string][]byte{"lib/pad.bin": bytes.Repeat([]byte("pad"), 20000), "lib/libevil.so": obj})
	multi := xzTool(t, padded, "-T2", "--block-size=4096")
	os.WriteFile(filepath.Join(dir, "multi.tar.xz"), append(append(multi, 0, 0, 0, 0), xzTool(t, plainTar(map[string][]byte{"lib/two.so": obj}))...), 0o644)
	r := scan(t, policy(t, "kunpeng920"), dir)
	for _, p := range []string{"evil_1.0_arm64.deb(data.tar.xz)!/usr/lib/libevil.so", "evil.tar.lzma!/usr/lib/libevil.so", "multi.tar.xz!/lib/libevil.so"} {
		if !hasViolation(r, KindForeignArch, p) {
			t.Errorf("%s: no foreign-arch finding: %+v", p, r.Findings)
		}
	}
	if r.Summary.Unreadable != 0 {
		t.Errorf("unreadable: %+v", r.Findings)
	}
}

// v7Tar turns a ustar archive's first header into a V7 one (no magic,
// version, owner names or prefix) with its checksum recomputed.
func v7Tar(b []byte) []byte {
	b = append([]byte{}, b...)
	clear(b[257:512])
	for i := 148; i < 156; i++ {
		b[i] = ' '
	}
	sum := 0
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// TestV7Tar: a tar without the ustar magic (tar --format=v7, old GNU
// tar) is recognised by its header checksum and scanned; it used to be
// "not code".
func TestV7Tar(t *testing.T) {
	obj := x86Object(t)
	p := filepath.Join(t.TempDir(), "evil.tar")
	tb := v7Tar(plainTar(map[string][]byte{"lib/libevil.so": obj}))
	os.WriteFile(p, tb, 0o644)
	r := scan(t, policy(t, "kunpeng920"), p)
	if !hasViolation(r, KindForeignArch, "evil.tar!/lib/libevil.so") {
		t.Errorf("v7 tar: %+v", r.Findings)
	}
	if !tarHeader(tb) || tarHeader(make([]byte, 512)) || tarHeader(bytes.Repeat([]byte("a"), 512)) {
		t.Error("tarHeader")
	}
}

// opaqueSamples are a header of each format in opaqueFormats.
func opaqueSamples() map[string][]byte {
	cpioLE := make([]byte, 64)
	copy(cpioLE, "\xc7\x71")
	binary.LittleEndian.PutUint16(cpioLE[20:], 6)
	copy(cpioLE[26:], "a.out\x00")
	cpioBE := make([]byte, 64)
	copy(cpioBE, "\x71\xc7")
	binary.BigEndian.PutUint16(cpioBE[20:], 6)
	copy(cpioBE[26:], "a.out\x00")
	sqLE := make([]byte, 96)
	copy(sqLE, "hsqs")
	binary.LittleEndian.PutUint16(sqLE[28:], 4)
	sqBE := make([]byte, 96)
	copy(sqBE, "sqsh")
	binary.BigEndian.PutUint16(sqBE[28:], 3)
	out := map[string][]byte{
		"cpio-le": cpioLE, "cpio-be": cpioBE, "z": []byte("\x1f\x9d\x90rest of the data"),
		"newc":     []byte("070701" + strings.Repeat("0000000A", 13) + "a.out\x00"),
		"newc-crc": []byte("070702" + strings.Repeat("0000000a", 13) + "a.out\x00"),
		"odc":      []byte("070707" + strings.Repeat("0", 70) + "a.out\x00"),
		"lzip":     []byte("LZIP\x01\x0crest of the data"),
		"sq-le":    sqLE, "sq-be": sqBE,
	}
	for i, f := range opaqueFormats {
		if f.valid == nil {
			out[fmt.Sprint(i)] = append([]byte(f.magic), make([]byte, 100)...)
		}
	}
	return out
}

// TestOpaqueFormats: lz4, cpio, 7z, rar, .Z, lzip, lzop, squashfs and RPM
// are not looked inside; each is an unreadable finding naming the format
// and what to do, on its own, in a tar, in a gzip stream and in an ar
// archive. They used to be "not code", clean.
func TestOpaqueFormats(t *testing.T) {
	dir := t.TempDir()
	samples := opaqueSamples()
	members := map[string][]byte{}
	var ar [][2]string
	for name, b := range samples {
		os.WriteFile(filepath.Join(dir, name+".bin"), b, 0o644)
		members["m/"+name+".bin"] = b
		ar = append(ar, [2]string{name + ".bin", string(b)})
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(b)
		zw.Close()
		os.WriteFile(filepath.Join(dir, name+".bin.gz"), gz.Bytes(), 0o644)
	}
	writeTarGz(t, filepath.Join(dir, "all.tar.gz"), members)
	os.WriteFile(filepath.Join(dir, "all.a"), gnuArFile(ar...), 0o644)
	r := scan(t, policy(t, "kunpeng920"), dir)
	for name, b := range samples {
		detail, ok := opaque(b)
		if !ok || !strings.Contains(detail, "dorisarm cannot") || !strings.Contains(detail, "scan the") {
			t.Errorf("%s: %q", name, detail)
		}
		for _, p := range []string{"/" + name + ".bin", name + ".bin!", "all.tar.gz!/m/" + name + ".bin", "all.a(" + name + ".bin)"} {
			if !unreadableWith(r, p, detail) {
				t.Errorf("%s: no finding %q", p, detail)
			}
		}
	}
	// Not every file starting with 1f 9d or c7 71 is an archive, nor text
	// that starts like a cpio, lzip or squashfs magic.
	for _, b := range []string{"\x1f\x9d\x7fdata", "\xc7\x71" + strings.Repeat("x", 60),
		"070701 meeting notes" + strings.Repeat(" ", 120), "0707071234 phone list" + strings.Repeat(" ", 80),
		"070701" + strings.Repeat("0", 103) + "g", "070701" + strings.Repeat("\x10", 104), "LZIP compression notes", "hsqs\n" + strings.Repeat("notes ", 10)} {
		if _, ok := opaque([]byte(b)); ok {
			t.Errorf("%q taken for an archive", b)
		}
	}
}

// xzPatchDict sets the LZMA2 dictionary of the first block of a
// single-filter xz file made by xz (its block header at 12: size, flags,
// filter 21 01 dict) and fixes the header's CRC32.
func xzPatchDict(t *testing.T, b []byte, code byte) []byte {
	b = append([]byte{}, b...)
	h := b[12 : 12+(int(b[12])+1)*4]
	if h[1] != 0 || h[2] != 0x21 || h[3] != 1 {
		t.Fatalf("unexpected xz block header % x", h)
	}
	h[4] = code
	binary.LittleEndian.PutUint32(h[len(h)-4:], crc32.ChecksumIEEE(h[:len(h)-4]))
	return b
}

// TestXzDictionaryBound: the decompression memory of xz and lzma streams is
// bounded by --max-window: a block claiming a 4 GiB dictionary (which the
// decoder would allocate), one in a second stream after a small one, and
// an lzma header over the limit are findings, quickly and without the
// memory.
func TestXzDictionaryBound(t *testing.T) {
	obj := x86Object(t)
	dir := t.TempDir()
	data := plainTar(map[string][]byte{"lib/libevil.so": obj})
	small := xzTool(t, data, "--lzma2=dict=4KiB")
	huge := xzPatchDict(t, small, 40)
	os.WriteFile(filepath.Join(dir, "huge.tar.xz"), huge, 0o644)
	os.WriteFile(filepath.Join(dir, "second.tar.xz"), append(append([]byte{}, small...), huge...), 0o644)
	os.WriteFile(filepath.Join(dir, "big.tar.xz"), xzTool(t, data, "--lzma2=dict=64MiB"), 0o644)
	os.WriteFile(filepath.Join(dir, "big.tar.lzma"), xzTool(t, data, "--format=lzma", "--lzma1=dict=64MiB"), 0o644)
	before := peakRSS(t, true)
	r, err := scanWithin(t, 30*time.Second, policy(t, "kunpeng920"), Options{MaxWindow: 32 << 20}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if grew := peakRSS(t, false) - before; grew > 64<<20 {
		t.Errorf("peak RSS grew by %d MiB", grew>>20)
	}
	for _, c := range [][2]string{
		{"huge.tar.xz", "xz stream needs a 4095 MiB window"},
		{"second.tar.xz", "xz stream needs a 4095 MiB window"},
		{"big.tar.xz", "xz stream needs a 64 MiB window"},
		{"big.tar.lzma", "lzma stream needs a 64 MiB window"},
	} {
		if !unreadableWith(r, c[0], c[1]) || !unreadableWith(r, c[0], "over the limit of 32 MiB") {
			t.Errorf("%s: no finding %q: %+v", c[0], c[1], r.Findings)
		}
	}
	// The small stream before the huge one was read.
	if !hasViolation(r, KindForeignArch, "second.tar.xz!/lib/libevil.so") {
		t.Errorf("the first stream of second.tar.xz was not scanned: %+v", r.Findings)
	}
	// Within the limit they are read.
	r, _ = scanWithin(t, 30*time.Second, policy(t, "kunpeng920"), Options{}, filepath.Join(dir, "big.tar.xz"), filepath.Join(dir, "big.tar.lzma"))
	if !hasViolation(r, KindForeignArch, "big.tar.xz!/lib/libevil.so") || !hasViolation(r, KindForeignArch, "big.tar.lzma!/lib/libevil.so") || r.Summary.Unreadable != 0 {
		t.Errorf("64 MiB dictionaries under the default limit: %+v", r.Findings)
	}
}

// TestXzCorrupt: a truncated or damaged xz is a finding, never a hang.
func TestXzCorrupt(t *testing.T) {
	obj := x86Object(t)
	dir := t.TempDir()
	x := xzTool(t, plainTar(map[string][]byte{"lib/libevil.so": obj}))
	os.WriteFile(filepath.Join(dir, "cut.tar.xz"), x[:len(x)/2], 0o644)
	bad := append([]byte{}, x...)
	bad[len(bad)/2] ^= 0x55
	os.WriteFile(filepath.Join(dir, "bad.tar.xz"), bad, 0o644)
	os.WriteFile(filepath.Join(dir, "trail.tar.xz"), append(append([]byte{}, x...), "junk"...), 0o644)
	// Sound xz the decoder has no filter for: a finding that says so.
	tarball := plainTar(map[string][]byte{"lib/libevil.so": obj})
	os.WriteFile(filepath.Join(dir, "bcj.tar.xz"), xzTool(t, tarball, "--x86", "--lzma2"), 0o644)
	os.WriteFile(filepath.Join(dir, "delta.tar.xz"), xzTool(t, tarball, "--delta", "--lzma2"), 0o644)
	r, err := scanWithin(t, 30*time.Second, nil, Options{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"cut.tar.xz", "bad.tar.xz", "trail.tar.xz"} {
		if !unreadableWith(r, p, "") {
			t.Errorf("%s: no finding: %+v", p, r.Findings)
		}
	}
	for _, p := range []string{"bcj.tar.xz", "delta.tar.xz"} {
		if !unreadableWith(r, p, "cannot decode; decompress it (xz -d)") {
			t.Errorf("%s: no finding naming the filter: %+v", p, r.Findings)
		}
	}
}

// TestLLVMBitcode: a ThinLTO/LTO object holds no machine code, so its
// instructions cannot be checked; but its module names its target. Bitcode
// for another architecture (alone, in a .a, wrapped, in a tar or a
// compressed stream) is foreign code; bitcode for the target is a finding
// saying to link it and scan the result; bitcode whose triple cannot be
// read says so.
func TestLLVMBitcode(t *testing.T) {
	need(t, "clang-16")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "f.c"), cFunc)
	run(t, dir, "clang-16", "--target=x86_64-linux-gnu", "-flto=thin", "-c", "f.c", "-o", "fbc.o")
	run(t, dir, "clang-16", "--target=aarch64-linux-gnu", "-flto", "-O2", "-c", "f.c", "-o", "arm.o")
	run(t, dir, "clang-16", "--target=arm64-apple-macos13", "-emit-llvm", "-c", "f.c", "-o", "mac.bc")
	read := func(n string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bc, arm := read("fbc.o"), read("arm.o")
	os.WriteFile(filepath.Join(dir, "libbc.a"), gnuArFile([2]string{"fbc.o", string(bc)}), 0o644)
	wrapped := append([]byte("\xde\xc0\x17\x0b\x00\x00\x00\x00\x14\x00\x00\x00"), make([]byte, 8)...)
	binary.LittleEndian.PutUint32(wrapped[12:], uint32(len(bc)))
	binary.LittleEndian.PutUint32(wrapped[16:], 0x01000007) // x86_64
	os.WriteFile(filepath.Join(dir, "wrapped.bc"), append(wrapped, bc...), 0o644)
	os.WriteFile(filepath.Join(dir, "objs.tar"), plainTar(map[string][]byte{"lib/fbc.o": bc, "lib/arm.o": arm}), 0o644)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bc)
	zw.Close()
	os.WriteFile(filepath.Join(dir, "fbc.o.gz"), gz.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "cut.o"), bc[:len(bc)/3], 0o644)

	r := scan(t, policy(t, "kunpeng920"), dir)
	for _, p := range []string{"libbc.a(fbc.o)", "/fbc.o", "wrapped.bc", "objs.tar!/lib/fbc.o", "fbc.o!"} {
		if !hasViolation(r, KindForeignArch, p) || !strings.Contains(detailOf(r, p), "LLVM bitcode for x86_64-unknown-linux-gnu") {
			t.Errorf("%s: not foreign bitcode: %+v", p, r.Findings)
		}
	}
	if !hasViolation(r, KindForeignArch, "mac.bc") {
		t.Errorf("bitcode for macOS on arm64: not foreign")
	}
	for _, p := range []string{"/arm.o", "objs.tar!/lib/arm.o"} {
		if !unreadableWith(r, p, "LLVM bitcode for aarch64-unknown-linux-gnu: an LTO object (-flto)") || !unreadableWith(r, p, "scan the result") {
			t.Errorf("%s: %+v", p, r.Findings)
		}
	}
	if !unreadableWith(r, "cut.o", "whose target could not be read") {
		t.Errorf("truncated bitcode: %+v", r.Findings)
	}
	if len(withoutFlags(r.Findings)) != 9 || r.Summary.Clean {
		t.Errorf("want 9 findings: %+v", r.Findings)
	}
	// Without a target there is nothing to compare with: every bitcode
	// object is a finding naming its target.
	r = scan(t, nil, filepath.Join(dir, "fbc.o"))
	if !unreadableWith(r, "fbc.o", "LLVM bitcode for x86_64-unknown-linux-gnu") {
		t.Errorf("no target: %+v", r.Findings)
	}
}

// zstdRaw is a zstd frame declaring a window of 1<<log bytes and holding b
// in raw blocks: the shape of a large-window stream without its size.
func zstdRaw(log int, b []byte) []byte {
	out := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, byte(log-10) << 3}
	for {
		n := min(len(b), 1<<17-1)
		last := 0
		if n == len(b) {
			last = 1
		}
		h := uint32(n)<<3 | uint32(last) // raw block
		out = append(out, byte(h), byte(h>>8), byte(h>>16))
		out = append(out, b[:n]...)
		b = b[n:]
		if last == 1 {
			return out
		}
	}
}

// TestZstdWindowBudget: zstd windows come out of one budget for all open
// streams (--max-window), so nested large-window streams cannot add up
// (each level of l5.tar.zst made with --long=29 used to take another
// 530 MB). Within the budget nesting works; the level that would exceed it
// is a finding saying so; a window over the limit on its own, and a later
// frame wanting more than the first declared, are findings too.
func TestZstdWindowBudget(t *testing.T) {
	obj := x86Object(t)
	dir := t.TempDir()
	nest := func(levels int) []byte {
		b := obj
		for range levels {
			b = zstdRaw(23, b) // 8 MiB windows
		}
		return b
	}
	os.WriteFile(filepath.Join(dir, "three.so.zst"), nest(3), 0o644)
	os.WriteFile(filepath.Join(dir, "four.so.zst"), nest(4), 0o644)
	os.WriteFile(filepath.Join(dir, "huge.so.zst"), zstdRaw(31, obj), 0o644)
	// Frames after the first may need more than it declares, up to what
	// zstd's ordinary levels use (8 MiB); a small frame first is what
	// concatenating .zst files gives.
	os.WriteFile(filepath.Join(dir, "small-first.so.zst"), append(zstdRaw(10, obj[:200]), zstdRaw(23, obj[200:])...), 0o644)
	os.WriteFile(filepath.Join(dir, "later.so.zst"), append(zstdRaw(20, obj), zstdRaw(24, obj)...), 0o644)
	skip := append([]byte{0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4}, zstdRaw(20, obj)...)
	os.WriteFile(filepath.Join(dir, "skippable.so.zst"), skip, 0o644)
	r, err := scanWithin(t, 30*time.Second, policy(t, "kunpeng920"), Options{MaxWindow: 24 << 20}, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"three.so!!!", "skippable.so!", "small-first.so!"} {
		if !hasViolation(r, KindForeignArch, p) {
			t.Errorf("%s: the x86 object inside was not found: %+v", p, r.Findings)
		}
	}
	for _, c := range [][2]string{
		{"four.so!!!", "zstd stream needs a 8 MiB window (decompression memory) on top of the 24 MiB its enclosing compressed streams hold, over the limit of 24 MiB"},
		{"huge.so.zst", "zstd stream needs a 2048 MiB window"},
		{"later.so.zst", "a zstd frame needs a larger window than the 8 MiB this stream reserved"},
	} {
		if !unreadableWith(r, c[0], c[1]) {
			t.Errorf("%s: no finding %q: %+v", c[0], c[1], r.Findings)
		}
	}
	// The default budget: 1 GiB.
	r = scan(t, policy(t, "kunpeng920"), filepath.Join(dir, "huge.so.zst"))
	if !unreadableWith(r, "huge.so.zst", "over the limit of 1024 MiB") {
		t.Errorf("default limit: %+v", r.Findings)
	}
}

// lzmaHeader: a legacy .lzma header has no magic, so ordinary binary files
// must not pass for one (they would be an unreadable finding, failing the
// gate, when they do not decode).
func TestLzmaHeader(t *testing.T) {
	hdr := func(props byte, dict uint32, size uint64) []byte {
		b := make([]byte, 64)
		b[0] = props
		binary.LittleEndian.PutUint32(b[1:], dict)
		binary.LittleEndian.PutUint64(b[5:], size)
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"xz --format=lzma, size unknown", hdr(0x5d, 1<<23, ^uint64(0)), true},
		{"known size", hdr(0x5d, 3<<20, 1000), true},
		{"zeros after 00 00 10 00 00", hdr(0, 1<<12, 0), false},
		{"lc+lp over 4", hdr(4+9*1, 1<<23, 1000), false},
		{"props past 224", hdr(225, 1<<23, 1000), false},
		{"dictionary not 2^n or 3*2^(n-1)", hdr(0x5d, 5<<20, 1000), false},
		{"dictionary under 4 KiB", hdr(0x5d, 1<<11, 1000), false},
		{"size of 256 GiB", hdr(0x5d, 1<<23, 1<<38), false},
		{"short", []byte{0x5d, 0, 0, 0x80}, false},
	} {
		if got := lzmaHeader(c.b); got != c.want {
			t.Errorf("%s: lzmaHeader = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLzmaTrial: the legacy .lzma header has no magic, and the
// .kotlin_metadata files of real Kotlin jars pass it (355 in the Google
// Cloud SDK's pubsub emulator jar): each was a "corrupt compressed data"
// finding, and a clean jar failed the gate. A head is lzma when it also
// decodes, as far as it goes; real streams still are, whatever dictionary
// their header declares.
func TestLzmaTrial(t *testing.T) {
	// A Kotlin metadata file: a version (0.0.3, 0.0.1 here), then
	// length-prefixed strings.
	var meta bytes.Buffer
	meta.Write([]byte{0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0x0a, 0x5b})
	for _, s := range []string{"kotlin", "ArithmeticException", "RuntimeException", "message", "String"} {
		meta.WriteByte(0x0a)
		meta.WriteByte(byte(len(s)))
		meta.WriteString(s)
	}
	if !lzmaHeader(meta.Bytes()) {
		t.Fatal("the metadata no longer passes lzmaHeader: this test tests nothing")
	}
	if k := sniff(meta.Bytes()); k != kOther {
		t.Errorf("Kotlin metadata sniffed as %d, want kOther", k)
	}
	var text bytes.Buffer
	for i := 0; text.Len() < 200<<10; i++ {
		fmt.Fprintf(&text, "line %d of %d: %x\n", i, i*i%977, crc32.ChecksumIEEE([]byte{byte(i), byte(i >> 8)}))
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"a stream longer than the head", xzTool(t, text.Bytes(), "--format=lzma")},
		{"a whole stream in the head", xzTool(t, []byte("hello"), "--format=lzma")},
		{"a 64 MiB dictionary", xzTool(t, text.Bytes(), "--format=lzma", "--lzma1=dict=64MiB")},
		{"zeros", xzTool(t, make([]byte, 4<<20), "--format=lzma", "--lzma1=dict=1536MiB")},
	} {
		if k := sniff(c.b[:min(len(c.b), sniffLen)]); k != kLzma {
			t.Errorf("%s: sniffed as %d, want kLzma", c.name, k)
		}
	}
	// A real stream damaged after its first bytes is still lzma, so that
	// the decoder reports the damage: a wrong size field (xz -d still
	// writes the whole object out), a damaged end.
	obj := x86Object(t)
	sized := xzTool(t, obj, "--format=lzma")
	binary.LittleEndian.PutUint64(sized[5:], 5000)
	cut := xzTool(t, obj, "--format=lzma")
	cut[len(cut)-1] ^= 0xff
	// A declared size the trial reaches: xz -d writes 64 bytes, then fails.
	short := xzTool(t, obj, "--format=lzma")
	binary.LittleEndian.PutUint64(short[5:], 64)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "sized.o.lzma"), sized, 0o644)
	os.WriteFile(filepath.Join(dir, "end.o.lzma"), cut, 0o644)
	os.WriteFile(filepath.Join(dir, "short.o.lzma"), short, 0o644)
	r := scan(t, policy(t, "kunpeng920"), dir)
	for _, p := range []string{"sized.o.lzma", "end.o.lzma", "short.o.lzma"} {
		if !unreadableWith(r, p, "corrupt") && !hasViolation(r, KindForeignArch, p+"!") {
			t.Errorf("%s: damaged lzma passed: %+v", p, r.Findings)
		}
	}
	// A header may declare a 3 GiB dictionary; the decoder allocates what
	// it declares. The trial does not.
	huge := xzTool(t, text.Bytes(), "--format=lzma")[:sniffLen]
	binary.LittleEndian.PutUint32(huge[1:], 3<<30)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	k := sniff(huge)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; k != kLzma || grew > 32<<20 {
		t.Errorf("a 3 GiB dictionary: sniffed as %d, allocating %d MiB", k, grew>>20)
	}

	jar := t.TempDir()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range []string{"kotlin/ArithmeticException.kotlin_metadata", "kotlin/Unit.kotlin_metadata"} {
		w, _ := zw.Create(n)
		w.Write(meta.Bytes())
	}
	zw.Close()
	os.WriteFile(filepath.Join(jar, "kotlin-stdlib.jar"), buf.Bytes(), 0o644)
	os.WriteFile(filepath.Join(jar, "Unit.kotlin_metadata"), meta.Bytes(), 0o644)
	r = scan(t, policy(t, "kunpeng920"), jar)
	if len(r.Findings) != 0 || r.Summary.Files != 2 {
		t.Errorf("a jar of Kotlin metadata: %d files, %+v", r.Summary.Files, r.Findings)
	}
}

// TestXzBlockDictionaries: the decoder allocates a dictionary per xz
// block, so a stream of small blocks each declaring a large one cost
// minutes and gigabytes from a 200 KB file. Dictionaries count against
// --max-bytes: within it such a file is read, past it it is a finding.
func TestXzBlockDictionaries(t *testing.T) {
	obj := x86Object(t)
	dir := t.TempDir()
	// xz itself writes 8 MiB dictionaries into 1 KiB blocks.
	tarball := plainTar(map[string][]byte{"lib/libevil.so": obj, "pad": make([]byte, 100<<10)})
	x := xzTool(t, tarball, "-6", "--block-size=1KiB")
	p := filepath.Join(dir, "blocks.tar.xz")
	os.WriteFile(p, x, 0o644)
	r, err := scanWithin(t, 30*time.Second, policy(t, "kunpeng920"), Options{}, p)
	if err != nil {
		t.Fatal(err)
	}
	if !hasViolation(r, KindForeignArch, "blocks.tar.xz!/lib/libevil.so") || r.Summary.Unreadable != 0 {
		t.Errorf("within --max-bytes: %+v", r.Findings)
	}
	r, err = scanWithin(t, 30*time.Second, policy(t, "kunpeng920"), Options{MaxBytes: 64 << 20}, p)
	if err != nil {
		t.Fatal(err)
	}
	// The dictionaries or the data decompressed between them reach the
	// limit first: either way a finding naming --max-bytes.
	if !unreadableWith(r, "blocks.tar.xz", "--max-bytes") {
		t.Errorf("%d blocks of 8 MiB under --max-bytes 64 MiB: %+v", len(tarball)>>10, r.Findings)
	}
}

// detailOf is the detail of the first finding whose path ends in suffix.
func detailOf(r *Report, suffix string) string {
	for _, f := range r.Findings {
		if strings.HasSuffix(f.Path, suffix) {
			return f.Detail
		}
	}
	return ""
}
