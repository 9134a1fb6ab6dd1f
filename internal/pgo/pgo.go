// Package pgo checks a profile given to `dorisarm build --pgo-profile` before
// a build starts, so that a wrong file fails in a second with a message that
// says what it is and what to do, not an hour later with the compiler's
// "bad magic".
//
// clang takes one LLVM indexed profile (.profdata, the output of
// llvm-profdata merge); GCC takes the directory of .gcda files a
// -fprofile-generate build wrote when it ran. Only headers are read, with
// bounded reads, and a directory walk stops after maxEntries entries.
package pgo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/dorisarm/dorisarm/internal/fsutil"
)

// Info describes a profile that passed Validate.
type Info struct {
	Kind    string // e.g. "LLVM indexed profile (IR)" or "GCC .gcda directory"
	Version string // e.g. "9 (LLVM 16)" or "B22* (GCC 12.2)"
	Files   int    // 1 for an LLVM profile, the number of .gcda files for GCC
	Size    int64  // bytes, summed over the files
}

func (i Info) String() string {
	files := "1 file"
	if i.Files != 1 {
		files = fmt.Sprintf("%d files", i.Files)
	}
	return fmt.Sprintf("%s, version %s, %s, %d bytes", i.Kind, i.Version, files, i.Size)
}

// maxEntries bounds a directory walk (a variable for the tests).
var maxEntries = 100000

// Validate checks that path is a PGO profile the given compiler dialect
// ("clang" or "gcc") can use, and describes it. The error says what was
// found and what was expected. A symlink is followed for path itself only.
func Validate(path, dialect string) (Info, error) {
	if dialect != "clang" && dialect != "gcc" {
		return Info{}, fmt.Errorf("pgo profile %s: unknown compiler dialect %q (want clang or gcc)", path, dialect)
	}
	st, err := os.Stat(path)
	if err != nil {
		return Info{}, fmt.Errorf("pgo profile: %w", err)
	}
	switch dialect {
	case "clang":
		if st.IsDir() {
			return Info{}, clangDir(path)
		}
		if !st.Mode().IsRegular() {
			return Info{}, fmt.Errorf("%s is not a regular file (%s); clang needs an LLVM indexed profile (.profdata)", path, st.Mode().Type())
		}
		return indexed(path, st.Size())
	default:
		if st.IsDir() {
			return gccDir(path)
		}
		return Info{}, gccFile(path, st)
	}
}

// LLVM's profile magics (llvm/ProfileData/InstrProfData.inc, InstrProf.h).
// The indexed magic is written little-endian on every host; a raw profile's
// magic is in the byte order of the machine that ran the program.
const (
	indexedMagic = 0x8169666f72706cff // the bytes "\xfflprofi\x81"
	rawMagic64   = 0xff6c70726f667281 // "\xfflprofr\x81" as a uint64
	rawMagic32   = 0xff6c70726f665281 // "\xfflprofR\x81"
	sampleMagic  = 0x5350524f46343200 // "SPROF42" and a format byte, ULEB128-encoded
	gcdaMagic    = 0x67636461         // "gcda", written as a host uint32
	gcnoMagic    = 0x67636e6f         // "gcno"
)

// Indexed profile versions (IndexedInstrProf::ProfVersion) accepted, and the
// LLVM release that writes each: the low 32 bits of the version field.
var llvmRelease = map[uint32]int{8: 15, 9: 16, 10: 17, 11: 18, 12: 19}

const minVersion, maxVersion = 8, 12

// Flags in the high 32 bits of the version field (VARIANT_MASK_* in
// InstrProfData.inc); the IR bit clear means a front-end (clang) profile.
var variants = []struct {
	bit  uint
	name string
}{
	{56, "IR"}, {57, "context-sensitive"}, {58, "entry-first"}, {59, "debug-info correlated"},
	{60, "byte coverage"}, {61, "function-entry only"}, {62, "memprof"}, {63, "temporal"},
}

const knownVariants = 0xff00000000000000

const expectMagic = `expected 0xff6c70726f666981 "\xfflprofi\x81"`

