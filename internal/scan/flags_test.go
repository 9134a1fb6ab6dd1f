package scan

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/flagrec"
)

// Kunpeng 920's flags as dorisarm's wrapper passes them, and what Doris
// 2.1's be/CMakeLists.txt adds after them.
var (
	kunpengFlags = []string{"-march=armv8.2-a+crypto+fp16+dotprod+fp16fml", "-mtune=tsv110"}
	dorisARM     = "-march=armv8-a+crc"
)

func fileFlags(t *testing.T, r *Report, suffix string) *FileFlags {
	t.Helper()
	for _, f := range r.Files {
		if strings.HasSuffix(f.Path, suffix) {
			if f.Flags == nil {
				t.Fatalf("%s: no flag read-back", f.Path)
			}
			return f.Flags
		}
	}
	t.Fatalf("%s not in the report: %+v", suffix, r.Files)
	return nil
}

func flagFinding(r *Report, kind, suffix string) *Finding {
	for i, f := range r.Findings {
		if f.Kind == kind && strings.HasSuffix(f.Path, suffix) {
			return &r.Findings[i]
		}
	}
	return nil
}

// Real objects from both compilers: the target's flags, the same with
// Doris's -march last, SVE on Kunpeng, and a record read back by readelf
// equal to the one dorisarm parsed.
func TestFlagReadBackRealObjects(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc", "clang-16", "aarch64-linux-gnu-ar", "readelf")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.c"), cFunc)
	gcc := func(out string, flags ...string) {
		run(t, dir, append(append([]string{"aarch64-linux-gnu-gcc", "-O2", "-c", "-frecord-gcc-switches"}, flags...), "a.c", "-o", out)...)
	}
	clang := func(out string, flags ...string) {
		run(t, dir, append(append([]string{"clang-16", "--target=aarch64-linux-gnu", "-O2", "-c", "-frecord-command-line"}, flags...), "a.c", "-o", out)...)
	}
	gcc("gcc_target.o", kunpengFlags...)
	gcc("gcc_doris.o", append(kunpengFlags, dorisARM)...)
	gcc("gcc_sve.o", "-march=armv8.2-a+crypto+fp16+dotprod+fp16fml+sve")
	clang("clang_target.o", kunpengFlags...)
	clang("clang_doris.o", append(kunpengFlags, dorisARM)...)
	clang("clang_mcpu.o", "-mcpu=tsv110")
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", "-c", "a.c", "-o", "bare.o")
	write(t, filepath.Join(dir, "asm.S"), ".text\n.globl f\nf:\n\tret\n")
	run(t, dir, "aarch64-linux-gnu-gcc", "-c", "asm.S", "-o", "asm.o")
	run(t, dir, "aarch64-linux-gnu-ar", "rcs", "libmix.a", "gcc_target.o", "clang_doris.o", "asm.o")

	in := filepath.Join(dir, "in")
	os.MkdirAll(in, 0o755)
	for _, o := range []string{"gcc_target.o", "gcc_doris.o", "gcc_sve.o", "clang_target.o", "clang_doris.o", "clang_mcpu.o", "bare.o", "libmix.a"} {
		b, _ := os.ReadFile(filepath.Join(dir, o))
		os.WriteFile(filepath.Join(in, o), b, 0o644)
	}
	r := scan(t, policy(t, "kunpeng920"), in)
	for suffix, want := range map[string]string{
		"gcc_target.o":            flagrec.AtTarget,
		"clang_target.o":          flagrec.AtTarget,
		"clang_mcpu.o":            flagrec.AtTarget,
		"gcc_doris.o":             flagrec.Lost,
		"clang_doris.o":           flagrec.Lost,
		"gcc_sve.o":               flagrec.Beyond,
		"bare.o":                  flagrec.Unrecorded,
		"libmix.a(gcc_target.o)":  flagrec.AtTarget,
		"libmix.a(clang_doris.o)": flagrec.Lost,
		"libmix.a(asm.o)":         assembly,
	} {
		if got := fileFlags(t, r, suffix); got.Verdict != want {
			t.Errorf("%s: %s (%s: %s), want %s", suffix, got.Verdict, got.Flags, got.Detail, want)
		}
	}
	if f := flagFinding(r, KindFlagsBeyond, "gcc_sve.o"); f == nil || !f.Violation() || !strings.Contains(f.Detail, "sve") {
		t.Errorf("SVE on Kunpeng is an error naming sve: %+v", f)
	}
	for _, p := range []string{"gcc_doris.o", "clang_doris.o", "libmix.a(clang_doris.o)"} {
		f := flagFinding(r, KindLostTuning, p)
		if f == nil || f.Severity != SevWarning || f.Violation() || !strings.Contains(f.Detail, "-march=armv8-a+crc") {
			t.Errorf("%s: lost tuning is a warning naming the -march that won: %+v", p, f)
		}
	}
	if f := flagFinding(r, KindUnrecorded, "bare.o"); f == nil || f.Severity != SevWarning {
		t.Errorf("bare.o: unrecorded warning: %+v", f)
	}
	if f := flagFinding(r, KindUnrecorded, "(asm.o)"); f != nil {
		t.Errorf("hand-written assembly is not unrecorded: %+v", f)
	}
	s := r.Summary
	if s.Violations != 1 || s.Flags == nil || s.Flags.Objects != 10 || s.Flags.Verdicts[flagrec.Lost] != 3 || s.Warned[KindLostTuning] != 3 {
		t.Errorf("summary: %+v flags %+v", s, s.Flags)
	}
	// 4 of the 9 compiled objects are at the target's flags.
	if s.Flags.AtTarget < 0.44 || s.Flags.AtTarget > 0.45 {
		t.Errorf("at target %.3f, want 4/9", s.Flags.AtTarget)
	}

	// The oracle: readelf prints the record dorisarm judged.
	out, err := exec.Command("readelf", "-p", ".GCC.command.line", filepath.Join(dir, "clang_doris.o")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-mtune=tsv110 "+dorisARM) {
		t.Errorf("readelf: %v\n%s", err, out)
	}

	// --require-target-flags: lost tuning and unrecorded fail the scan;
	// an allow entry waives lost tuning for a path, with its reason.
	allow := filepath.Join(dir, "allow.yaml")
	write(t, allow, "exceptions:\n  - {path: \"**\", kind: lost-tuning, reason: runtime-dispatched variants}\n")
	exc, err := LoadAllow(allow)
	if err != nil {
		t.Fatal(err)
	}
	req, err := Scan(context.Background(), []string{in}, policy(t, "kunpeng920"), Options{RequireTargetFlags: true})
	if err != nil {
		t.Fatal(err)
	}
	if req.Summary.ByKind[KindLostTuning] != 3 || req.Summary.ByKind[KindUnrecorded] != 1 || req.Summary.Clean {
		t.Errorf("required: %+v", req.Summary)
	}
	waived, _ := Scan(context.Background(), []string{in}, policy(t, "kunpeng920"), Options{RequireTargetFlags: true, Allow: exc})
	if waived.Summary.ByKind[KindLostTuning] != 0 || waived.Summary.AllowedByKind[KindLostTuning] != 3 {
		t.Errorf("waived: %+v", waived.Summary)
	}

	// The same SVE object is at the target on Graviton3; the Kunpeng objects are lost tuning there.
	g := scan(t, policy(t, "graviton3"), in)
	if v := fileFlags(t, g, "gcc_sve.o").Verdict; v != flagrec.Lost {
		t.Errorf("gcc_sve.o on graviton3: %s, want lost (no i8mm, bf16 …)", v)
	}
	if fileFlags(t, g, "gcc_target.o").Verdict != flagrec.Lost {
		t.Errorf("a Kunpeng object on Graviton3 is lost tuning")
	}
}

