package toolchain

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// Phase is a stage of a (possibly two-phase PGO) build.
type Phase string

const (
	// Release is a normal optimized build (PGO-use when a profile is given).
	Release Phase = "release"
	// Instrument is the PGO training build.
	Instrument Phase = "instrument"
)

// FlagOptions choose the phase and where profiles and caches live.
type FlagOptions struct {
	Phase Phase
	// ProfileDir is where GCC writes and reads .gcda files. GCC 12 names each
	// one after its object's absolute path, so the instrumented and the
	// optimized build must compile in the same directory.
	ProfileDir string
	// Profile is the merged Clang profile (.profdata) for the release phase.
	Profile string
	// LTOCache is the ThinLTO cache directory (Clang).
	LTOCache string
	// NoLTO leaves link-time optimisation out. Third-party packages build
	// without it: their static archives are post-processed (Doris renames
	// bitshuffle's symbols with objcopy), which LTO bitcode does not survive.
	NoLTO bool
	// ToolHome, when set, is the generated compiler home whose bin/ holds the
	// tools (WriteWrappers links them there); link flags then name the linker
	// there instead of its install path, so plans stay machine-independent.
	ToolHome string
	// Sysroot is the path the flags name for the toolchain's sysroot (a
	// placeholder in plans); its real path when empty.
	Sysroot string
	// Runtime is the path the flags name for the toolchain's C++ runtime
	// (a placeholder in plans); its real path when empty.
	Runtime string
}

// Flags are the flags a cell's compiles and links get, split by purpose so the
// build record can say which came from where.
type Flags struct {
	Target []string `json:"target"` // -march/-mtune/-mcpu and --target for clang cross builds
	// Sysroot makes the compiler use the target OS's headers and libraries.
	Sysroot []string `json:"sysroot,omitempty"`
	Record  []string `json:"record"` // record the command line in the binary
	PGO     []string `json:"pgo,omitempty"`
	LTO     []string `json:"lto,omitempty"`
	// Link are added only when the driver links.
	Link []string `json:"link,omitempty"`
	// Runtime are added when either driver links with the compiler's
	// runtime libraries (not with -r, -nostdlib or -nodefaultlibs, where
	// the driver reports them unused): -static-libgcc.
	Runtime []string `json:"runtime,omitempty"`
	// CXXRuntime are added only when the C++ driver (g++, clang++) links
	// with the C++ runtime: -static-libstdc++. The C driver never links
	// one, and clang reports the flag unused there, which fails every
	// -Werror configure check that links (jemalloc's).
	CXXRuntime []string `json:"cxx_runtime,omitempty"`
	// CXXInclude are added only by the C++ driver, to every compile: the
	// C++ runtime's headers instead of the compiler's (Toolchain.Runtime).
	CXXInclude []string `json:"cxx_include,omitempty"`
}

// LinkFor returns every flag a link through the C driver (cxx false) or the
// C++ driver (cxx true) gets after its own arguments.
func (f Flags) LinkFor(cxx bool) []string {
	out := append(append([]string{}, f.Link...), f.Runtime...)
	if cxx {
		out = append(out, f.CXXRuntime...)
	}
	return out
}

// Query returns the flags an invocation with no input gets (-v,
// --version, -print-*, -dumpmachine): what says which target and sysroot
// it answers for, without the code generation flags (-march, -mtune,
// -mcpu, recording, profiles) clang reports unused there.
func (f Flags) Query() []string {
	var out []string
	for _, t := range f.Target {
		if strings.HasPrefix(t, "--target=") {
			out = append(out, t)
		}
	}
	return append(out, f.Sysroot...)
}

// Assemble returns the compile flags an assembly-only invocation (.s files,
// -x assembler) gets: the recording and profile flags are left out, since
// clang reports them unused there.
func (f Flags) Assemble() []string {
	out := append([]string{}, f.Target...)
	out = append(out, f.Sysroot...)
	return append(out, f.LTO...)
}

// Compile returns every flag a compile gets.
func (f Flags) Compile() []string {
	out := append([]string{}, f.Target...)
	out = append(out, f.Sysroot...)
	out = append(out, f.Record...)
	out = append(out, f.PGO...)
	return append(out, f.LTO...)
}

// CompileCXX returns every flag a compile through the C++ driver gets.
func (f Flags) CompileCXX() []string { return append(f.Compile(), f.CXXInclude...) }

