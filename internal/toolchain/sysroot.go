package toolchain

import (
	"cmp"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/dorisarm/dorisarm/internal/fsutil"
)

// Sysroot is the target OS's headers and libraries a cell's builds use
// instead of the build machine's (internal/sysroot makes them).
//
// A plan knows a sysroot by its Key (the digest of its spec: the image
// digest or the Debian suite, packages and mirror, and the tools that cap
// its glibc); the build's sysroot step makes it and fills in the rest.
type Sysroot struct {
	Name string `json:"name"`
	// Key is what the steps that compile against it are keyed by.
	Key  string `json:"key"`
	Path string `json:"-"`
	// RunPath is the same libraries uncapped (real glibc), where target
	// programs run under qemu; Path when the sysroot is not capped.
	RunPath string `json:"-"`
	Digest  string `json:"digest,omitempty"` // the made tree's content
	Glibc   string `json:"glibc,omitempty"`  // the newest glibc symbol version it defines
	Source  string `json:"source,omitempty"` // where it came from
	// Cached is true when the sysroot step found the tree made.
	Cached bool `json:"-"`
}

// Placeholders for the sysroot's paths in plans.
const (
	SysrootPlaceholder    = "$SYSROOT"
	SysrootRunPlaceholder = "$SYSROOT_RUN"
)

// Runtime is the C++ runtime (matrix runtimes) a cell's C++ compiles and
// links use instead of the compiler's and the sysroot's own: its headers
// come before every other C++ header, its static archives before the
// compiler's (-static-libstdc++ -static-libgcc then take them).
type Runtime struct {
	Name string `json:"name"`
	// Libstdcxx is the GCC release of its C++ library ("12"): its headers
	// are under include/c++/<Libstdcxx>.
	Libstdcxx string `json:"libstdcxx"`
	// Glibc is the glibc it was built against.
	Glibc string `json:"glibc"`
	// Key is the key of the build step that makes it.
	Key string `json:"key,omitempty"`
	// Path is the made runtime (its include/ and lib/), set by the build's
	// runtime step.
	Path string `json:"-"`
}

// RuntimePlaceholder names the made runtime in what is keyed before it
// is made (the sysroot check's key): the runtime's own key stands for it.
const RuntimePlaceholder = "$CXXRT"

// RuntimeDir is where a cell's made runtime is, under its toolchain
// directory (the plans' $TOOLCHAIN), read-only to every step.
const RuntimeDir = "cxxrt"

// runtimeFlags are the flags that make C++ compiles (cxx) and every link
// (link) use the runtime at path; none without a runtime.
func (tc *Toolchain) runtimeFlags(path string) (cxx, link []string) {
	rt := tc.Runtime
	if rt == nil {
		return nil, nil
	}
	if path == "" {
		path = rt.Path
	}
	inc := path + "/include/c++/" + rt.Libstdcxx
	return []string{"-nostdinc++", "-isystem", inc, "-isystem", inc + "/" + tc.Cell.ISA.Triple, "-isystem", inc + "/backward"},
		[]string{"-L" + path + "/lib"}
}

// sysrootFlags are the flags that make the compiler use the sysroot; the
// compiler's runtime (libgcc) and the C++ runtime (the C++ driver's links
// only) are linked statically, as Doris ships them, so the target OS's
// libstdc++ version does not matter.
func (tc *Toolchain) sysrootFlags(path string) (compile, runtime, cxxRuntime []string) {
	if tc.Sysroot == nil {
		return nil, nil, nil
	}
	if path == "" {
		path = tc.Sysroot.Path
	}
	return []string{"--sysroot=" + path}, []string{"-static-libgcc"}, []string{"-static-libstdc++"}
}

// probeProgram is compiled and linked against the sysroot to check that the
// compiler really uses its libraries (and its C++ runtime) only.
const probeProgram = `#include <string>
#include <thread>
#include <cstdio>
int main(int argc, char **argv) {
    std::string s(argv[0]);
    std::thread t([&] { s += "!"; });
    t.join();
    std::printf("%zu\n", s.size() + argc);
    return 0;
}
`

