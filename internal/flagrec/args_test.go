package flagrec

import (
	"strings"
	"testing"
)

// kpMarch is kunpeng920's -march as dorisarm's wrapper passes it.
const kpMarch = "-march=armv8.2-a+crypto+fp16+dotprod+fp16fml"

// The values of assembler, linker and LLVM options, and of options that
// take the next argument, are not the compiler's flags. The records are
// clang-16's, read back with readelf -p .GCC.command.line from objects it
// compiled (GCC records none of these: its driver keeps them from cc1).
func TestOptionValuesAreNotCompilerFlags(t *testing.T) {
	e := expect(t, load(t), "kunpeng920")
	cases := []struct {
		name, rec, verdict string
		march              string   // the -march that won
		detail             []string // in the detail, in any order
		noDetail           bool
	}{
		{name: "Xassembler -march above the CPU: noted, the compiler's -march stands",
			rec:     "/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line " + kpMarch + " -Xassembler -march=armv9-a+sve2 a.c -o r.o",
			verdict: AtTarget, march: "armv8.2-a+crypto+fp16+dotprod+fp16fml", detail: []string{"note:", "-march=armv9-a+sve2", "sve2", "assembly sources only"}},
		{name: "Wa, with two assembler options",
			rec:     "/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line " + kpMarch + " -Wa,-march=armv8.2-a+sve,-mcpu=neoverse-v1 a.c -o r.o",
			verdict: AtTarget, march: "armv8.2-a+crypto+fp16+dotprod+fp16fml", detail: []string{"-march=armv8.2-a+sve", "-mcpu=neoverse-v1", "bf16"}},
		{name: "Xlinker and Wl, values",
			rec:     "/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line " + kpMarch + " -Xlinker -march=armv9-a -Wl,-mcpu=neoverse-v1 a.c -o r.o",
			verdict: AtTarget, march: "armv8.2-a+crypto+fp16+dotprod+fp16fml", noDetail: true},
		{name: "mllvm pair",
			rec:     "/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line " + kpMarch + " -mllvm -aarch64-sve-vector-bits-min=128 a.c -o r.o",
			verdict: AtTarget, march: "armv8.2-a+crypto+fp16+dotprod+fp16fml", noDetail: true},
		{name: "an output file named like the target's -march hides nothing",
			rec:     "/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line -march=armv9-a+sve -o " + kpMarch + " a.c",
			verdict: Beyond, march: "armv9-a+sve", detail: []string{"sve"}},
		{name: "an assembler -march within the CPU is not noted",
			rec:     "/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line " + kpMarch + " -Wa,-march=armv8.2-a+crypto a.c -o r.o",
			verdict: AtTarget, march: "armv8.2-a+crypto+fp16+dotprod+fp16fml", noDetail: true},
		{name: "the assembler's target flags do not hide the compiler's lost tuning",
			rec:     "/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line -march=armv8-a+crc -Xassembler " + kpMarch + " a.c -o r.o",
			verdict: Lost, march: "armv8-a+crc", detail: []string{"lacks"}},
	}
	for _, c := range cases {
		r, ok := Parse(c.rec)
		if !ok {
			t.Fatalf("%s: not parsed", c.name)
		}
		res := e.Resolve(r)
		v, d := e.Judge(res)
		if v != c.verdict || res.March != c.march {
			t.Errorf("%s: %s with -march=%s (%s), want %s with -march=%s", c.name, v, res.March, d, c.verdict, c.march)
		}
		for _, w := range c.detail {
			if !strings.Contains(d, w) {
				t.Errorf("%s: detail %q lacks %q", c.name, d, w)
			}
		}
		if c.noDetail && d != "" {
			t.Errorf("%s: detail %q, want none", c.name, d)
		}
	}
}

// A record's digest is its dialect and arguments: the same compile read
// from an object and from what it was linked into has one digest; another
// dialect, argument or split of the same text has another.
func TestRecordDigest(t *testing.T) {
	a, _ := Parse("GNU C17 12.2.0 -march=armv8-a+crc -mlittle-endian -mabi=lp64 -g -O2")
	b, _ := Parse("GNU C++17 12.2.0 -march=armv8-a+crc -mlittle-endian -mabi=lp64 -g -O2")
	if a.Digest() != b.Digest() || len(a.Digest()) != 64 {
		t.Errorf("the same switches: %s %s", a.Digest(), b.Digest())
	}
	for _, other := range []Record{
		{Dialect: "clang", Args: a.Args},
		{Dialect: "gcc", Args: append(append([]string{}, a.Args...), "-fPIC")},
		{Dialect: "gcc", Args: []string{"-march=armv8-a+crc -mlittle-endian", "-mabi=lp64", "-g", "-O2"}},
	} {
		if other.Digest() == a.Digest() {
			t.Errorf("%+v has the digest of %+v", other, a)
		}
	}
}