// String is the compile flags as one shell-quoted line.
func (f Flags) String() string { return shellJoin(f.Compile()) }

// TargetFlags are the -march/-mtune/-mcpu (and clang --target) flags of the cell.
func (tc *Toolchain) TargetFlags() []string {
	t := tc.Cell.Target
	var out []string
	if tc.Compiler.Dialect == "clang" && tc.Cross {
		out = append(out, "--target="+tc.Cell.ISA.Triple)
	}
	mc, hasMcpu := tc.Cell.CPU.Mcpu[tc.Compiler.Name]
	dropped := false
	for _, n := range tc.Notes {
		if strings.HasPrefix(n, "-mtune=") {
			dropped = true
		}
	}
	switch {
	case t.Tune == "mcpu" && hasMcpu:
		out = append(out, "-mcpu="+mc.Name)
	default:
		out = append(out, "-march="+t.March)
		if t.Mtune && hasMcpu && !dropped {
			out = append(out, "-mtune="+mc.Name)
		}
	}
	return out
}

// March is the value Doris's build.sh takes as ARM_MARCH.
func (tc *Toolchain) March() string {
	if tc.Cell.Target.March != "" {
		return tc.Cell.Target.March
	}
	return tc.Cell.CPU.Arch
}

// LTOMode is the LTO mode this toolchain uses for the cell ("" for none).
func (tc *Toolchain) LTOMode() string { return tc.Cell.Target.LTO[tc.Compiler.Dialect] }

// Flags computes the cell's flags for a phase.
func (tc *Toolchain) Flags(o FlagOptions) (Flags, error) {
	if o.Phase == "" {
		o.Phase = Release
	}
	f := Flags{Target: tc.TargetFlags()}
	f.Sysroot, f.Runtime, f.CXXRuntime = tc.sysrootFlags(o.Sysroot)
	f.CXXInclude, f.Link = tc.runtimeFlags(o.Runtime)
	clang := tc.Compiler.Dialect == "clang"
	if clang {
		f.Record = []string{"-frecord-command-line"}
		if ld := tc.Tools["ld"]; ld != "" {
			if o.ToolHome != "" {
				ld = o.ToolHome + "/bin/" + toolName("ld", tc.Compiler.Dialect)
			}
			f.Link = append(f.Link, "--ld-path="+ld)
		}
	} else {
		f.Record = []string{"-frecord-gcc-switches"}
	}
	pgo := tc.Cell.Target.PGO
	switch o.Phase {
	case Instrument:
		if !pgo {
			return Flags{}, fmt.Errorf("target %s: %w", tc.Cell.Target.Name, ErrNoPGO)
		}
		if clang {
			f.PGO = []string{"-fprofile-generate"}
		} else {
			if o.ProfileDir == "" {
				return Flags{}, fmt.Errorf("gcc instrumented build needs a profile directory")
			}
			f.PGO = []string{"-fprofile-generate", "-fprofile-update=atomic", "-fprofile-dir=" + o.ProfileDir}
		}
		f.Link = append(f.Link, f.PGO...)
		return f, nil // no LTO for the training build: it only has to run
	case Release:
		if pgo {
			switch {
			case clang && o.Profile != "":
				f.PGO = []string{"-fprofile-use=" + o.Profile, "-Wno-profile-instr-unprofiled", "-Wno-profile-instr-out-of-date"}
			case !clang && o.ProfileDir != "":
				f.PGO = []string{"-fprofile-use", "-fprofile-partial-training", "-fprofile-dir=" + o.ProfileDir}
			}
			f.Link = append(f.Link, f.PGO...)
		}
	default:
		return Flags{}, fmt.Errorf("unknown build phase %q", o.Phase)
	}
	mode := tc.LTOMode()
	if o.NoLTO {
		mode = ""
	}
	switch mode {
	case "":
	case "thin":
		f.LTO = []string{"-flto=thin"}
		f.Link = append(f.Link, "-flto=thin")
		if o.LTOCache != "" {
			f.Link = append(f.Link, "-Wl,--thinlto-cache-dir="+o.LTOCache)
		}
	case "full":
		f.LTO = []string{"-flto"}
		f.Link = append(f.Link, "-flto")
	case "auto":
		// Fat objects keep plain ar/nm working on the static archives third-party builds make.
		f.LTO = []string{"-flto=auto", "-ffat-lto-objects"}
		f.Link = append(f.Link, "-flto=auto")
	default:
		return Flags{}, fmt.Errorf("target %s: unknown lto mode %q", tc.Cell.Target.Name, mode)
	}
	return f, nil
}