// GCC writes its switches into DW_AT_producer with -g: a stripped-of-record
// object still tells; and a linked library holds every object's record.
func TestFlagReadBackProducerAndLinked(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.c"), cFunc)
	write(t, filepath.Join(dir, "b.c"), "int other(int x) { return x - 1; }\n")
	run(t, dir, append(append([]string{"aarch64-linux-gnu-gcc", "-O2", "-g", "-c"}, kunpengFlags...), dorisARM, "a.c", "-o", "dbg.o")...)
	run(t, dir, append(append([]string{"aarch64-linux-gnu-gcc", "-O2", "-fPIC", "-frecord-gcc-switches", "-c"}, kunpengFlags...), "a.c", "-o", "a.o")...)
	run(t, dir, append(append([]string{"aarch64-linux-gnu-gcc", "-O2", "-fPIC", "-frecord-gcc-switches", "-c"}, kunpengFlags...), dorisARM, "b.c", "-o", "b.o")...)
	run(t, dir, "aarch64-linux-gnu-gcc", "-shared", "a.o", "b.o", "-o", "libab.so")
	r := scan(t, policy(t, "kunpeng920"), filepath.Join(dir, "dbg.o"), filepath.Join(dir, "libab.so"))
	if ff := fileFlags(t, r, "dbg.o"); ff.Source != sourceProducer || ff.Verdict != flagrec.Lost {
		t.Errorf("dbg.o: %+v", ff)
	}
	ff := fileFlags(t, r, "libab.so")
	if ff.Source != sourceSection || ff.Records != 2 || ff.Verdict != flagrec.Lost || ff.Verdicts[flagrec.AtTarget] != 1 {
		t.Errorf("libab.so: %+v", ff)
	}
	if f := flagFinding(r, KindLostTuning, "libab.so"); f == nil || !strings.Contains(f.Detail, "1 of its 2") {
		t.Errorf("linked lost tuning says how many records: %+v", f)
	}
}