// checkSysroot builds the probe with the cell's flags and fails unless the
// result needs no glibc symbol version newer than the target OS has. GCC 12
// as Debian ships it fails here: its libstdc++.a and libgcc_eh.a were built
// against glibc 2.36 and need __libc_single_threaded (2.32), _dl_find_object
// (2.35) and arc4random (2.36), and its own crt files come first.
func (tc *Toolchain) checkSysroot(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "dorisarm-sysroot-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "probe.cc")
	if err := os.WriteFile(src, []byte(probeProgram), 0o644); err != nil {
		return err
	}
	f, err := tc.Flags(FlagOptions{NoLTO: true})
	if err != nil {
		return err
	}
	out := filepath.Join(dir, "probe")
	args := append(append(append([]string{}, f.CompileCXX()...), "-O1", "-pthread", src, "-o", out), f.LinkFor(true)...)
	if b, err := exec.CommandContext(ctx, tc.CXX, args...).CombinedOutput(); err != nil {
		// Only the compiler's own answer is a verdict: it ran to its end
		// and said no. A signal (Ctrl-C reaches the whole process group),
		// a cancelled build or a failed start says nothing about it.
		var ee *exec.ExitError
		if ctx.Err() != nil || !errors.As(err, &ee) || !ee.Exited() {
			return fmt.Errorf("running %s for the sysroot check: %w", tc.CXX, cmp.Or(ctx.Err(), err))
		}
		return &probeFailure{fmt.Sprintf("%s cannot link C++ against sysroot %s (glibc %s): %s", tc.Compiler.Name, tc.Sysroot.Name, tc.Sysroot.Glibc, firstLines(string(b), 4))}
	}
	need, sym, err := maxGlibc(out)
	if err != nil {
		return err
	}
	ceiling := tc.Cell.OS.Glibc
	if need != "" && versionLess(ceiling, need) {
		return &probeFailure{fmt.Sprintf("%s links C++ against sysroot %s but the result needs %s@GLIBC_%s, newer than %s's glibc %s (its own C++ runtime or start files were built for a newer glibc)",
			tc.Compiler.Name, tc.Sysroot.Name, sym, need, tc.Cell.OS.ID, ceiling)}
	}
	return nil
}