// Emulator is the command prefix that runs a target binary on this host:
// qemu-user with the target CPU's model, or nothing for native builds.
// With a sysroot, target programs find their loader and libraries in it
// (its real glibc: a capped sysroot's stubs only serve the linker).
func (tc *Toolchain) Emulator() []string { return tc.EmulatorWith("") }

// EmulatorWith is Emulator naming the sysroot by a placeholder (plans).
func (tc *Toolchain) EmulatorWith(sysrootRun string) []string {
	if !tc.Cross {
		return nil
	}
	root := tc.Cell.ISA.Sysroot
	if tc.Sysroot != nil {
		root = tc.Sysroot.RunPath
		if sysrootRun != "" {
			root = sysrootRun
		}
	}
	return []string{tc.Cell.ISA.Qemu, "-cpu", tc.Cell.Qemu.Name, "-L", root}
}

// EmulatorAs is Emulator with another qemu model (e.g. to prove a binary dies without SVE).
func (tc *Toolchain) EmulatorAs(model string) []string {
	e := tc.Emulator()
	if len(e) > 2 {
		e[2] = model
	}
	return e
}

// driverNames are the names Doris's env.sh looks for under DORIS_{GCC,CLANG}_HOME/bin.
func (tc *Toolchain) driverNames() (cc, cxx string) {
	if tc.Compiler.Dialect == "clang" {
		return "clang", "clang++"
	}
	return "gcc", "g++"
}

// homeEnv is the variable Doris's env.sh reads for this dialect.
func (tc *Toolchain) homeEnv() string {
	if tc.Compiler.Dialect == "clang" {
		return "DORIS_CLANG_HOME"
	}
	return "DORIS_GCC_HOME"
}

// toolName maps a tool role to the name Doris's scripts call it by.
func toolName(role, dialect string) string {
	if role == "ld" && dialect == "clang" {
		return "ld.lld"
	}
	if role == "profdata" {
		return "llvm-profdata"
	}
	return role
}

// Wrappers is a generated compiler home whose drivers inject the cell's flags.
type Wrappers struct {
	Home    string // use as DORIS_GCC_HOME / DORIS_CLANG_HOME
	CC, CXX string
	Log     string // one line per compiler invocation
	Tools   map[string]string
	// ExecLib is the compiled exec shim (cross builds), "" where it could not be built.
	ExecLib string
	// dir is where the home was written, when it is seen elsewhere (Home).
	dir string
}

// written is where the home's files are on this machine.
func (w *Wrappers) written() string {
	if w.dir == "" {
		return w.Home
	}
	return w.dir
}

// writtenPath is where p, a path as the home's users see it, is on this machine.
func (w *Wrappers) writtenPath(p string) string {
	if w.dir == "" || w.dir == w.Home {
		return p
	}
	if rest, ok := strings.CutPrefix(p, w.Home+"/"); ok {
		return filepath.Join(w.written(), rest)
	}
	return p
}

// Env is the environment a Doris-style build of the cell runs with.
func (tc *Toolchain) Env(w *Wrappers, f Flags) []string {
	env := []string{
		"DORIS_TOOLCHAIN=" + tc.Compiler.Dialect,
		tc.homeEnv() + "=" + w.Home,
		"CC=" + w.CC,
		"CXX=" + w.CXX,
		"DORIS_BIN_UTILS=" + filepath.Join(w.Home, "bin") + "/",
		"EXTRA_CXX_FLAGS=" + shellJoin(f.Target),
	}
	if tc.Cell.ISA.Name == "aarch64" {
		env = append(env, "ARM_MARCH="+tc.March(), "USE_AVX2=OFF")
	}
	for _, role := range slices.Sorted(maps.Keys(w.Tools)) {
		env = append(env, strings.ToUpper(role)+"="+w.Tools[role])
	}
	if tc.Sysroot != nil {
		// For packages that import prebuilt libraries (the sample's OpenSSL).
		env = append(env, "DORISARM_SYSROOT="+SysrootPlaceholder)
	}
	return append(env, tc.crossEnv(w)...)
}
