package scan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"strconv"
	"strings"

	"github.com/ulikunitz/xz/lzma"
)

// opaqueFormat is a container or compression format the scan recognises
// but does not look inside: content in it is an unreadable finding, never
// "not code".
type opaqueFormat struct {
	magic string
	off   int               // where the magic is
	name  string            // what the file is
	do    string            // what to do instead ("" : unpack it and scan the directory)
	say   string            // the whole detail after the name, when "cannot look inside" does not fit
	valid func([]byte) bool // further checks of the header; nil: the magic is enough
}

var opaqueFormats = []opaqueFormat{
	{magic: "\x04\x22\x4d\x18", name: "lz4 archive"},
	{magic: "\x02\x21\x4c\x18", name: "lz4 archive (legacy format)"},
	{magic: "070701", name: "cpio archive (newc)", valid: digits(6, 13*8, 16)},
	{magic: "070702", name: "cpio archive (newc with CRC)", valid: digits(6, 13*8, 16)},
	{magic: "070707", name: "cpio archive (odc)", valid: digits(6, 70, 8)},
	{magic: "\xc7\x71", name: "cpio archive (binary)", valid: cpioBinary(binary.LittleEndian)},
	{magic: "\x71\xc7", name: "cpio archive (binary)", valid: cpioBinary(binary.BigEndian)},
	{magic: "7z\xbc\xaf\x27\x1c", name: "7-Zip archive"},
	{magic: "Rar!\x1a\x07", name: "RAR archive"},
	{magic: "\x1f\x9d", name: "compress (.Z) archive", valid: compressHeader},
	{magic: "LZIP", name: "lzip archive", valid: func(b []byte) bool { return len(b) > 5 && b[4] <= 1 }},
	{magic: "\x89LZO\x00\r\n\x1a\n", name: "lzop archive"},
	{magic: "hsqs", name: "squashfs image", do: "unsquashfs it and scan the directory", valid: squashfsVersion(binary.LittleEndian)},
	{magic: "sqsh", name: "squashfs image", do: "unsquashfs it and scan the directory", valid: squashfsVersion(binary.BigEndian)},
	{magic: "\xed\xab\xee\xdb", name: "RPM package", do: "unpack it (rpm2cpio FILE | cpio -idm) and scan the directory"},
	// ThinLTO/LTO objects (-flto), alone or in a .a: their machine code
	// does not exist until the link.
	{magic: bitcodeMagic, name: "LLVM bitcode", say: bitcodeSay},
	{magic: bitcodeWrapperMagic, name: "LLVM bitcode", say: bitcodeSay},
}

// LLVM bitcode starts with bitcodeMagic, or with bitcodeWrapperMagic when
// it is in the wrapper Apple's tools and -fembed-bitcode write.
const (
	bitcodeMagic        = "BC\xc0\xde"
	bitcodeWrapperMagic = "\xde\xc0\x17\x0b"
)

const (
	bitcodeSay       = "an LTO object (-flto) whose target could not be read: dorisarm cannot check the machine code it becomes nor for which architecture; link it (the LTO link writes the machine code) and scan the result, or build it without -flto"
	bitcodeNativeSay = "an LTO object (-flto): dorisarm cannot check the machine code it becomes; link it (the LTO link writes the machine code) and scan the result, or build it without -flto"
)

// isBitcode says whether b starts as LLVM bitcode does, raw or wrapped.
func isBitcode(b []byte) bool {
	return bytes.HasPrefix(b, []byte(bitcodeMagic)) || bytes.HasPrefix(b, []byte(bitcodeWrapperMagic))
}

// opaque says what b is when it is a format the scan does not look inside,
// and what to do.
func opaque(b []byte) (detail string, ok bool) {
	for _, f := range opaqueFormats {
		if len(b) < f.off+len(f.magic) || string(b[f.off:f.off+len(f.magic)]) != f.magic || (f.valid != nil && !f.valid(b)) {
			continue
		}
		if f.say != "" {
			return f.name + ": " + f.say, true
		}
		do := f.do
		if do == "" {
			do = "unpack it and scan the directory"
		}
		short, _, _ := strings.Cut(f.name, " ")
		return f.name + ": dorisarm cannot look inside " + short + "; " + do, true
	}
	return "", false
}

// cpioBinary checks an old binary cpio header: its name (namesize at 20)
// ends in NUL where the header says.
func cpioBinary(bo binary.ByteOrder) func([]byte) bool {
	return func(b []byte) bool {
		if len(b) < 26 {
			return false
		}
		n := int(bo.Uint16(b[20:]))
		return n >= 2 && 26+n <= len(b) && b[26+n-1] == 0
	}
}

