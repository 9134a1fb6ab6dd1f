package pgo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
)

// A program with a branch and a call, in two translation units so that GCC
// writes two .gcda files.
const (
	mainC = "int f(int);\nint main(int argc, char **argv) { int s = 0; for (int i = 0; i < 1000 + argc; i++) s += f(i); return s == 42; }\n"
	fC    = "int f(int x) { return x % 3 ? x * 2 : x + 1; }\n"
)

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-deps.sh)", tool)
		}
	}
}

func write(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func run(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := run(t, dir, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// instrumented builds the program with clang-16 and flags, and runs it so
// that it writes its raw profile. Natively when the host's profile runtime is
// installed; otherwise for each ISA of matrix.yaml under its qemu-user (the
// cross profile runtime is what scripts/install-deps.sh installs).
func instrumented(t *testing.T, dir string, flags ...string) {
	t.Helper()
	need(t, "clang-16", "llvm-profdata-16")
	write(t, filepath.Join(dir, "main.c"), []byte(mainC))
	write(t, filepath.Join(dir, "f.c"), []byte(fC))
	args := append([]string{"clang-16", "-O1", "main.c", "f.c", "-o", "prog"}, flags...)
	out, err := run(t, dir, args...)
	if err == nil {
		mustRun(t, dir, "./prog")
		return
	}
	why := []string{"natively: " + firstLine(out)}
	m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(m.ISAs))
	for name := range m.ISAs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		isa := m.ISAs[name]
		if _, err := exec.LookPath(isa.Qemu); err != nil {
			continue
		}
		cross := append([]string{args[0], "--target=" + isa.Triple}, args[1:]...)
		if out, err := run(t, dir, cross...); err != nil {
			why = append(why, name+": "+firstLine(out))
			continue
		}
		mustRun(t, dir, isa.Qemu, "-L", isa.Sysroot, "./prog")
		return
	}
	t.Skipf("clang-16 cannot link a profiling program here (%s): install a libclang-rt-16-dev", strings.Join(why, "; "))
}

// glob returns the files of dir that match pattern, at least one.
func glob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	found, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(found) == 0 {
		t.Fatalf("no %s in %s", pattern, dir)
	}
	return found
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// merged returns an indexed profile of a -fprofile-generate run, merged by
// llvm-profdata-16, and the directory of its raw profiles.
func merged(t *testing.T) (profdata, rawdir string) {
	t.Helper()
	dir := t.TempDir()
	rawdir = filepath.Join(dir, "raw")
	instrumented(t, dir, "-fprofile-generate="+rawdir)
	profdata = filepath.Join(dir, "prog.profdata")
	mustRun(t, dir, append([]string{"llvm-profdata-16", "merge", "-o", profdata}, glob(t, rawdir, "*.profraw")...)...)
	return profdata, rawdir
}

func wantErr(t *testing.T, path, dialect string, want ...string) {
	t.Helper()
	info, err := Validate(path, dialect)
	if err == nil {
		t.Fatalf("Validate(%s, %s) = %v, want an error", path, dialect, info)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Validate(%s, %s) error %q lacks %q", path, dialect, err, w)
		}
	}
}

