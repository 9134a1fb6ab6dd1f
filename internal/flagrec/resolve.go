package flagrec

import (
	"fmt"
	"strings"
	"sync"

	"github.com/dorisarm/dorisarm/internal/matrix"
)

// Resolved is what a recorded invocation lets the compiler do.
type Resolved struct {
	Dialect string `json:"dialect"`
	// March and Mcpu are the values that won (the last of each); Mtune the
	// tuning, from -mtune or else -mcpu.
	March string `json:"march,omitempty"`
	Mcpu  string `json:"mcpu,omitempty"`
	Mtune string `json:"mtune,omitempty"`
	// Level is the architecture level; Features every extension the code
	// may use (implied ones included), sorted, shared by the records with
	// the same flags: read it, do not change it.
	Level    string   `json:"level,omitempty"`
	Features []string `json:"features,omitempty"`
	// Atomics (AArch64): lse (LSE instructions inline), outline (calls
	// that pick LSE at run time) or llsc (exclusive load/store loops).
	Atomics string `json:"atomics,omitempty"`
	LTO     string `json:"lto,omitempty"` // thin, full, or "" for none
	PGO     string `json:"pgo,omitempty"` // use, generate, or ""
	// Assembler are the -march= and -mcpu= given to the assembler (-Wa,
	// -Xassembler): they govern assembly sources only, not the code the
	// compiler makes, so they are noted, never taken for the compiler's.
	Assembler []string `json:"assembler,omitempty"`
	// Err says why the flags could not be resolved (an -mcpu the matrix
	// does not know, -march=native, an unknown modifier).
	Err string `json:"error,omitempty"`
}

// Resolver resolves records for one ISA with the matrix's facts.
type Resolver struct {
	m   *matrix.Matrix
	isa string
	// memo holds each (dialect, -march, -mcpu)'s features: a linked BE
	// holds thousands of records with a handful of flag sets. Safe for
	// concurrent use (the scan judges files in parallel).
	memo sync.Map
}

type memoKey struct{ dialect, march, mcpu string }

type memoVal struct {
	exts   matrix.Set
	sorted []string // exts, sorted: shared by every Resolved of the flag set
	level  string
	err    error
}

// NewResolver resolves flags for isa ("aarch64", "x86_64").
func NewResolver(m *matrix.Matrix, isa string) *Resolver { return &Resolver{m: m, isa: isa} }

// Resolve applies the driver's rules to r's arguments (read as readArgs
// says: the values of -Wa, -Xassembler, -Xlinker, -Wl, -mllvm and the
// like are not the compiler's flags):
//   - the last -march, -mcpu and -mtune win;
//   - GCC takes the architecture from -march when both are given, else
//     from -mcpu; Clang does too, and also passes -mcpu's CPU to the code
//     generator, which adds that CPU's extensions;
//   - -mcpu=NAME means the matrix CPU some compiler spells NAME: its
//     architecture level and the extensions it has, then NAME's modifiers;
//   - neither: the ISA's base level (armv8-a, x86-64), as the compilers'
//     defaults are.
func (rv *Resolver) Resolve(r Record) Resolved {
	f := readArgs(r)
	out := Resolved{Dialect: r.Dialect, March: f.march, Mcpu: f.mcpu, Mtune: f.mtune, LTO: f.lto, PGO: f.pgo, Assembler: f.asm}
	outline := f.outline
	if out.Mtune == "" {
		out.Mtune = out.Mcpu
	}
	mv := rv.cachedFeatures(out.Dialect, out.March, out.Mcpu)
	if mv.err != nil {
		out.Err = mv.err.Error()
		return out
	}
	exts := mv.exts
	out.Level, out.Features = mv.level, mv.sorted
	if rv.isa == "aarch64" {
		switch {
		case exts["lse"]:
			out.Atomics = "lse"
		case outline == "off":
			out.Atomics = "llsc"
		default:
			// GCC 10 and later and Clang 12 and later outline by default on Linux.
			out.Atomics = "outline"
		}
	}
	return out
}

// cachedFeatures is features, computed and sorted once per flag set
// (callers only read the set and the slice).
func (rv *Resolver) cachedFeatures(dialect, march, mcpu string) memoVal {
	k := memoKey{dialect, march, mcpu}
	if v, ok := rv.memo.Load(k); ok {
		return v.(memoVal)
	}
	exts, level, err := rv.features(dialect, march, mcpu)
	mv := memoVal{exts: exts, sorted: exts.Sorted(), level: level, err: err}
	rv.memo.Store(k, mv)
	return mv
}

func (rv *Resolver) features(dialect, march, mcpu string) (matrix.Set, string, error) {
	var exts matrix.Set
	var level string
	if mcpu != "" {
		cpuExts, cpuLevel, err := rv.mcpu(mcpu)
		if err != nil {
			return nil, "", err
		}
		if march == "" {
			return cpuExts, cpuLevel, nil
		}
		if dialect == "clang" {
			// Clang: -march sets the architecture, the CPU still adds its own.
			exts, level = cpuExts, cpuLevel
		}
	}
	if march == "" {
		level = rv.m.DefaultLevel(rv.isa)
		if level == "" {
			return nil, "", fmt.Errorf("matrix.yaml has no architecture level for %s", rv.isa)
		}
		e, err := rv.m.LevelExtensions(level)
		return e, level, err
	}
	if march == "native" {
		return nil, "", fmt.Errorf("-march=native: the build machine's CPU, not a target's")
	}
	mm, err := rv.m.ParseMarch(march)
	if err != nil {
		return nil, "", err
	}
	if al, ok := rv.m.ArchLevels[mm.Level]; ok && al.ISA != rv.isa {
		return nil, "", fmt.Errorf("-march=%s is a %s architecture, not %s", march, al.ISA, rv.isa)
	}
	for k := range exts {
		mm.Extensions[k] = true
	}
	return mm.Extensions, mm.Level, nil
}

func (rv *Resolver) mcpu(v string) (matrix.Set, string, error) {
	name, mods, _ := strings.Cut(v, "+")
	if name == "native" {
		return nil, "", fmt.Errorf("-mcpu=native: the build machine's CPU, not a target's")
	}
	cpu := rv.m.CPUByMcpu(rv.isa, name)
	if cpu == nil {
		return nil, "", fmt.Errorf("-mcpu=%s: no CPU in matrix.yaml is spelled %q by a compiler (add it under cpus with its extensions)", v, name)
	}
	exts, err := rv.m.LevelExtensions(cpu.Arch)
	if err != nil {
		return nil, "", err
	}
	for k := range rv.m.Closure(cpu.Extensions) {
		exts[k] = true
	}
	if mods != "" {
		if err := rv.m.ApplyModifiers(exts, cpu.Arch, strings.Split(mods, "+")); err != nil {
			return nil, "", fmt.Errorf("-mcpu=%s: %w", v, err)
		}
	}
	return exts, cpu.Arch, nil
}
