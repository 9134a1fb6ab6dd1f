// Package toolchain turns a matrix cell into a concrete compiler installation
// and the exact flags, environment, wrappers and CMake toolchain file a build
// of that cell uses. It knows the flag dialects (gcc, clang; BiSheng is a clang).
package toolchain

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/hashicorp/go-version"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/memo"
)

// HostISA is the ISA of the machine dorisarm runs on, in matrix.yaml's names.
func HostISA() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return runtime.GOARCH
}

// Identity says exactly which compiler a build used.
type Identity struct {
	Name    string `json:"name"`    // matrix compiler name (gcc, clang, bisheng-clang)
	Dialect string `json:"dialect"` // gcc or clang
	Path    string `json:"path"`    // the C compiler binary
	Version string `json:"version"` // parsed version, e.g. 12.2.0
	Banner  string `json:"banner"`  // first line of `cc --version`
	Digest  string `json:"digest"`  // sha256 of the C compiler binary
	// Tools are the sha256 of the C++ driver and of each tool (ar, ld, ...)
	// by role: part of every compile step's cache key.
	Tools map[string]string `json:"tools,omitempty"`
	// Parts are the digests of what beyond the driver makes the compiler
	// (matrix compilers.NAME.identity): "lib libLLVM-16.so.1",
	// "program cc1plus" (or "absent"). Named, not located: where the
	// compiler is installed does not change what it makes.
	Parts map[string]string `json:"parts,omitempty"`
}

// Toolchain is a resolved compiler installation for one cell.
type Toolchain struct {
	Cell     matrix.Cell
	Compiler *matrix.Compiler
	Identity Identity
	Home     string
	CC, CXX  string
	Cross    bool
	// Host is the build machine's ISA (its triple and GNU type for autoconf).
	Host *matrix.ISA
	// Sysroot is the target OS's libraries, nil when the build uses the
	// build machine's (a recorded waiver).
	Sysroot *Sysroot
	// Runtime is the C++ runtime the cell's C++ code compiles and links
	// against instead of the compiler's and the sysroot's own; nil for
	// none.
	Runtime *Runtime
	// Tools maps a tool role (ar, nm, objcopy, strip, ld, ranlib, profdata) to a path.
	Tools map[string]string
	// Notes record decisions the user should know about (e.g. -mtune dropped).
	Notes []string
}

// MissingError says a compiler is not installed and how to get it.
type MissingError struct {
	Target string
	Tried  []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("target %s: no usable compiler found:\n  %s", e.Target, strings.Join(e.Tried, "\n  "))
}

// Options adjust resolution.
type Options struct {
	// Compiler forces one compiler of the target's list instead of the first installed.
	Compiler string
	// Getenv reads the environment (home overrides); os.Getenv when nil.
	Getenv func(string) string
	// Sysroot, when set, is what the cell's builds link against; a compiler
	// that cannot build for it (its runtime needs a newer glibc) is skipped.
	Sysroot *Sysroot
	// Runtime, when set, is the C++ runtime the cell's C++ code uses (it
	// is part of the sysroot check: a compiler remembered failing
	// without it is not skipped with it).
	Runtime *Runtime
	// ProbeCache, when set, is a directory that remembers which compiler
	// (by binary digest) passed the sysroot check with which flags against
	// which sysroot (by key), so the check runs once per machine. Resolve
	// only reads it: a compiler it remembers failing is skipped; the check
	// itself is a step of the build (CheckSysroot).
	ProbeCache string
	// Memo remembers each compiler's --version by the digest of its binary,
	// so resolving a compiler seen before starts no process.
	Memo memo.Dir
}