func TestClangProfile(t *testing.T) {
	profdata, rawdir := merged(t)
	info, err := Validate(profdata, "clang")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(profdata)
	want := Info{Kind: "LLVM indexed profile (IR)", Version: "9 (LLVM 16)", Files: 1, Size: st.Size()}
	if info != want {
		t.Errorf("Validate = %+v, want %+v", info, want)
	}
	t.Log(info)

	// A symlink to the profile is followed.
	link := filepath.Join(t.TempDir(), "link.profdata")
	if err := os.Symlink(profdata, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Validate(link, "clang"); err != nil {
		t.Errorf("symlink: %v", err)
	}

	raws := glob(t, rawdir, "*.profraw")
	wantErr(t, raws[0], "clang", "raw LLVM profile (.profraw)", "llvm-profdata merge -o x.profdata *.profraw")
	wantErr(t, rawdir, "clang", "1 raw LLVM profiles", "llvm-profdata merge -o x.profdata "+rawdir)
	wantErr(t, filepath.Dir(profdata), "clang", "pass "+profdata)
	wantErr(t, filepath.Dir(profdata), "gcc", "GCC uses the .gcda directory of a -fprofile-generate run; got an LLVM profile", "build with a clang target")
	wantErr(t, profdata, "gcc", "GCC uses the .gcda directory of a -fprofile-generate run; got an LLVM profile", "build with a clang target")
	wantErr(t, raws[0], "gcc", "got an LLVM profile")

	// Cut short: the header's offsets point past the end, or the header itself is cut.
	data, err := os.ReadFile(profdata)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wantErr(t, write(t, filepath.Join(dir, "half.profdata"), data[:len(data)/2]), "clang", "truncated or corrupt")
	wantErr(t, write(t, filepath.Join(dir, "40.profdata"), data[:40]), "clang", "truncated: 40 bytes", "56-byte header")
	wantErr(t, write(t, filepath.Join(dir, "7.profdata"), data[:7]), "clang", "truncated: 7 bytes")
	wantErr(t, write(t, filepath.Join(dir, "12.profdata"), data[:12]), "clang", "truncated: 12 bytes")

	// The same profile as text, and as every llvm-profdata installed here writes it.
	text := filepath.Join(dir, "prog.proftext")
	mustRun(t, dir, "llvm-profdata-16", "merge", "--text", "-o", text, profdata)
	wantErr(t, text, "clang", "text LLVM profile", "llvm-profdata merge -o x.profdata "+text)
	for llvm := 11; llvm <= 22; llvm++ {
		tool := fmt.Sprintf("llvm-profdata-%d", llvm)
		if _, err := exec.LookPath(tool); err != nil {
			continue
		}
		t.Run(tool, func(t *testing.T) {
			out := filepath.Join(dir, tool+".profdata")
			mustRun(t, dir, tool, "merge", "-o", out, text)
			info, err := Validate(out, "clang")
			if llvm < 15 || llvm > 19 {
				if err == nil || !strings.Contains(err.Error(), "accepted are versions 8-12 (LLVM 15-19)") {
					t.Errorf("LLVM %d's profile: %v, %v; want a version error", llvm, info, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%d (LLVM %d)", llvm-7, llvm); info.Version != want || info.Kind != "LLVM indexed profile (IR)" {
				t.Errorf("LLVM %d's profile: %+v, want version %s", llvm, info, want)
			}
		})
	}
}

func TestClangProfileKinds(t *testing.T) {
	// A front-end (clang -fprofile-instr-generate) profile.
	dir := t.TempDir()
	instrumented(t, dir, "-fprofile-instr-generate")
	mustRun(t, dir, "llvm-profdata-16", "merge", "-o", "fe.profdata", "default.profraw")
	info, err := Validate(filepath.Join(dir, "fe.profdata"), "clang")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "LLVM indexed profile (front-end)" || info.Version != "9 (LLVM 16)" {
		t.Errorf("front-end profile: %+v", info)
	}

	// A context-sensitive profile: a second run built with the first profile.
	first, _ := merged(t)
	cs := t.TempDir()
	instrumented(t, cs, "-fprofile-use="+first, "-fcs-profile-generate="+filepath.Join(cs, "raw"))
	mustRun(t, cs, append([]string{"llvm-profdata-16", "merge", "-o", "cs.profdata", first}, glob(t, filepath.Join(cs, "raw"), "*.profraw")...)...)
	info, err = Validate(filepath.Join(cs, "cs.profdata"), "clang")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "LLVM indexed profile (IR, context-sensitive)" {
		t.Errorf("context-sensitive profile: %+v", info)
	}
}

func TestGCCProfile(t *testing.T) {
	need(t, "gcc")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "main.c"), []byte(mainC))
	write(t, filepath.Join(dir, "f.c"), []byte(fC))
	prof := filepath.Join(dir, "prof")
	mustRun(t, dir, "gcc", "-O1", "-fprofile-generate="+prof, "main.c", "f.c", "-o", "prog")
	mustRun(t, dir, "./prog")
	info, err := Validate(prof, "gcc")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(info)
	gcdas := find(t, prof, ".gcda")
	var size int64
	for _, p := range gcdas {
		st, _ := os.Stat(p)
		size += st.Size()
	}
	major, minor, _ := strings.Cut(strings.TrimSpace(mustRun(t, dir, "gcc", "-dumpfullversion")), ".")
	minor, _, _ = strings.Cut(minor, ".")
	if info.Kind != "GCC .gcda directory" || info.Files != 2 || len(gcdas) != 2 || info.Size != size ||
		!strings.HasSuffix(info.Version, fmt.Sprintf("(GCC %s.%s)", major, minor)) {
		t.Errorf("Validate = %+v; want 2 files, %d bytes, GCC %s.%s", info, size, major, minor)
	}

	wantErr(t, gcdas[0], "gcc", "is a single .gcda file", "pass its directory, "+filepath.Dir(gcdas[0]))
	wantErr(t, gcdas[0], "clang", "GCC profile file (.gcda/.gcno)", "clang -fprofile-use needs an LLVM indexed profile")
	wantErr(t, prof, "clang", "GCC profile directory (2 .gcda files)")

	// Symlinks below the top directory are not followed; at the top they are.
	links := t.TempDir()
	if err := os.Symlink(gcdas[0], filepath.Join(links, "main.gcda")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, links, "gcc", "is empty")
	top := filepath.Join(t.TempDir(), "top")
	if err := os.Symlink(prof, top); err != nil {
		t.Fatal(err)
	}
	if info, err := Validate(top, "gcc"); err != nil || info.Files != 2 {
		t.Errorf("symlinked directory: %+v, %v", info, err)
	}

	// One .gcda of another GCC version.
	data, _ := os.ReadFile(gcdas[0])
	other := append([]byte(nil), data...)
	copy(other[4:], "*19A") // "A91*" as a little-endian word: GCC 9.1
	odir := t.TempDir()
	write(t, filepath.Join(odir, "a.gcda"), data)
	write(t, filepath.Join(odir, "sub", "b.gcda"), other)
	wantErr(t, odir, "gcc", "has version A91* (GCC 9.1) but", "GCC ignores the .gcda files of another version")
}

func find(t *testing.T, dir, ext string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && filepath.Ext(p) == ext {
			found = append(found, p)
		}
		return err
	})
	sort.Strings(found)
	return found
}