// Without a policy nothing is judged; in a jar, a library's flags are its
// project's business.
func TestFlagReadBackScope(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc")
	so := compile(t, "j.c", cFunc, "libj.so", "aarch64-linux-gnu-gcc", "-shared", "-fPIC", "-O2")
	dir := t.TempDir()
	makeJar(t, filepath.Join(dir, "x.jar"), map[string][]byte{"lib/linux-aarch64/libj.so": so})
	r := scan(t, policy(t, "kunpeng920"), dir)
	for _, f := range r.Findings {
		if isFlagKind(f.Kind) {
			t.Errorf("flag finding in a jar: %+v", f)
		}
	}
	os.WriteFile(filepath.Join(dir, "libj.so"), so, 0o644)
	r = scan(t, nil, filepath.Join(dir, "libj.so"))
	if len(r.Findings) != 0 || r.Files[0].Flags != nil || r.Summary.Flags != nil {
		t.Errorf("no policy: %+v %+v", r.Findings, r.Files)
	}
}

// ThinLTO objects are bitcode: their command line is read from the
// module's metadata strings, in an archive too; the linked output carries
// every module's record in .GCC.command.line.
func TestFlagReadBackBitcode(t *testing.T) {
	need(t, "clang-16", "llvm-ar-16")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.c"), cFunc)
	base := []string{"clang-16", "--target=aarch64-linux-gnu", "-O2", "-c", "-flto=thin", "-frecord-command-line", "-g"}
	run(t, dir, append(append(append([]string{}, base...), kunpengFlags...), "a.c", "-o", "target.o")...)
	run(t, dir, append(append(append([]string{}, base...), kunpengFlags...), dorisARM, "a.c", "-o", "doris.o")...)
	run(t, dir, "clang-16", "--target=aarch64-linux-gnu", "-O2", "-c", "-flto=thin", "a.c", "-o", "bare.o")
	run(t, dir, "llvm-ar-16", "rcs", "liblto.a", "target.o", "doris.o", "bare.o")
	r := scan(t, policy(t, "kunpeng920"), filepath.Join(dir, "liblto.a"))
	if f := flagFinding(r, KindLostTuning, "liblto.a(doris.o)"); f == nil || !strings.Contains(f.Detail, "lto thin") || !strings.Contains(f.Detail, "-march=armv8-a+crc") {
		t.Errorf("bitcode lost tuning: %+v", r.Findings)
	}
	if f := flagFinding(r, KindUnrecorded, "liblto.a(bare.o)"); f == nil {
		t.Errorf("bitcode without a record: %+v", r.Findings)
	}
	for _, f := range r.Findings {
		if strings.HasSuffix(f.Path, "(target.o)") && isFlagKind(f.Kind) {
			t.Errorf("bitcode at the target's flags: %+v", f)
		}
	}
	// Damaged bitcode: no record read, no panic.
	b, _ := os.ReadFile(filepath.Join(dir, "doris.o"))
	for _, cut := range []int{40, len(b) / 2, len(b) - 3} {
		if strs, ok := bitcodeStrings(b[:cut]); ok && len(strs) > 0 {
			for _, s := range strs {
				if strings.Contains(s, "-march=armv8-a+crc") {
					t.Errorf("cut at %d of %d: a whole command line read from a truncated module", cut, len(b))
				}
			}
		}
	}
}

