package flagrec

import (
	"fmt"
	"strings"

	"github.com/dorisarm/dorisarm/internal/matrix"
)

// Verdicts on one record, worst last.
const (
	AtTarget   = "target"     // at least the target's flags, nothing the CPU lacks
	Lost       = "lost"       // a weaker architecture than the target's flags: lost tuning
	Unresolved = "unresolved" // flags dorisarm cannot resolve (unknown -mcpu, -march=native)
	Beyond     = "beyond"     // code for a CPU the target lacks: it may die with SIGILL
)

// Unrecorded is the verdict on an object that records no flags.
const Unrecorded = "unrecorded"

// Expect is what a target's objects must be built for.
type Expect struct {
	ISA string `json:"isa"`
	// March is the target's -march; Level and Features what it enables.
	March    string   `json:"march"`
	Level    string   `json:"level"`
	Features []string `json:"features"`
	// CPULevel and CPU are the hardware's level and extensions.
	CPULevel string   `json:"cpu_level"`
	CPU      []string `json:"cpu"`
	m        *matrix.Matrix
	want     matrix.Set
	has      matrix.Set
	resolver *Resolver
}

// ExpectFor is the expectation of a matrix target.
func ExpectFor(m *matrix.Matrix, c matrix.Cell) (*Expect, error) {
	march := c.Target.March
	if march == "" {
		march = c.CPU.Arch
	}
	mm, err := m.ParseMarch(march)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", c.Target.Name, err)
	}
	has := m.Closure(c.CPU.Extensions)
	e := &Expect{ISA: c.ISA.Name, March: march, Level: mm.Level, Features: mm.Extensions.Sorted(),
		CPULevel: c.CPU.Arch, CPU: has.Sorted(), m: m, want: mm.Extensions, has: has, resolver: NewResolver(m, c.ISA.Name)}
	return e, nil
}

// Resolve resolves a record for the target's ISA.
func (e *Expect) Resolve(r Record) Resolved { return e.resolver.Resolve(r) }

// Judge says how a resolved record compares with the target: beyond the
// CPU (extensions it lacks, or, where levels name no extensions, as on
// x86-64, a level above the CPU's), lost (short of the target's flags) or
// at the target; detail names the difference.
func (e *Expect) Judge(r Resolved) (verdict, detail string) {
	verdict, detail = e.judge(r)
	if note := e.assemblerNote(r); note != "" {
		if detail != "" {
			detail += "; "
		}
		detail += note
	}
	return verdict, detail
}

func (e *Expect) judge(r Resolved) (verdict, detail string) {
	if r.Err != "" {
		return Unresolved, r.Err
	}
	got := matrix.Set{}
	for _, f := range r.Features {
		got[f] = true
	}
	if extra := got.Minus(e.has); len(extra) > 0 {
		return Beyond, fmt.Sprintf("uses %s, which the CPU lacks", strings.Join(extra, ", "))
	}
	if len(got) == 0 && len(e.want) == 0 && r.Level != "" && e.CPULevel != "" && !e.m.LevelWithin(r.Level, e.CPULevel) {
		return Beyond, fmt.Sprintf("architecture %s is above the CPU's %s", r.Level, e.CPULevel)
	}
	if missing := e.want.Minus(got); len(missing) > 0 {
		return Lost, fmt.Sprintf("lacks %s of the target's -march=%s", strings.Join(missing, ", "), e.March)
	}
	if len(got) == 0 && len(e.want) == 0 && r.Level != e.Level && e.m.LevelWithin(r.Level, e.Level) {
		return Lost, fmt.Sprintf("architecture %s is below the target's -march=%s", r.Level, e.March)
	}
	return AtTarget, ""
}

// assemblerNote says which of the assembler's -march and -mcpu (-Wa,
// -Xassembler) enable what the CPU lacks. They do not change the verdict:
// the assembler's architecture governs assembly sources (a .S file's own
// instructions, which the scan's ISA check reads in the object), never
// the code the compiler makes from C and C++ (clang-16 and GCC 12 both
// keep their own -march for it). The note tells a reader why an object
// at the target's flags may still hold such instructions.
func (e *Expect) assemblerNote(r Resolved) string {
	var notes []string
	for _, a := range r.Assembler {
		var exts matrix.Set
		var err error
		if v, ok := strings.CutPrefix(a, "-mcpu="); ok {
			exts, _, err = e.resolver.mcpu("gcc", v)
		} else {
			var mm matrix.March
			mm, err = e.m.ParseMarch(strings.TrimPrefix(a, "-march="))
			exts = mm.Extensions
		}
		switch extra := exts.Minus(e.has); {
		case err != nil:
			notes = append(notes, fmt.Sprintf("the assembler was given %s, which cannot be resolved (%v)", a, err))
		case len(extra) > 0:
			notes = append(notes, fmt.Sprintf("the assembler was given %s, which enables %s the CPU lacks", a, strings.Join(extra, ", ")))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "note: " + strings.Join(notes, "; ") + " (assembly sources only: the compiler's code is judged by its own flags, the instructions by the ISA check)"
}

// Rank orders verdicts from best to worst.
func Rank(v string) int {
	switch v {
	case AtTarget:
		return 0
	case Unrecorded:
		return 1
	case Lost:
		return 2
	case Unresolved:
		return 3
	case Beyond:
		return 4
	}
	return 5
}

// Describe is a one-line summary of resolved flags: the -march or -mcpu
// that won, then tuning, atomics, LTO and PGO.
func (r Resolved) Describe() string {
	var parts []string
	switch {
	case r.March != "" && r.Mcpu != "":
		parts = append(parts, "-march="+r.March+" (-mcpu="+r.Mcpu+")")
	case r.March != "":
		parts = append(parts, "-march="+r.March)
	case r.Mcpu != "":
		parts = append(parts, "-mcpu="+r.Mcpu)
	default:
		parts = append(parts, "default "+r.Level)
	}
	if r.Mtune != "" && r.Mtune != r.Mcpu {
		parts = append(parts, "-mtune="+r.Mtune)
	}
	if len(r.CC1) > 0 {
		parts = append(parts, "cc1 "+strings.Join(r.CC1, " "))
	}
	if len(r.Assembler) > 0 {
		parts = append(parts, "assembler "+strings.Join(r.Assembler, " "))
	}
	if r.Atomics != "" {
		parts = append(parts, "atomics "+r.Atomics)
	}
	if r.LTO != "" {
		parts = append(parts, "lto "+r.LTO)
	}
	if r.PGO != "" {
		parts = append(parts, "pgo "+r.PGO)
	}
	return strings.Join(parts, ", ")
}