// header is an LLVM indexed profile header: magic, version, then the given
// fields.
func header(version uint64, fields ...uint64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, indexedMagic)
	b = binary.LittleEndian.AppendUint64(b, version)
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint64(b, f)
	}
	return b
}

// validV12 is a version-12 header, IR-level, with every offset at byte 72
// of a 80-byte file.
func validV12() []byte {
	return append(header(12|1<<56, 0, 0, 72, 72, 72, 72, 72), make([]byte, 8)...)
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	gcda := binary.LittleEndian.AppendUint32(nil, gcdaMagic)
	gcda = append(gcda, "*22B"...)
	for _, c := range []struct {
		name    string
		data    []byte
		dialect string
		want    []string
	}{
		{"x.txt", []byte("this is not a profile, just text!!\n"), "clang",
			[]string{"x.txt is not an LLVM indexed profile (magic 0x7468697320697320", `expected 0xff6c70726f666981 "\xfflprofi\x81"`, "llvm-profdata merge -o x.profdata *.profraw", `text file starting "this is not a profile, just text!!"`}},
		{"empty.profdata", nil, "clang", []string{"is empty"}},
		{"seven.profdata", header(9)[:7], "clang", []string{"truncated: 7 bytes"}},
		{"raw64.profraw", binary.LittleEndian.AppendUint64(nil, rawMagic64), "clang", []string{"raw LLVM profile (.profraw)", "llvm-profdata merge"}},
		{"raw32.profraw", binary.LittleEndian.AppendUint64(nil, rawMagic32), "clang", []string{"raw LLVM profile (.profraw)"}},
		{"rawbe.profraw", binary.BigEndian.AppendUint64(nil, rawMagic64), "clang", []string{"raw LLVM profile (.profraw)"}},
		{"big.profdata", binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, indexedMagic), 9), "clang", []string{"byte-swapped magic", "big-endian"}},
		{"v7.profdata", header(7|1<<56, 0, 0, 40, 0, 0), "clang", []string{"version 7; accepted are versions 8-12 (LLVM 15-19)", "re-merge"}},
		{"v13.profdata", header(13|1<<56, 0, 0, 80, 0, 0, 0, 0, 0, 0), "clang", []string{"version 13; accepted are versions 8-12"}},
		{"flags.profdata", header(9|1<<40, 0, 0, 56, 0, 56), "clang", []string{"unknown flag bits 0x0000010000000000"}},
		{"short.profdata", header(10|1<<56, 0, 0, 64, 0, 64), "clang", []string{"truncated: 56 bytes", "64-byte header", "version 10"}},
		{"hash.profdata", header(9, 0, 1, 56, 0, 56), "clang", []string{"hash type 1"}},
		{"offset.profdata", header(9, 0, 0, 9999, 0, 56), "clang", []string{"header field 4 points at byte 9999 of a 56-byte file"}},
		{"x.gcda", gcda, "clang", []string{"GCC profile file"}},
		{"sample.afdo", []byte{0x82, 0xe4, 0xd0, 0xb1, 0xf4, 0xc9, 0x94, 0xa8, 0x53, 0x67, 0, 0}, "clang", []string{"sample profile"}},
		{"x.profdata", validV12(), "gcc", []string{"got an LLVM profile"}},
		{"notes", []byte("hello"), "gcc", []string{"is a file, not a directory"}},
		{"any", validV12(), "icc", []string{`unknown compiler dialect "icc" (want clang or gcc)`}},
	} {
		t.Run(c.name+"/"+c.dialect, func(t *testing.T) {
			wantErr(t, write(t, filepath.Join(dir, c.name), c.data), c.dialect, c.want...)
		})
	}
	info, err := Validate(write(t, filepath.Join(dir, "v12.profdata"), validV12()), "clang")
	if want := (Info{Kind: "LLVM indexed profile (IR)", Version: "12 (LLVM 19)", Files: 1, Size: 80}); err != nil || info != want {
		t.Errorf("version 12 header: %+v, %v; want %+v", info, err, want)
	}
	if _, err := Validate(filepath.Join(dir, "missing"), "clang"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := os.Stat(os.DevNull); err == nil {
		wantErr(t, os.DevNull, "clang", "is not a regular file")
		wantErr(t, os.DevNull, "gcc", "is not a directory")
	}
}