// The adversarial probe's evasions (issue 45), on real objects from both
// compilers, each judged for kunpeng920:
//   - what clang passes on to cc1 (-Xclang -target-feature/-target-cpu);
//   - an -mcpu the matrix lacks (a64fx has SVE);
//   - a .GCC.command.line replaced by a clean one, while DW_AT_producer
//     still records SVE: in an object (relocated by debug/elf) and in a
//     linked library (read in place), from GCC and from clang (DWARF 5);
//   - the assembler's -march, which is not the compiler's.
func TestFlagReadBackEvasions(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a dozen objects; not in -short")
	}
	need(t, "aarch64-linux-gnu-gcc", "clang-16", "aarch64-linux-gnu-objcopy")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.c"), "int sum(const int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i] * 3; return s; }\n")
	write(t, filepath.Join(dir, "sve.S"), ".text\n.globl vl\nvl:\n\tcntb x0\n\tret\n")
	gcc := func(out string, flags ...string) {
		run(t, dir, append(append([]string{"aarch64-linux-gnu-gcc", "-O2", "-c", "-frecord-gcc-switches"}, flags...), "a.c", "-o", out)...)
	}
	clang := func(src, out string, flags ...string) {
		run(t, dir, append(append([]string{"clang-16", "--target=aarch64-linux-gnu", "-O2", "-c", "-frecord-command-line"}, flags...), src, "-o", out)...)
	}
	sve := kunpengFlags[0] + "+sve"
	clang("a.c", "xclang_sve.o", append(kunpengFlags, "-Xclang", "-target-feature", "-Xclang", "+sve")...)
	clang("a.c", "xclang_cpu.o", append(kunpengFlags, "-Xclang=-target-cpu", "-Xclang=neoverse-v1")...)
	gcc("gcc_a64fx.o", "-mcpu=a64fx")
	clang("a.c", "clang_a64fx.o", "-mcpu=a64fx")
	gcc("gcc_hidden.o", "-g", sve)
	clang("a.c", "clang_hidden.o", "-g", "-grecord-command-line", sve)
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", "-g", "-fPIC", "-shared", "-frecord-gcc-switches", sve, "a.c", "-o", "libhidden.so")
	clang("a.c", "clang_pic.o", "-g", "-grecord-command-line", "-fPIC", sve)
	run(t, dir, "aarch64-linux-gnu-gcc", "-shared", "clang_pic.o", "-o", "libclanghidden.so")
	clang("a.c", "asm_march.o", append(kunpengFlags, "-Xassembler", "-march=armv9-a+sve2")...)
	clang("sve.S", "asm_sve.o", append(kunpengFlags, "-Wa,-march=armv8.2-a+sve")...)

	// The clean records, as each compiler writes them for the target's flags.
	write(t, filepath.Join(dir, "gcc.rec"), "GNU C17 12.2.0 -mtune=tsv110 -march=armv8.2-a+crypto+fp16+dotprod+fp16fml -mlittle-endian -mabi=lp64 -O2\x00")
	write(t, filepath.Join(dir, "clang.rec"), "/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line "+strings.Join(kunpengFlags, " ")+" a.c -o a.o\x00")
	for f, rec := range map[string]string{"gcc_hidden.o": "gcc.rec", "libhidden.so": "gcc.rec", "clang_hidden.o": "clang.rec", "libclanghidden.so": "clang.rec"} {
		run(t, dir, "aarch64-linux-gnu-objcopy", "--update-section", ".GCC.command.line="+rec, f)
	}

	r := scan(t, policy(t, "kunpeng920"), dir)
	for suffix, want := range map[string]string{
		"xclang_sve.o": "sve", "xclang_cpu.o": "bf16", "gcc_a64fx.o": "sve", "clang_a64fx.o": "sve",
		"gcc_hidden.o": "sve", "clang_hidden.o": "sve", "libhidden.so": "sve", "libclanghidden.so": "sve",
	} {
		ff := fileFlags(t, r, suffix)
		if f := flagFinding(r, KindFlagsBeyond, suffix); ff.Verdict != flagrec.Beyond || f == nil || !strings.Contains(f.Detail, want) {
			t.Errorf("%s: %s (%s: %s), want beyond naming %s", suffix, ff.Verdict, ff.Flags, ff.Detail, want)
		}
	}
	// A linked library's DWARF is read in place, DWARF 5's indexed strings
	// and addresses included (no size bound: nothing is copied); an
	// object's unit entries are relocated without debug/elf.
	for _, so := range []string{"libhidden.so", "libclanghidden.so", "gcc_hidden.o", "clang_hidden.o"} {
		data, err := os.ReadFile(filepath.Join(dir, so))
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if secs, ok := unitSectionBytes(f, data); !ok || newUnitDWARF(secs) == nil || len(producers(f, data)) != 1 {
			t.Errorf("%s: DWARF not read in place: %v", so, producers(f, data))
		}
	}
	for _, suffix := range []string{"gcc_hidden.o", "clang_hidden.o", "libhidden.so", "libclanghidden.so"} {
		if ff := fileFlags(t, r, suffix); ff.Source != sourceSection+", "+sourceProducer || ff.Records != 2 || ff.Verdicts[flagrec.AtTarget] != 1 {
			t.Errorf("%s: both places, two records, the section's at the target: %+v", suffix, ff)
		}
	}
	// The assembler's -march: the compiler's code is at the target's flags
	// (noted); the assembly source's own SVE instruction is the ISA check's.
	if ff := fileFlags(t, r, "asm_march.o"); ff.Verdict != flagrec.AtTarget || !strings.Contains(ff.Detail, "note: the assembler was given -march=armv9-a+sve2") {
		t.Errorf("asm_march.o: %+v", ff)
	}
	// clang records no command line for an assembly source.
	if ff := fileFlags(t, r, "asm_sve.o"); ff.Verdict != assembly {
		t.Errorf("asm_sve.o flags: %+v", ff)
	}
	if !hasViolation(r, KindISA, "asm_sve.o") {
		t.Errorf("asm_sve.o: the SVE instruction assembled under -Wa,-march=+sve is not an ISA violation: %+v", r.Findings)
	}
}
