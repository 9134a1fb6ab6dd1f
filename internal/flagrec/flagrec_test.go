package flagrec

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
)

func load(t *testing.T) *matrix.Matrix {
	t.Helper()
	m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func expect(t *testing.T, m *matrix.Matrix, target string) *Expect {
	t.Helper()
	c, err := m.Platform(target)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ExpectFor(m, c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestParseForms(t *testing.T) {
	cases := []struct {
		in      string
		ok      bool
		dialect string
		args    []string
	}{
		{"GNU C17 12.2.0 -mtune=tsv110 -march=armv8-a+crc -mlittle-endian -O2", true, "gcc", []string{"-mtune=tsv110", "-march=armv8-a+crc", "-mlittle-endian", "-O2"}},
		{"GNU C++17 10.2.1 20210110 -march=armv8.2-a", true, "gcc", []string{"20210110", "-march=armv8.2-a"}},
		{"/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -c -march=armv8.2-a a.c -o c.o", true, "clang", []string{"--target=aarch64-linux-gnu", "-c", "-march=armv8.2-a", "a.c", "-o", "c.o"}},
		{`/usr/bin/clang++ -I/my\ dir -c x.cc`, true, "clang", []string{"-I/my dir", "-c", "x.cc"}},
		{"Debian clang version 16.0.6 (15~deb12u1)", false, "", nil},
		// clang's DW_AT_producer with -grecord-command-line (clang-16, read
		// back with llvm-dwarfdump-16), and the shape upstream builds write.
		{"Debian clang version 16.0.6 (15~deb12u1) /usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -g -grecord-command-line -march=armv8.2-a -Xclang -target-feature -Xclang +sve a.c -o x4.o", true, "clang",
			[]string{"--target=aarch64-linux-gnu", "-O2", "-c", "-g", "-grecord-command-line", "-march=armv8.2-a", "-Xclang", "-target-feature", "-Xclang", "+sve", "a.c", "-o", "x4.o"}},
		{"clang version 17.0.0 (https://github.com/llvm/llvm-project.git 4ba6a9c9f65bbc8bd06e3652cb20fd4dfc846137) /opt/llvm/bin/clang -c -march=armv8-a a.c", true, "clang", []string{"-c", "-march=armv8-a", "a.c"}},
		{"Debian clang version 16.0.6 (15~deb12u1) not a command line", false, "", nil},
		{"clang version 16.0.6 (unterminated /usr/bin/clang -c a.c", false, "", nil},
		{"GNU C17 12.2.0", false, "", nil},
		{"GCC: (Debian 12.2.0-14) 12.2.0", false, "", nil},
		{"", false, "", nil},
	}
	for _, c := range cases {
		r, ok := Parse(c.in)
		if ok != c.ok || r.Dialect != c.dialect || !slices.Equal(r.Args, c.args) {
			t.Errorf("Parse(%q) = %+v, %v; want %s %q, %v", c.in, r, ok, c.dialect, c.args, c.ok)
		}
	}
}

func TestSplitJoinsBareSwitches(t *testing.T) {
	recs := Split([]string{"-march=armv8.2-a", "-mtune=tsv110", "-O2", "GNU C17 12.2.0 -march=armv8-a", "", "not a record"})
	if len(recs) != 2 {
		t.Fatalf("got %d records, want 2: %+v", len(recs), recs)
	}
	if !slices.Equal(recs[0].Args, []string{"-march=armv8.2-a", "-mtune=tsv110", "-O2"}) {
		t.Errorf("joined switches: %q", recs[0].Args)
	}
}

// The last -march wins, for both drivers: Doris's be/CMakeLists.txt adds
// -march=armv8-a+crc after the wrapper's target flags.
func TestLastMarchWins(t *testing.T) {
	m := load(t)
	e := expect(t, m, "kunpeng920")
	for _, rec := range []string{
		"/usr/lib/llvm-16/bin/clang++ --target=aarch64-linux-gnu -march=armv8.2-a+crypto+fp16+dotprod+fp16fml -mtune=tsv110 -O3 -march=armv8-a+crc -c x.cc",
		"GNU C++17 12.2.0 -mtune=tsv110 -march=armv8-a+crc -mlittle-endian -mabi=lp64 -O3",
	} {
		r, _ := Parse(rec)
		res := e.Resolve(r)
		if res.March != "armv8-a+crc" || res.Level != "armv8-a" || res.Mtune != "tsv110" {
			t.Errorf("%s: resolved %+v", r.Dialect, res)
		}
		if slices.Contains(res.Features, "lse") || !slices.Contains(res.Features, "crc") {
			t.Errorf("%s: features %v", r.Dialect, res.Features)
		}
		if res.Atomics != "outline" {
			t.Errorf("%s: atomics %q, want outline (no LSE at armv8-a)", r.Dialect, res.Atomics)
		}
		v, d := e.Judge(res)
		if v != Lost || !strings.Contains(d, "lse") || !strings.Contains(d, "dotprod") {
			t.Errorf("%s: verdict %s (%s), want lost naming lse and dotprod", r.Dialect, v, d)
		}
	}
	// Swapped: the target's flags last win.
	r, _ := Parse("/usr/bin/clang -march=armv8-a+crc -march=armv8.2-a+crypto+fp16+dotprod+fp16fml -c x.c")
	if v, d := e.Judge(e.Resolve(r)); v != AtTarget {
		t.Errorf("target flags last: %s (%s)", v, d)
	}
}

func TestMcpuImpliesArchitecture(t *testing.T) {
	m := load(t)
	e := expect(t, m, "kunpeng920")
	r, _ := Parse("GNU C17 12.2.0 -mcpu=tsv110 -mlittle-endian -O2")
	res := e.Resolve(r)
	if res.Level != "armv8.2-a" || res.Mtune != "tsv110" || res.Atomics != "lse" {
		t.Errorf("-mcpu=tsv110: %+v", res)
	}
	if v, d := e.Judge(res); v != AtTarget {
		t.Errorf("-mcpu=tsv110 on kunpeng920: %s (%s)", v, d)
	}
	// GCC: -march given with -mcpu takes the architecture from -march.
	r, _ = Parse("GNU C17 12.2.0 -mcpu=tsv110 -march=armv8-a+crc -O2")
	if res := e.Resolve(r); res.Level != "armv8-a" || slices.Contains(res.Features, "dotprod") {
		t.Errorf("gcc -mcpu with -march: %+v", res)
	}
	// Clang: the CPU still adds its extensions to -march's.
	r, _ = Parse("/usr/bin/clang -mcpu=tsv110 -march=armv8-a+crc -c x.c")
	if res := e.Resolve(r); !slices.Contains(res.Features, "dotprod") {
		t.Errorf("clang -mcpu with -march lost the CPU's extensions: %+v", res)
	}
	// Modifiers on -mcpu apply.
	r, _ = Parse("GNU C17 12.2.0 -mcpu=neoverse-v1+nosve")
	if res := e.Resolve(r); slices.Contains(res.Features, "sve") || res.Level != "armv8.4-a" {
		t.Errorf("-mcpu=neoverse-v1+nosve: %+v", res)
	}
}

func TestBeyondTheCPU(t *testing.T) {
	m := load(t)
	e := expect(t, m, "kunpeng920")
	for rec, want := range map[string]string{
		"GNU C17 12.2.0 -march=armv8.2-a+crypto+fp16+dotprod+fp16fml+sve":  "sve",
		"/usr/bin/clang -march=armv8.4-a -c x.c":                           "rcpc",
		"/usr/bin/clang -mcpu=neoverse-v1 -c x.c":                          "bf16",
		"GNU C17 12.2.0 -march=armv8.2-a+crypto+fp16+dotprod+fp16fml+rcpc": "rcpc",
	} {
		r, _ := Parse(rec)
		v, d := e.Judge(e.Resolve(r))
		if v != Beyond || !strings.Contains(d, want) {
			t.Errorf("%s: %s (%s), want beyond naming %s", rec, v, d, want)
		}
	}
	// The same SVE object is fine on Graviton3.
	g3 := expect(t, m, "graviton3")
	r, _ := Parse("GNU C17 12.2.0 -march=armv8.4-a+sve+i8mm+bf16+rng+fp16+fp16fml+crypto")
	if v, d := g3.Judge(g3.Resolve(r)); v != AtTarget {
		t.Errorf("graviton3 flags on graviton3: %s (%s)", v, d)
	}
	// Taking SVE away from a Graviton3 object is lost tuning there.
	r, _ = Parse("GNU C17 12.2.0 -march=armv8.4-a+sve+i8mm+bf16+rng+fp16+fp16fml+crypto+nosve")
	if v, d := g3.Judge(g3.Resolve(r)); v != Lost || !strings.Contains(d, "sve") {
		t.Errorf("+nosve on graviton3: %s (%s)", v, d)
	}
}

func TestUnresolved(t *testing.T) {
	m := load(t)
	e := expect(t, m, "kunpeng920")
	for _, rec := range []string{
		"GNU C17 12.2.0 -mcpu=cortex-x9",
		"/usr/bin/clang -march=native -c x.c",
		"/usr/bin/clang -march=armv8.2-a+warp -c x.c",
		"/usr/bin/clang -march=x86-64-v3 -c x.c",
	} {
		r, _ := Parse(rec)
		if v, d := e.Judge(e.Resolve(r)); v != Unresolved || d == "" {
			t.Errorf("%s: %s (%s), want unresolved with a reason", rec, v, d)
		}
	}
}

// Where levels name no extensions (x86-64 in matrix.yaml), the level decides.
func TestLevelsWithoutExtensions(t *testing.T) {
	m := load(t)
	e := expect(t, m, "x86_64")
	for rec, want := range map[string]string{
		"GNU C17 12.2.0 -march=x86-64-v2 -O2":  AtTarget,
		"GNU C17 12.2.0 -march=x86-64-v3 -O2":  Beyond,
		"GNU C17 12.2.0 -march=x86-64 -O2":     Lost,
		"GNU C17 12.2.0 -O2":                   Lost,
		"/usr/bin/clang -march=x86-64-v2 -c x": AtTarget,
	} {
		r, _ := Parse(rec)
		if v, d := e.Judge(e.Resolve(r)); v != want {
			t.Errorf("%s: %s (%s), want %s", rec, v, d, want)
		}
	}
}

func TestLTOAndPGO(t *testing.T) {
	m := load(t)
	e := expect(t, m, "kunpeng920")
	r, _ := Parse("/usr/bin/clang -flto=thin -fprofile-use=/p/x.profdata -mno-outline-atomics -march=armv8-a -c x.c")
	res := e.Resolve(r)
	if res.LTO != "thin" || res.PGO != "use" || res.Atomics != "llsc" {
		t.Errorf("resolved %+v", res)
	}
	r, _ = Parse("GNU C17 12.2.0 -flto=auto -fno-lto -fprofile-generate")
	res = e.Resolve(r)
	if res.LTO != "" || res.PGO != "generate" {
		t.Errorf("-fno-lto last: %+v", res)
	}
	if got := res.Describe(); !strings.Contains(got, "default armv8-a") {
		t.Errorf("Describe: %q", got)
	}
}

// BenchmarkJudgeBERecords resolves and judges 3,000 distinct clang command
// lines, about what a linked doris_be's .GCC.command.line holds (one per
// translation unit).
func BenchmarkJudgeBERecords(b *testing.B) {
	m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	c, _ := m.Platform("kunpeng920")
	e, err := ExpectFor(m, c)
	if err != nil {
		b.Fatal(err)
	}
	var recs []string
	for i := range 3000 {
		recs = append(recs, fmt.Sprintf("/usr/lib/llvm-16/bin/clang++ --target=aarch64-linux-gnu -march=armv8.2-a+crypto+fp16+dotprod+fp16fml -mtune=tsv110 -O3 -DNDEBUG -I/src/be/src -I/src/gensrc/build -std=gnu++20 -fPIC -march=armv8.2-a+crypto+fp16+dotprod+fp16fml -c /src/be/src/u%d.cpp -o u%d.o", i, i))
	}
	b.ResetTimer()
	for range b.N {
		for _, r := range Split(recs) {
			if v, _ := e.Judge(e.Resolve(r)); v != AtTarget {
				b.Fatal(v)
			}
		}
	}
}