// ProbeKey is the digest of everything the sysroot check depends on: the
// C++ compiler binary, its flags, the sysroot's key, the glibc ceiling and
// the probe program. The build's probe step is keyed by it.
func (tc *Toolchain) ProbeKey() (string, error) {
	// Where the compiler and its tools are installed is not part of it:
	// the flags name them by placeholders, and their bytes count.
	f, err := tc.Flags(FlagOptions{NoLTO: true, Sysroot: SysrootPlaceholder, ToolHome: "$TOOLCHAIN", Runtime: RuntimePlaceholder})
	if err != nil {
		return "", err
	}
	bin := tc.Identity.Tools["c++"] // Resolve sets it
	if bin == "" {
		bin = "path " + tc.CXX // a toolchain made by hand
	}
	h := sha256.New()
	fmt.Fprintf(h, "cxx %s\nflags %q %q\nsysroot %s\nglibc %s\n%s", bin, f.CompileCXX(), f.LinkFor(true), tc.Sysroot.Key, tc.Cell.OS.Glibc, probeProgram)
	if rt := tc.Runtime; rt != nil {
		fmt.Fprintf(h, "\nruntime %s %s", rt.Name, rt.Key)
	}
	for _, role := range slices.Sorted(maps.Keys(tc.Identity.Tools)) {
		fmt.Fprintf(h, "\ntool %s %s", role, tc.Identity.Tools[role])
	}
	for _, part := range slices.Sorted(maps.Keys(tc.Identity.Parts)) {
		fmt.Fprintf(h, "\npart %s %s", part, tc.Identity.Parts[part])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// knownSysrootFailure is the failure the sysroot check of this compiler,
// flags and sysroot left in dir, if any: planning skips such a compiler
// without running anything.
func (tc *Toolchain) knownSysrootFailure(dir string) error {
	if dir == "" || tc.Sysroot == nil {
		return nil
	}
	key, err := tc.ProbeKey()
	if err != nil {
		return nil // the build's probe step says what is wrong
	}
	f := filepath.Join(dir, key+".fail")
	if why, err := os.ReadFile(f); err == nil && len(why) > 0 {
		return &Rejected{Compiler: tc.Compiler.Name, Why: string(why), Verdict: f}
	}
	return nil
}

// CheckSysroot runs the sysroot check (the made sysroot must be in
// tc.Sysroot.Path) unless dir remembers its verdict, and remembers it. It
// says whether the verdict came from dir. A failure is remembered too: the
// same compiler, flags and sysroot fail the same way, and the next plan
// skips the compiler.
//
// A failure it did not remember (an interrupted check, a compiler that
// could not start) is returned as it is; a remembered one as a
// *Rejected.
func (tc *Toolchain) CheckSysroot(ctx context.Context, dir string) (cached bool, err error) {
	if dir == "" {
		return false, tc.checkSysroot(ctx)
	}
	key, err := tc.ProbeKey()
	if err != nil {
		return false, err
	}
	base := filepath.Join(dir, key)
	if _, err := os.Stat(base + ".ok"); err == nil {
		return true, nil
	}
	if why, err := os.ReadFile(base + ".fail"); err == nil && len(why) > 0 {
		return true, &Rejected{Compiler: tc.Compiler.Name, Why: string(why), Verdict: base + ".fail"}
	}
	err = tc.checkSysroot(ctx)
	var pf *probeFailure
	switch {
	case err == nil:
		// A cache: losing it costs one probe.
		if os.MkdirAll(dir, 0o755) == nil {
			os.WriteFile(base+".ok", nil, 0o644)
		}
	case errors.As(err, &pf):
		rej := &Rejected{Compiler: tc.Compiler.Name, Why: err.Error()}
		if werr := os.MkdirAll(dir, 0o755); werr == nil {
			if werr = fsutil.WriteFileAtomic(base+".fail", []byte(err.Error()), 0o644); werr == nil {
				rej.Verdict = base + ".fail"
			}
		}
		return false, rej
	}
	return false, err
}

// Rejected is a compiler the sysroot check found unable to build for the
// sysroot. Verdict is the file that remembers it ("" when it could not be
// written): planning skips the compiler while it is there.
type Rejected struct {
	Compiler, Why, Verdict string
}

func (e *Rejected) Error() string {
	if e.Verdict == "" {
		return e.Why + " (the verdict could not be remembered: the sysroot cache is not writable)"
	}
	return fmt.Sprintf("%s\n(remembered in %s: plans skip %s for this target while that file is there; remove it to check again)", e.Why, e.Verdict, e.Compiler)
}

// probeFailure is the probe built, or not, with a verdict that only
// depends on the compiler, its flags and the sysroot (not an I/O error).
type probeFailure struct{ msg string }

func (e *probeFailure) Error() string { return e.msg }

// maxGlibc is the newest GLIBC_ version an executable needs, and one symbol that needs it.
func maxGlibc(path string) (string, string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil {
		return "", "", err
	}
	best, which := "", ""
	for _, s := range syms {
		v, ok := strings.CutPrefix(s.Version, "GLIBC_")
		if !ok {
			continue
		}
		if best == "" || versionLess(best, v) {
			best, which = v, s.Name
		}
	}
	return best, which, nil
}

func versionLess(a, b string) bool {
	va, err1 := version.NewVersion(a)
	vb, err2 := version.NewVersion(b)
	if err1 != nil || err2 != nil {
		return a < b
	}
	return va.LessThan(vb)
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// SeenAt is tc as the programs of a build step see it when the step's
// namespace shows the sysroot, its uncapped twin and the C++ runtime at
// other paths than this machine's (a fixed path, so that what compilers
// record is the same on every machine): a copy naming those paths, for
// the flags, wrappers and CMake toolchain file the step uses. An empty
// path keeps this machine's.
func (tc *Toolchain) SeenAt(sysroot, sysrootRun, runtime string) *Toolchain {
	c := *tc
	if tc.Sysroot != nil {
		s := *tc.Sysroot
		if sysroot != "" {
			s.Path = sysroot
		}
		if sysrootRun != "" {
			s.RunPath = sysrootRun
		}
		c.Sysroot = &s
	}
	if tc.Runtime != nil && runtime != "" {
		rt := *tc.Runtime
		rt.Path = runtime
		c.Runtime = &rt
	}
	return &c
}