// Resolve picks the first installed compiler from the cell's target list
// (or opts.Compiler) and probes it.
func Resolve(m *matrix.Matrix, cell matrix.Cell, opts Options) (*Toolchain, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	names := cell.Target.Compilers
	if opts.Compiler != "" {
		found := false
		for _, n := range names {
			if n == opts.Compiler {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("target %s does not list compiler %q (it lists: %s)", cell.Target.Name, opts.Compiler, strings.Join(names, ", "))
		}
		names = []string{opts.Compiler}
	}
	miss := &MissingError{Target: cell.Target.Name}
	for _, n := range names {
		cc := m.Compilers[n]
		tc, err := probe(cell, cc, getenv, opts.Memo)
		if err != nil {
			miss.Tried = append(miss.Tried, err.Error())
			continue
		}
		tc.Host = m.ISAs[HostISA()]
		if opts.Sysroot != nil {
			tc.Sysroot = opts.Sysroot
			tc.Runtime = opts.Runtime
			if err := tc.knownSysrootFailure(opts.ProbeCache); err != nil {
				miss.Tried = append(miss.Tried, err.Error())
				continue
			}
		}
		for _, skipped := range miss.Tried {
			tc.Notes = append(tc.Notes, "preferred compiler skipped: "+skipped)
		}
		return tc, nil
	}
	return nil, miss
}

// Probe finds compiler name of the matrix for the cell's ISA, whether or
// not the cell's target lists it, and identifies it (a C++ runtime's
// builder: the target may prefer clang).
func Probe(m *matrix.Matrix, cell matrix.Cell, name string, opts Options) (*Toolchain, error) {
	cc := m.Compilers[name]
	if cc == nil {
		return nil, fmt.Errorf("compiler %q is not in %s's compilers", name, m.File)
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	tc, err := probe(cell, cc, getenv, opts.Memo)
	if err != nil {
		return nil, err
	}
	tc.Host = m.ISAs[HostISA()]
	return tc, nil
}

func probe(cell matrix.Cell, cc *matrix.Compiler, getenv func(string) string, m memo.Dir) (*Toolchain, error) {
	home := cc.Home
	if cc.HomeEnv != "" && getenv(cc.HomeEnv) != "" {
		home = getenv(cc.HomeEnv)
	}
	cross := HostISA() != cell.ISA.Name
	prefix := ""
	if cross && cc.Cross == "prefix" {
		prefix = cell.ISA.Triple + "-"
	}
	bin := filepath.Join(home, "bin")
	tc := &Toolchain{Cell: cell, Compiler: cc, Home: home, Cross: cross, Tools: map[string]string{}}
	tc.CC = filepath.Join(bin, prefix+cc.CC)
	tc.CXX = filepath.Join(bin, prefix+cc.CXX)
	howTo := installHint(cc, cell.ISA.Name)
	for _, p := range []string{tc.CC, tc.CXX} {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return nil, fmt.Errorf("%s: %s not found (%s)", cc.Name, p, howTo)
		}
	}
	for role, name := range cc.Tools {
		p := filepath.Join(bin, prefix+name)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s: tool %s (%s) not found at %s (%s)", cc.Name, role, name, p, howTo)
		}
		tc.Tools[role] = p
	}
	id, err := identify(tc.CC, cc.Identity, m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cc.Name, err)
	}
	id.Name, id.Dialect = cc.Name, cc.Dialect
	id.Tools = map[string]string{}
	for role, p := range tc.Tools {
		if id.Tools[role], err = statDigest(p, m); err != nil {
			return nil, fmt.Errorf("%s: %w", cc.Name, err)
		}
	}
	if id.Tools["c++"], err = statDigest(tc.CXX, m); err != nil {
		return nil, fmt.Errorf("%s: %w", cc.Name, err)
	}
	tc.Identity = id
	cs, _ := version.NewConstraint(cc.Version)
	v, err := version.NewVersion(id.Version)
	if err != nil || (cs != nil && !cs.Check(v)) {
		return nil, fmt.Errorf("%s: %s is version %s, but matrix.yaml requires %s", cc.Name, tc.CC, id.Version, cc.Version)
	}
	if cell.Target.Mtune || cell.Target.Tune == "mcpu" {
		if mc, ok := cell.CPU.Mcpu[cc.Name]; ok {
			since, _ := version.NewConstraint(mc.Since)
			if since != nil && !since.Check(v) {
				if cell.Target.Tune == "mcpu" {
					return nil, fmt.Errorf("%s %s does not know -mcpu=%s (needs %s)", cc.Name, id.Version, mc.Name, mc.Since)
				}
				tc.Notes = append(tc.Notes, fmt.Sprintf("-mtune=%s dropped: %s %s does not know it (needs %s)", mc.Name, cc.Name, id.Version, mc.Since))
			}
		}
	}
	return tc, nil
}

func installHint(cc *matrix.Compiler, isa string) string {
	var parts []string
	if pk := cc.Packages[isa]; len(pk) > 0 {
		parts = append(parts, "install: "+strings.Join(pk, " "))
	}
	if cc.HomeEnv != "" {
		parts = append(parts, "or set "+cc.HomeEnv+" to its installation directory")
	}
	if len(parts) == 0 {
		return "install it or fix compilers." + cc.Name + ".home in matrix.yaml"
	}
	return strings.Join(parts, ", ")
}

var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b(\d+\.\d+(?:\.\d+)?)\b`) })

// identify reads a compiler's version from its --version banner, which
// depends on its driver and the libraries it loads (clang's banner is in
// libclang-cpp), and finds its parts: the memo answers for a compiler it
// has seen.
func identify(cc string, parts matrix.CompilerIdentity, m memo.Dir) (Identity, error) {
	digest, err := statDigest(cc, m)
	if err != nil {
		return Identity{}, err
	}
	libs, all, err := compilerParts(cc, digest, parts, m)
	if err != nil {
		return Identity{}, err
	}
	out, err := m.Output(memo.Key(append([]string{"version", digest, "--version"}, flatten(libs)...)...), func() ([]byte, error) {
		return exec.Command(cc, "--version").Output()
	})
	if err != nil {
		return Identity{}, fmt.Errorf("%s --version failed: %w", cc, err)
	}
	banner, _, _ := strings.Cut(string(out), "\n")
	id := Identity{Path: cc, Banner: strings.TrimSpace(banner)}
	// "aarch64-linux-gnu-gcc (Debian 12.2.0-14) 12.2.0": the last version on the line;
	// "Debian clang version 16.0.6 (15~deb12u1)": the one after "version".
	line := id.Banner
	if i := strings.Index(line, "version "); i >= 0 {
		line = line[i+len("version "):]
		if m := versionRE().FindString(line); m != "" {
			id.Version = m
		}
	} else if ms := versionRE().FindAllString(line, -1); len(ms) > 0 {
		id.Version = ms[len(ms)-1]
	}
	if id.Version == "" {
		return Identity{}, fmt.Errorf("cannot read a version from %q", id.Banner)
	}
	id.Digest = digest
	if len(all) > 0 {
		id.Parts = all
	}
	return id, nil
}

// ErrNoPGO is returned when profile flags are asked of a target without PGO.
var ErrNoPGO = errors.New("target does not use PGO")

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(args []string) string {
	var b bytes.Buffer
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellQuote(a))
	}
	return b.String()
}
