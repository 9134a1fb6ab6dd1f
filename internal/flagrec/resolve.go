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
	// CC1 are the -target-cpu and -target-feature cc1 was given beyond the
	// driver's own (clang -Xclang, or a cc1 record's): "-target-cpu
	// neoverse-v1", "-target-feature +sve".
	CC1 []string `json:"cc1,omitempty"`
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

// memoKey is a flag set: the driver's -march and -mcpu, and cc1's
// -target-cpu and -target-feature values (joined by spaces, in order).
type memoKey struct{ dialect, march, mcpu, cc1CPU, cc1Features string }

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
//     defaults are;
//   - then what cc1 was given beyond the driver (clang's -Xclang, or a
//     cc1 record): -target-cpu's CPU adds its extensions, and each
//     -target-feature +NAME adds, -NAME takes away, in order (applyCC1).
func (rv *Resolver) Resolve(r Record) Resolved {
	f := readArgs(r)
	out := Resolved{Dialect: r.Dialect, March: f.march, Mcpu: f.mcpu, Mtune: f.mtune, LTO: f.lto, PGO: f.pgo, Assembler: f.asm}
	outline := f.outline
	if out.Mtune == "" {
		out.Mtune = out.Mcpu
	}
	k := memoKey{dialect: out.Dialect, march: out.March, mcpu: out.Mcpu}
	k.cc1CPU, k.cc1Features, out.CC1 = cc1Target(f.cc1)
	mv := rv.cachedFeatures(k)
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
func (rv *Resolver) cachedFeatures(k memoKey) memoVal {
	if v, ok := rv.memo.Load(k); ok {
		return v.(memoVal)
	}
	exts, level, err := rv.features(k.dialect, k.march, k.mcpu)
	if err == nil && (k.cc1CPU != "" || k.cc1Features != "") {
		level, err = rv.applyCC1(exts, level, k.cc1CPU, k.cc1Features)
	}
	mv := memoVal{exts: exts, sorted: exts.Sorted(), level: level, err: err}
	rv.memo.Store(k, mv)
	return mv
}

func (rv *Resolver) features(dialect, march, mcpu string) (matrix.Set, string, error) {
	var exts matrix.Set
	var level string
	if mcpu != "" {
		cpuExts, cpuLevel, err := rv.mcpu(dialect, mcpu)
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

// mcpu resolves -mcpu=NAME+MODS: the matrix CPU a compiler spells NAME
// (the hardware's level and extensions), else the CPU the compilers'
// own tables (cpus.yaml) name so; then the modifiers.
func (rv *Resolver) mcpu(dialect, v string) (matrix.Set, string, error) {
	name, mods, _ := strings.Cut(v, "+")
	if name == "native" {
		return nil, "", fmt.Errorf("-mcpu=native: the build machine's CPU, not a target's")
	}
	exts, level, err := rv.matrixCPU(name)
	if err == nil && exts == nil {
		var ok bool
		if exts, level, ok, err = rv.tableCPU(dialect, name); err == nil && !ok {
			err = fmt.Errorf("-mcpu=%s: no CPU in matrix.yaml is spelled %q by a compiler, and neither compiler's CPU table (%s) names it (add it under cpus in matrix.yaml with its extensions)", v, name, cpusFile)
		}
	}
	if err != nil {
		return nil, "", err
	}
	if mods != "" {
		if err := rv.m.ApplyModifiers(exts, level, strings.Split(mods, "+")); err != nil {
			return nil, "", fmt.Errorf("-mcpu=%s: %w", v, err)
		}
	}
	return exts, level, nil
}

// matrixCPU is the matrix CPU some compiler spells name: its level and
// the extensions the hardware has; nil when the matrix knows none.
func (rv *Resolver) matrixCPU(name string) (matrix.Set, string, error) {
	cpu := rv.m.CPUByMcpu(rv.isa, name)
	if cpu == nil {
		return nil, "", nil
	}
	exts, err := rv.m.LevelExtensions(cpu.Arch)
	if err != nil {
		return nil, "", err
	}
	for k := range rv.m.Closure(cpu.Extensions) {
		exts[k] = true
	}
	return exts, cpu.Arch, nil
}

// cc1Target picks cc1's -target-cpu (the last) and -target-feature values
// (in order) out of cc1's arguments; the pairs are also given back as the
// record spells them, for Describe.
func cc1Target(cc1 []string) (cpu, features string, pairs []string) {
	var fs []string
	for i := 0; i+1 < len(cc1); i++ {
		switch cc1[i] {
		case "-target-cpu":
			cpu = cc1[i+1]
		case "-target-feature":
			fs = append(fs, cc1[i+1])
		default:
			continue
		}
		pairs = append(pairs, cc1[i]+" "+cc1[i+1])
		i++
	}
	return cpu, strings.Join(fs, " "), pairs
}

// applyCC1 applies cc1's -target-cpu and -target-feature to exts (what
// the driver's flags enable) as LLVM builds its subtarget: the driver's
// features stand (it passes them as -target-feature), -target-cpu adds
// its CPU's extensions (the last -target-cpu replaces the driver's, whose
// extensions the driver already passed), and then each extra feature
// applies in order, +NAME adding and -NAME taking away. Feature names are
// LLVM's (features.yaml). It gives back the level, raised when a CPU or
// a feature is of a higher one.
func (rv *Resolver) applyCC1(exts matrix.Set, level, cpu, features string) (string, error) {
	if cpu != "" {
		cpuExts, cpuLevel, err := rv.cc1CPU(cpu)
		if err != nil {
			return "", fmt.Errorf("cc1's -target-cpu %s: %w", cpu, err)
		}
		for k := range cpuExts {
			exts[k] = true
		}
		if rv.m.LevelWithin(level, cpuLevel) {
			level = cpuLevel
		}
	}
	return rv.applyFeatures(exts, level, features, "cc1's -target-feature")
}

// applyFeatures applies LLVM feature values ("+sve -dotprod", in order)
// to exts: +NAME adds, -NAME takes away (features.yaml says what NAME
// is). what names them in errors.
func (rv *Resolver) applyFeatures(exts matrix.Set, level, features, what string) (string, error) {
	for _, tf := range strings.Fields(features) {
		n := strings.TrimLeft(tf, "+-")
		if n == "" || (tf[0] != '+' && tf[0] != '-') {
			return "", fmt.Errorf("%s %s: a feature is +NAME or -NAME", what, tf)
		}
		f, err := rv.name("llvm", n)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", what, tf, err)
		}
		if tf[0] == '-' {
			rv.removeFeature(exts, f)
			continue
		}
		if level, err = rv.addFeature(exts, level, f); err != nil {
			return "", err
		}
	}
	return level, nil
}

// cc1CPU resolves cc1's -target-cpu: "generic" is the ISA's base level;
// on an ISA whose -march names are CPUs (x86-64: the driver passes
// -march=x86-64-v3 as -target-cpu x86-64-v3) a level's name is that
// level; any other name is a CPU, as -mcpu resolves it.
func (rv *Resolver) cc1CPU(cpu string) (matrix.Set, string, error) {
	level := ""
	if al, ok := rv.m.ArchLevels[cpu]; ok && al.ISA == rv.isa {
		level = cpu
	} else if cpu == "generic" {
		level = rv.m.DefaultLevel(rv.isa)
	}
	if level != "" {
		exts, err := rv.m.LevelExtensions(level)
		return exts, level, err
	}
	return rv.mcpu("clang", cpu)
}