func TestBadDirs(t *testing.T) {
	// gcda is the start of a .gcda file of a version such as "B22*".
	gcda := func(version string) []byte {
		return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, gcdaMagic), binary.BigEndian.Uint32([]byte(version)))
	}
	for _, c := range []struct {
		name    string
		files   map[string][]byte
		dialect string
		want    []string
	}{
		{"empty", nil, "gcc", []string{"is empty; GCC uses the .gcda directory of a -fprofile-generate run"}},
		{"txt", map[string][]byte{"a.txt": []byte("x"), "b/c.txt": nil}, "gcc", []string{"has no .gcda files (2 other files, e.g. "}},
		{"llvm", map[string][]byte{"a.profraw": nil, "b.profdata": nil}, "gcc", []string{"got an LLVM profile", "1 .profraw and 1 .profdata"}},
		{"badmagic", map[string][]byte{"a.gcda": []byte("notgcda!")}, "gcc", []string{`not a .gcda file (magic "notg"; expected "adcg")`}},
		{"bigendian", map[string][]byte{"a.gcda": []byte("gcdaB22*")}, "gcc", []string{"big-endian .gcda"}},
		{"short", map[string][]byte{"a.gcda": []byte("adcg")}, "gcc", []string{"truncated: 4 bytes"}},
		{"mixed", map[string][]byte{"a.gcda": gcda("B22*"), "b.gcda": gcda("B32*")}, "gcc", []string{"B32* (GCC 13.2)", "B22* (GCC 12.2)"}},
		{"empty", nil, "clang", []string{"is a directory (0 files, 0 .profdata)"}},
		{"txt", map[string][]byte{"a.txt": nil}, "clang", []string{"is a directory (1 files"}},
	} {
		t.Run(c.name+"/"+c.dialect, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range c.files {
				write(t, filepath.Join(dir, name), data)
			}
			wantErr(t, dir, c.dialect, c.want...)
		})
	}

	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.gcda"), gcda("B22*"))
	write(t, filepath.Join(dir, "x", "y", "b.gcda"), append(gcda("B22*"), make([]byte, 8)...))
	info, err := Validate(dir, "gcc")
	if want := (Info{Kind: "GCC .gcda directory", Version: "B22* (GCC 12.2)", Files: 2, Size: 24}); err != nil || info != want {
		t.Errorf("Validate = %+v, %v; want %+v", info, err, want)
	}
	if got := info.String(); got != "GCC .gcda directory, version B22* (GCC 12.2), 2 files, 24 bytes" {
		t.Errorf("String = %q", got)
	}
	defer func(n int) { maxEntries = n }(maxEntries)
	maxEntries = 3
	wantErr(t, dir, "gcc", "has more than 3 entries")
}