// indexed checks the header of an LLVM indexed profile: magic, version and
// the offsets that must fall inside the file.
func indexed(path string, size int64) (Info, error) {
	f, _, err := fsutil.OpenRegular(path)
	if err != nil {
		return Info{}, fmt.Errorf("pgo profile: %w", err)
	}
	defer f.Close()
	var b [72]byte // the longest header (version 12): nine uint64s
	n, err := io.ReadFull(f, b[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Info{}, fmt.Errorf("pgo profile: %w", err)
	}
	h := b[:n]
	if n < 8 || binary.LittleEndian.Uint64(h) != indexedMagic {
		return Info{}, notIndexed(path, h)
	}
	if n < 16 {
		return Info{}, fmt.Errorf("%s is truncated: %d bytes, shorter than an LLVM indexed profile's 16-byte magic and version", path, n)
	}
	raw := binary.LittleEndian.Uint64(h[8:])
	v := uint32(raw)
	if v < minVersion || v > maxVersion {
		hint := "re-merge it with llvm-profdata 15-19 (llvm-profdata merge -o new.profdata old.profdata)"
		if v > maxVersion {
			hint = "write it with llvm-profdata 15-19, the LLVM of the compiler that uses it"
		}
		return Info{}, fmt.Errorf("%s is an LLVM indexed profile of version %d; accepted are versions %d-%d (LLVM 15-19): %s", path, v, minVersion, maxVersion, hint)
	}
	if extra := raw &^ (knownVariants | 0xffffffff); extra != 0 {
		return Info{}, fmt.Errorf("%s: LLVM indexed profile version field 0x%016x has unknown flag bits 0x%016x", path, raw, extra)
	}
	// Header: Magic, Version, Unused, HashType, HashOffset, then one offset
	// more per version from 8 on (MemProf, BinaryIds, TemporalProfTraces;
	// VTableNames from 12); an offset of 0 means the section is absent.
	fields := map[uint32]int{8: 6, 9: 7, 10: 8, 11: 8, 12: 9}[v]
	hlen := 8 * fields
	if n < hlen || size < int64(hlen) {
		return Info{}, fmt.Errorf("%s is truncated: %d bytes, shorter than the %d-byte header of an LLVM indexed profile of version %d", path, size, hlen, v)
	}
	if ht := binary.LittleEndian.Uint64(h[24:]); ht != 0 {
		return Info{}, fmt.Errorf("%s: LLVM indexed profile has hash type %d; LLVM writes 0 (MD5)", path, ht)
	}
	for i := 4; i < fields; i++ {
		off := binary.LittleEndian.Uint64(h[8*i:])
		if (i == 4 || off != 0) && (off < uint64(hlen) || off > uint64(size)) {
			return Info{}, fmt.Errorf("%s is truncated or corrupt: header field %d points at byte %d of a %d-byte file", path, i, off, size)
		}
	}
	var kind []string
	if raw&(1<<56) == 0 {
		kind = append(kind, "front-end")
	}
	for _, f := range variants {
		if raw&(1<<f.bit) != 0 {
			kind = append(kind, f.name)
		}
	}
	return Info{
		Kind:    "LLVM indexed profile (" + strings.Join(kind, ", ") + ")",
		Version: fmt.Sprintf("%d (LLVM %d)", v, llvmRelease[v]),
		Files:   1,
		Size:    size,
	}, nil
}

// notIndexed says what a file that lacks the indexed magic is instead.
func notIndexed(path string, h []byte) error {
	const clangWants = "clang -fprofile-use needs an LLVM indexed profile (.profdata)"
	if len(h) == 0 {
		return fmt.Errorf("%s is empty; %s", path, clangWants)
	}
	if len(h) < 8 {
		return fmt.Errorf("%s is truncated: %d bytes, shorter than the 8-byte magic of an LLVM indexed profile; %s", path, len(h), clangWants)
	}
	be := binary.BigEndian.Uint64(h)
	switch {
	case be == indexedMagic:
		return fmt.Errorf("%s has the byte-swapped magic of an LLVM indexed profile (a big-endian file); llvm-profdata writes indexed profiles little-endian on every host: re-create it with llvm-profdata merge", path)
	case isRaw(h):
		return fmt.Errorf("%s is a raw LLVM profile (.profraw), but %s: merge raw profiles with llvm-profdata merge -o x.profdata *.profraw, using the llvm-profdata of the clang that built the instrumented program", path, clangWants)
	case isGCC(h):
		return fmt.Errorf("%s is a GCC profile file (.gcda/.gcno); %s from a clang -fprofile-generate run, or build with a gcc target to use GCC profiles", path, clangWants)
	case isSample(h):
		return fmt.Errorf("%s is an LLVM sample profile (AutoFDO, for -fprofile-sample-use); %s from an instrumented run", path, clangWants)
	}
	what := fmt.Sprintf("magic 0x%016x", be)
	if line, ok := textStart(h); ok {
		what += fmt.Sprintf(", a text file starting %q", line)
		if strings.HasPrefix(line, ":") || strings.HasPrefix(line, "# IR level") || strings.HasPrefix(line, "# CSIR level") || strings.Contains(string(h), "\n# Func Hash:\n") {
			return fmt.Errorf("%s is a text LLVM profile (llvm-profdata --text), but %s: convert it with llvm-profdata merge -o x.profdata %s", path, clangWants, path)
		}
	}
	return fmt.Errorf("%s is not an LLVM indexed profile (%s; %s): merge raw profiles with llvm-profdata merge -o x.profdata *.profraw", path, what, expectMagic)
}

// isRaw reports the magic of a raw LLVM profile, from a 64- or 32-bit
// program of either byte order.
func isRaw(h []byte) bool {
	if len(h) < 8 {
		return false
	}
	le, be := binary.LittleEndian.Uint64(h), binary.BigEndian.Uint64(h)
	return le == rawMagic64 || le == rawMagic32 || be == rawMagic64 || be == rawMagic32
}

// isLLVM reports an indexed or raw LLVM profile.
func isLLVM(h []byte) bool {
	return len(h) >= 8 && binary.LittleEndian.Uint64(h) == indexedMagic || isRaw(h)
}

// isGCC reports a .gcda or .gcno magic in either byte order.
func isGCC(h []byte) bool {
	if len(h) < 4 {
		return false
	}
	le, be := binary.LittleEndian.Uint32(h), binary.BigEndian.Uint32(h)
	return le == gcdaMagic || le == gcnoMagic || be == gcdaMagic || be == gcnoMagic
}

// isSample reports the ULEB128-encoded magic of a binary sample profile.
func isSample(h []byte) bool {
	var v uint64
	for i, c := range h {
		if i == 10 {
			return false
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v&^0xff == sampleMagic
		}
	}
	return false
}

// textStart returns the first line of h when h looks like text.
func textStart(h []byte) (string, bool) {
	for i, r := range string(h) {
		if r == utf8.RuneError && len(h)-i >= utf8.UTFMax || r < ' ' && r != '\n' && r != '\r' && r != '\t' {
			return "", false
		}
	}
	line, _, _ := strings.Cut(string(h), "\n")
	return line, true
}

// scan is what a bounded walk of a directory found.
type scan struct {
	gcda              []string // regular .gcda files
	profraw, profdata []string // regular files with those extensions
	other             []string // other regular files
}

// walk lists the regular files under dir (following a symlink at dir
// itself, none below it), giving up after maxEntries entries.
func walk(dir string) (scan, error) {
	var s scan
	entries := 0
	err := fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entries++; entries > maxEntries {
			return fmt.Errorf("%s has more than %d entries; pass the directory of the profiling run only", dir, maxEntries)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		p = filepath.Join(dir, filepath.FromSlash(p))
		switch filepath.Ext(p) {
		case ".gcda":
			s.gcda = append(s.gcda, p)
		case ".profraw":
			s.profraw = append(s.profraw, p)
		case ".profdata":
			s.profdata = append(s.profdata, p)
		default:
			s.other = append(s.other, p)
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("pgo profile: %w", err)
	}
	return s, nil
}

// clangDir says why a directory is not what clang takes, and what to pass.
func clangDir(dir string) error {
	s, err := walk(dir)
	if err != nil {
		return err
	}
	switch {
	case len(s.profdata) == 1:
		return fmt.Errorf("%s is a directory; clang takes the indexed profile file itself: pass %s", dir, s.profdata[0])
	case len(s.profraw) > 0:
		return fmt.Errorf("%s is a directory of %d raw LLVM profiles (.profraw); clang takes one indexed profile: merge them (llvm-profdata reads directories recursively) with llvm-profdata merge -o x.profdata %s", dir, len(s.profraw), dir)
	case len(s.gcda) > 0:
		return fmt.Errorf("%s is a GCC profile directory (%d .gcda files); clang needs an LLVM indexed profile (.profdata) from a clang -fprofile-generate run, or build with a gcc target to use it", dir, len(s.gcda))
	}
	return fmt.Errorf("%s is a directory (%d files, %d .profdata); clang needs one LLVM indexed profile file (.profdata)", dir, len(s.other)+len(s.profdata), len(s.profdata))
}

const gccWants = "GCC uses the .gcda directory of a -fprofile-generate run"

// gccFile says why a file is not what GCC takes.
func gccFile(path string, st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a directory (%s); %s", path, st.Mode().Type(), gccWants)
	}
	h, err := head(path, 8)
	if err != nil {
		return err
	}
	switch {
	case isLLVM(h):
		return fmt.Errorf("%s; got an LLVM profile (%s): build with a clang target, or profile with gcc -fprofile-generate and pass the directory it writes", gccWants, path)
	case len(h) >= 4 && binary.LittleEndian.Uint32(h) == gcdaMagic:
		return fmt.Errorf("%s is a single .gcda file; %s: pass its directory, %s", path, gccWants, filepath.Dir(path))
	}
	return fmt.Errorf("%s is a file, not a directory; %s", path, gccWants)
}

// gccDir checks every .gcda file under dir: the magic, and one GCC version.
func gccDir(dir string) (Info, error) {
	s, err := walk(dir)
	if err != nil {
		return Info{}, err
	}
	if len(s.gcda) == 0 {
		switch {
		case len(s.profraw)+len(s.profdata) > 0:
			return Info{}, fmt.Errorf("%s; got an LLVM profile (%s holds %d .profraw and %d .profdata files): build with a clang target, or profile with gcc -fprofile-generate", gccWants, dir, len(s.profraw), len(s.profdata))
		case len(s.other) == 0:
			return Info{}, fmt.Errorf("%s is empty; %s (the .gcda files appear when the instrumented program has run)", dir, gccWants)
		}
		return Info{}, fmt.Errorf("%s has no .gcda files (%d other files, e.g. %s); %s", dir, len(s.other), s.other[0], gccWants)
	}
	info := Info{Kind: "GCC .gcda directory", Files: len(s.gcda)}
	var first string
	for _, p := range s.gcda {
		h, err := head(p, 8)
		if err != nil {
			return Info{}, err
		}
		if len(h) < 8 {
			return Info{}, fmt.Errorf("%s is truncated: %d bytes, shorter than a .gcda file's 8-byte magic and version", p, len(h))
		}
		switch {
		case binary.BigEndian.Uint32(h) == gcdaMagic:
			return Info{}, fmt.Errorf("%s is a big-endian .gcda file (magic \"gcda\"); expected the little-endian \"adcg\"", p)
		case binary.LittleEndian.Uint32(h) != gcdaMagic:
			return Info{}, fmt.Errorf("%s is not a .gcda file (magic %q; expected \"adcg\")", p, h[:4])
		}
		v := gccVersion(binary.LittleEndian.Uint32(h[4:]))
		if first == "" {
			first, info.Version = p, v
		} else if v != info.Version {
			return Info{}, fmt.Errorf("%s has version %s but %s has %s; GCC ignores the .gcda files of another version: profile again with one compiler", p, v, first, info.Version)
		}
		if st, err := os.Stat(p); err == nil {
			info.Size += st.Size()
		}
	}
	return info, nil
}

// gccVersion renders a .gcda version word (gcov-iov.cc): four characters,
// major/10+'A', major%10+'0', minor+'0' and '*' for a release, so "B22*" is
// GCC 12.2. Other words are shown as they are.
func gccVersion(w uint32) string {
	c := [4]byte{byte(w >> 24), byte(w >> 16), byte(w >> 8), byte(w)}
	s := fmt.Sprintf("%q", c[:])
	if c[0] >= 'A' && c[0] <= 'Z' && c[1] >= '0' && c[1] <= '9' && c[2] >= '0' && c[2] <= '9' {
		return fmt.Sprintf("%s (GCC %d.%d)", s[1:len(s)-1], int(c[0]-'A')*10+int(c[1]-'0'), c[2]-'0')
	}
	return s
}

// head reads up to n bytes from the start of a file.
func head(path string, n int) ([]byte, error) {
	f, _, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("pgo profile: %w", err)
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("pgo profile: %w", err)
	}
	return b[:m], nil
}