// digits checks that the n bytes from off are digits of base (the ASCII
// header fields of a cpio archive): text that starts like one is not one.
func digits(off, n, base int) func([]byte) bool {
	return func(b []byte) bool {
		if len(b) < off+n {
			return false
		}
		for _, c := range b[off : off+n] {
			d := strings.IndexByte("0123456789abcdef", c)
			if d < 0 {
				d = strings.IndexByte("0123456789ABCDEF", c)
			}
			if d < 0 || d >= base {
				return false
			}
		}
		return true
	}
}

// squashfsVersion checks a squashfs superblock's major version (at 28):
// 1 to 4 are the versions there have been.
func squashfsVersion(bo binary.ByteOrder) func([]byte) bool {
	return func(b []byte) bool {
		if len(b) < 30 {
			return false
		}
		v := bo.Uint16(b[28:])
		return v >= 1 && v <= 4
	}
}

// compressHeader checks the flags byte of a .Z file: 9-16 bits, reserved bits clear.
func compressHeader(b []byte) bool {
	return len(b) >= 3 && b[2]&0x60 == 0 && b[2]&0x1f >= 9 && b[2]&0x1f <= 16
}

// tarHeader says whether b starts with a tar header, with or without the
// ustar magic (V7 and old GNU tars have none): a name and a valid checksum
// (the sum of the block's bytes, the checksum field counted as spaces;
// some old tars summed signed bytes).
func tarHeader(b []byte) bool {
	if len(b) < 512 || b[0] == 0 {
		return false
	}
	field := strings.Trim(string(b[148:156]), " \x00")
	want, err := strconv.ParseInt(field, 8, 64)
	if err != nil || field == "" {
		return false
	}
	var u, s int64
	for i, c := range b[:512] {
		if i >= 148 && i < 156 {
			c = ' '
		}
		u += int64(c)
		s += int64(int8(c))
	}
	return want == u || want == s
}

var xzMagic = []byte("\xfd7zXZ\x00")

// lzmaHeader says whether b starts with a legacy .lzma header (it has no
// magic): valid properties (lc+lp <= 4), a dictionary size that xz and lzma
// write (2^n or 2^n+2^(n-1)), and a size that is unknown or from 1 byte to
// 256 GiB. A size of 0 is left out: a binary file starting 00 00 10 00 00
// and zeros would pass otherwise, and an empty stream holds nothing.
func lzmaHeader(b []byte) bool {
	if len(b) < 13 || b[0] >= 9*5*5 {
		return false
	}
	lc, lp := int(b[0]%9), int(b[0]/9%5)
	if lc+lp > 4 {
		return false
	}
	d := binary.LittleEndian.Uint32(b[1:])
	if d < 1<<12 {
		return false
	}
	top := uint32(1) << (31 - bits.LeadingZeros32(d))
	if d != top && d != top|top>>1 {
		return false
	}
	size := binary.LittleEndian.Uint64(b[5:])
	return size == ^uint64(0) || size > 0 && size < 1<<38
}

// lzmaTrialBytes is how much of a stream after its header lzmaDecodes
// decodes. Random printable text after a valid header fails within it
// (of 20,000 heads 141 got past 32 bytes and 17 past 48; of 100,000, one
// got past 64, by decoding to lzmaTrialOut first), while damage further on
// does not make a stream "not lzma".
const lzmaTrialBytes = 64

// lzmaTrialDict is the dictionary lzmaDecodes decodes with, and
// lzmaTrialOut the output after which it stops: the decoder fills its
// dictionary before it hands any output over, so a trial that reads no
// more than lzmaTrialOut decodes no further than the dictionary reaches
// back, and a match it takes for reaching before the start does.
const (
	lzmaTrialDict = 64 << 10
	lzmaTrialOut  = 16 << 10
)

// lzmaDecodes says whether b, which lzmaHeader takes for a legacy .lzma
// header, is followed by data that decodes without error through its
// first lzmaTrialBytes. The header has no magic, and files that are not
// compressed pass it: the .kotlin_metadata files of Kotlin jars start 00 00
// 00 03 00 00 00 01 00, a valid header (a 192 KiB dictionary, 65,536
// bytes); their data fails within a few bytes (a match reaching back
// before the start). A real stream damaged later is still lzma, and so is
// one whose declared size is wrong (the trial takes the size as unknown):
// the decoder reports the damage when it gets there.
func lzmaDecodes(b []byte) bool {
	h := bytes.Clone(b[:min(len(b), 13+lzmaTrialBytes)])
	if binary.LittleEndian.Uint32(h[1:]) > lzmaTrialDict {
		binary.LittleEndian.PutUint32(h[1:], lzmaTrialDict)
	}
	binary.LittleEndian.PutUint64(h[5:], ^uint64(0))
	r, err := lzma.NewReader(bytes.NewReader(h))
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, io.LimitReader(r, lzmaTrialOut))
	return err == nil || errors.Is(err, io.ErrUnexpectedEOF)
}