func TestGCCVersion(t *testing.T) {
	for word, want := range map[string]string{"B22*": "B22* (GCC 12.2)", "A91*": "A91* (GCC 9.1)", "C01e": "C01e (GCC 20.1)", "408*": `"408*"`, "\x00\x01ab": `"\x00\x01ab"`} {
		if got := gccVersion(binary.BigEndian.Uint32([]byte(word))); got != want {
			t.Errorf("gccVersion(%q) = %s, want %s", word, got, want)
		}
	}
}

func FuzzValidate(f *testing.F) {
	f.Add([]byte(nil))
	f.Add(validV12())
	f.Add(header(9|1<<56, 0, 0, 56, 0, 56))
	f.Add(header(8, 0, 0, 48, 0))
	f.Add(binary.LittleEndian.AppendUint64(nil, rawMagic64))
	f.Add([]byte("adcg*22B\x00\x00\x00\x00"))
	f.Add([]byte("# IR level Instrumentation Flag\n:ir\nmain\n# Func Hash:\n"))
	f.Add([]byte{0x82, 0xe4, 0xd0, 0xb1, 0xf4, 0xc9, 0x94, 0xa8, 0x53, 0x67})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		file := write(t, filepath.Join(dir, "p", "x.gcda"), data)
		for _, c := range [][2]string{{file, "clang"}, {file, "gcc"}, {filepath.Dir(file), "gcc"}, {filepath.Dir(file), "clang"}} {
			info, err := Validate(c[0], c[1])
			if err == nil && (info.Files < 1 || info.Kind == "" || info.Version == "") {
				t.Errorf("Validate(%s, %s) = %+v with no error", c[0], c[1], info)
			}
			if err != nil && err.Error() == "" {
				t.Errorf("empty error")
			}
		}
	})
}
