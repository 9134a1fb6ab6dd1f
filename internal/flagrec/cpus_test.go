package flagrec

import (
	"strings"
	"testing"
)

// An -mcpu the matrix lacks is resolved from the compilers' own CPU
// tables (cpus.yaml). The records are GCC 12.2's and clang-16's, read back
// with readelf -p .GCC.command.line, but for the GCC 13 one: GCC 12 does
// not know ampere1a, and GCC 13 writes its record the same way.
func TestMcpuFromTheCompilersTables(t *testing.T) {
	e := expect(t, load(t), "kunpeng920")
	cases := []struct {
		rec, verdict string
		detail       []string
	}{
		{"GNU C17 12.2.0 -mcpu=a64fx -mlittle-endian -mabi=lp64 -O2 -fasynchronous-unwind-tables", Beyond, []string{"sve"}},
		{"/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line -mcpu=a64fx a.c -o r.o", Beyond, []string{"sve"}},
		{"GNU C17 12.2.0 -mcpu=cortex-a55 -mlittle-endian -mabi=lp64 -O2 -fasynchronous-unwind-tables", Beyond, []string{"rcpc"}},
		// An older core is short of the target's flags, not beyond the CPU.
		{"GNU C17 12.2.0 -mcpu=cortex-a53 -mlittle-endian -mabi=lp64 -O2 -fasynchronous-unwind-tables", Lost, []string{"lse", "dotprod"}},
		{"/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line -mcpu=thunderx2t99 a.c -o r.o", Lost, []string{"dotprod"}},
		// Modifiers apply to a table CPU as to a matrix one.
		{"GNU C17 12.2.0 -mcpu=a64fx+nosve -mlittle-endian -mabi=lp64 -O2 -fasynchronous-unwind-tables", Lost, []string{"dotprod"}},
		// GCC 12's table lacks it; LLVM's has it.
		{"GNU C17 13.2.0 -mcpu=ampere1a -mlittle-endian -mabi=lp64 -O2", Beyond, []string{"i8mm", "mte"}},
		// An architecture the matrix has no level for stays unresolved.
		{"/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line -mcpu=cortex-r82 a.c -o r.o", Unresolved, []string{"cortex-r82", "v8r"}},
		// In neither table.
		{"GNU C17 12.2.0 -mcpu=cortex-x9", Unresolved, []string{"cortex-x9", "neither compiler's CPU table"}},
	}
	for _, c := range cases {
		r, _ := Parse(c.rec)
		v, d := e.Judge(e.Resolve(r))
		if v != c.verdict {
			t.Errorf("%s: %s (%s), want %s", c.rec, v, d, c.verdict)
		}
		for _, w := range c.detail {
			if !strings.Contains(d, w) {
				t.Errorf("%s: detail %q lacks %q", c.rec, d, w)
			}
		}
	}
}

// Every CPU of both tables reads, but those of an architecture matrix.yaml
// has no level for (Armv8-R's cortex-r82); and where a table names a CPU
// the matrix describes from its hardware, the compiler assumes nothing the
// hardware lacks (Neoverse V2 is left out: both compilers assume MTE,
// which Graviton4 does not expose).
func TestCPUTablesRead(t *testing.T) {
	m := load(t)
	rv := NewResolver(m, "aarch64")
	tbl, err := loadCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(tbl.GCC.CPUs) < 40 || len(tbl.LLVM.CPUs) < 40 {
		t.Fatalf("tables of %d and %d CPUs", len(tbl.GCC.CPUs), len(tbl.LLVM.CPUs))
	}
	read := func(compiler, name, v string) {
		var err error
		if compiler == "gcc" {
			_, _, err = rv.gccArch(v)
		} else {
			_, _, err = rv.llvmFeatures(v)
		}
		if err != nil && !strings.Contains(v, "v8r") && !strings.Contains(v, "armv8-r") {
			t.Errorf("%s %s %q: %v", compiler, name, v, err)
		}
	}
	for name, v := range tbl.GCC.CPUs {
		read("gcc", name, v)
	}
	for name, v := range tbl.LLVM.CPUs {
		read("llvm", name, v)
	}
	for _, name := range []string{"tsv110", "neoverse-n1", "neoverse-v1"} {
		hw, _, _ := rv.matrixCPU(name)
		for _, dialect := range []string{"gcc", "clang"} {
			exts, _, ok, err := rv.tableCPU(dialect, name)
			if !ok || err != nil {
				t.Fatalf("%s in %s's table: %v %v", name, dialect, ok, err)
			}
			if extra := exts.Minus(hw); len(extra) > 0 {
				t.Errorf("%s's %s assumes %v, which matrix.yaml's hardware lacks", dialect, name, extra)
			}
		}
	}
}
