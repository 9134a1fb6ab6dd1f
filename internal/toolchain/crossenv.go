package toolchain

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

//go:embed cshim/dorisarm-exec.c
var execShimSource []byte

// The cross environment: what a package's own build scripts see while a step
// runs. Doris's scripts are written for native builds (uname -m decides the
// ARM paths, Makefiles call gcc, ld and ar by their plain names, configure
// runs the programs it compiles), so the generated compiler home makes the
// target look native, in the spirit of Scratchbox2:
//
//   - bin/ comes first on PATH and holds the target's compiler under every
//     plain name (cc, c++, gcc, g++, cpp; clang, clang++ for clang dialects)
//     and its binutils (ld, ar, as, ranlib, nm, strip, objcopy, objdump,
//     readelf), so a Makefile that hard-codes CC=gcc still builds for the target;
//   - bin/uname answers -m, -p and -i with the target machine (cross builds);
//   - config.site (CONFIG_SITE) makes every autoconf configure a cross build
//     for the target triple, so it never tries to run what it compiles;
//   - CC_FOR_BUILD, CXX_FOR_BUILD, BUILD_CC and HOSTCC name the host's own
//     compilers for build-time helpers, which is the only way to reach them
//     (host-bin/cc and c++, which take bin/ off PATH again, or the host's GCC
//     would find the target's as and ld there);
//   - a target program the build runs anyway (a generated code tool, a test)
//     runs under qemu-user on the target's CPU model: through binfmt_misc
//     where the machine has it (QEMU_CPU selects the model), otherwise
//     through an exec shim (see ExecShim).

// CrossEnvVersion changes whenever what writeCrossEnv, the wrapper scripts
// or the CMake toolchain file say changes, so cached steps built in an
// older cross environment are not reused (3: find root path modes ONLY,
// installed/ a find root; wrappers add no flag a driver reports unused;
// 4: steps see the tree, homes and sysroot at fixed paths, /dorisarm/...).
const CrossEnvVersion = "4"

// plainTools are the binutils names a package may call without a prefix.
var plainTools = []string{"ld", "ar", "as", "ranlib", "nm", "strip", "objcopy", "objdump", "readelf"}

// writeCrossEnv completes a compiler home written by WriteWrappers.
func (tc *Toolchain) writeCrossEnv(w *Wrappers) error {
	bin := filepath.Join(w.written(), "bin")
	seenBin := filepath.Join(w.Home, "bin")
	link := func(target, name string) error {
		p := filepath.Join(bin, name)
		if _, err := os.Lstat(p); err == nil {
			return nil // the dialect's own name (gcc, ld.lld) was written first
		}
		return os.Symlink(target, p)
	}
	ccName, cxxName := tc.driverNames()
	for _, name := range []string{"cc", "gcc"} {
		if err := link(ccName, name); err != nil {
			return err
		}
	}
	for _, name := range []string{"c++", "g++"} {
		if err := link(cxxName, name); err != nil {
			return err
		}
	}
	script := func(name, body string) error {
		return writeNew(filepath.Join(bin, name), []byte("#!/bin/sh\n# Written by dorisarm for target "+tc.Cell.Target.Name+". Do not edit.\n"+body), 0o755)
	}
	// The host's compilers, for build-time helpers, without bin/ on PATH.
	hostBin := filepath.Join(w.written(), "host-bin")
	if err := os.MkdirAll(hostBin, 0o755); err != nil {
		return err
	}
	dropBin := fmt.Sprintf(`PATH=$(printf '%%s' "$PATH" | sed "s|%s:||g")`, seenBin)
	for _, name := range []string{"cc", "c++"} {
		real, err := lookPath(name)
		if err != nil {
			continue // no host compiler: CC_FOR_BUILD names a missing program
		}
		body := fmt.Sprintf("#!/bin/sh\n# The build machine's %s, for build-time helpers. Written by dorisarm.\n%s\nexport PATH\nexec %s \"$@\"\n", name, dropBin, shellQuote(real))
		if err := writeNew(filepath.Join(hostBin, name), []byte(body), 0o755); err != nil {
			return err
		}
	}
	if err := script("cpp", fmt.Sprintf("exec %s -E \"$@\"\n", shellQuote(w.CC))); err != nil {
		return err
	}
	for _, role := range plainTools {
		if p := w.Tools[role]; p != "" {
			if err := link(p, role); err != nil {
				return err
			}
			continue
		}
		if role == "as" {
			// Clang has no separate assembler binary: its integrated one, as the driver does it.
			if err := script("as", fmt.Sprintf("exec %s -c -x assembler \"$@\"\n", shellQuote(w.CC))); err != nil {
				return err
			}
		}
	}
	if !tc.Cross {
		return nil
	}
	tc.writeExecLib(w)
	if tc.Host == nil {
		return fmt.Errorf("matrix.yaml has no isas entry for this machine (%s): a cross build needs its triple and gnu_type", HostISA())
	}
	machine := tc.Cell.ISA.Name
	uname := fmt.Sprintf(`real=$(%s command -v uname)
case "$*" in
  -m|-p|-i|--machine|--processor|--hardware-platform) echo %s ;;
  -a|--all) "$real" -snrv | tr '\n' ' '; echo %s %s %s GNU/Linux ;;
  *) exec "$real" "$@" ;;
esac
`, dropBin, machine, machine, machine, machine)
	if err := script("uname", uname); err != nil {
		return err
	}
	site := fmt.Sprintf(`# Written by dorisarm for target %s. Do not edit.
# Every autoconf configure is a cross build for the target: it never runs what it compiles.
cross_compiling=yes
host_alias=${host_alias:-%s}
build_alias=${build_alias:-%s}
ac_cv_host=${ac_cv_host:-%s}
ac_cv_build=${ac_cv_build:-%s}
`, tc.Cell.Target.Name, tc.Cell.ISA.Triple, tc.Host.Triple, tc.Cell.ISA.GNUType, tc.Host.GNUType)
	_ = os.Remove(filepath.Join(w.written(), "config.site"))
	return writeNew(filepath.Join(w.written(), "config.site"), []byte(site), 0o644)
}

// crossEnv is the environment of the cross environment (Env adds it).
func (tc *Toolchain) crossEnv(w *Wrappers) []string {
	hostCC, hostCXX := w.Home+"/host-bin/cc", w.Home+"/host-bin/c++"
	env := []string{
		"CC_FOR_BUILD=" + hostCC, "CXX_FOR_BUILD=" + hostCXX,
		"BUILD_CC=" + hostCC, "HOSTCC=" + hostCC, "HOSTCXX=" + hostCXX,
	}
	if tc.Cross {
		env = append(env, "CONFIG_SITE="+w.Home+"/config.site", "QEMU_CPU="+tc.Cell.Qemu.Name, "QEMU_LD_PREFIX="+tc.Cell.ISA.Sysroot)
	}
	return env
}

// Shim is how a step of a cross build runs the target programs it starts:
// under qemu-user with the target's CPU model.
type Shim struct {
	Kind   string   // "binfmt_misc", "preload", "proot" or "" (native)
	Prefix []string // the command the step runs under (proot)
	Env    []string // added to the step's environment
}

// ExecShim picks the way a cross build's steps run target programs:
// binfmt_misc where the machine hands the target's executables to qemu
// (QEMU_CPU in the step's environment selects the model); otherwise
// dorisarm's exec shim (cshim/dorisarm-exec.c, compiled into the compiler home by
// WriteWrappers), which host programs load with LD_PRELOAD and which starts
// target executables under the emulator at native speed; where that could
// not be compiled, Debian's proot -q, which traces every process of the step
// (about twice as slow).
func (tc *Toolchain) ExecShim(w *Wrappers, binfmtDir string) (Shim, error) {
	if !tc.Cross {
		return Shim{}, nil
	}
	if binfmtEnabled(binfmtDir, tc.Cell.ISA.Qemu) {
		return Shim{Kind: "binfmt_misc"}, nil
	}
	emu := tc.Emulator()
	qemu, err := lookPath(emu[0])
	if err != nil {
		return Shim{}, fmt.Errorf("target %s is a cross build: %s is not installed (apt-get install qemu-user)", tc.Cell.Target.Name, emu[0])
	}
	emu[0] = qemu
	if w != nil && w.ExecLib != "" {
		if _, err := os.Stat(w.writtenPath(w.ExecLib)); err == nil {
			return Shim{Kind: "preload", Env: []string{
				"LD_PRELOAD=" + w.ExecLib,
				"DORISARM_EXEC_MACHINE=" + fmt.Sprint(tc.Cell.ISA.ELFMachine),
				"DORISARM_EXEC_EMULATOR=" + strings.Join(emu, " "),
			}}, nil
		}
	}
	proot, err := lookPath("proot")
	if err != nil {
		return Shim{}, fmt.Errorf("target %s is a cross build, this machine has no binfmt_misc entry for %s and dorisarm's exec shim could not be compiled (is a host C compiler, cc, installed?): install gcc, or proot (apt-get install proot), which runs the target programs a build starts under %s",
			tc.Cell.Target.Name, tc.Cell.ISA.Qemu, tc.Cell.ISA.Qemu)
	}
	return Shim{Kind: "proot", Prefix: []string{proot, "-q", strings.Join(emu, " ")}}, nil
}

// writeExecLib compiles the exec shim for the host into the compiler home.
func (tc *Toolchain) writeExecLib(w *Wrappers) {
	cc, err := lookPath("cc")
	if err != nil {
		return
	}
	src := filepath.Join(w.written(), "lib", "dorisarm-exec.c")
	lib := filepath.Join(w.written(), "lib", "dorisarm-exec.so")
	seenLib := filepath.Join(w.Home, "lib", "dorisarm-exec.so")
	if os.MkdirAll(filepath.Dir(src), 0o755) != nil || writeNew(src, execShimSource, 0o644) != nil {
		return
	}
	execLibMu.Lock()
	defer execLibMu.Unlock()
	if built, ok := execLibBuilt[cc]; ok {
		// Compiled once per process (a build has a home per phase).
		if writeNew(lib, built, 0o755) == nil {
			w.ExecLib = seenLib
		}
		return
	}
	cmd := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", lib, src, "-ldl")
	// The host's compiler, with the host's tools: not the cross environment's PATH.
	cmd.Env = append(os.Environ(), "LD_PRELOAD=")
	if cmd.Run() == nil {
		w.ExecLib = seenLib
		if data, err := os.ReadFile(lib); err == nil {
			execLibBuilt[cc] = data
		}
	}
}

var (
	execLibMu    sync.Mutex
	execLibBuilt = map[string][]byte{} // host cc → the compiled shim
)

// binfmtEnabled reports whether binfmt_misc hands executables to qemu (the
// entry Debian's qemu-user-binfmt registers is named after the emulator).
func binfmtEnabled(dir, qemu string) bool {
	if dir == "" {
		dir = "/proc/sys/fs/binfmt_misc"
	}
	data, err := os.ReadFile(filepath.Join(dir, filepath.Base(qemu)))
	return err == nil && bytes.HasPrefix(data, []byte("enabled"))
}

var lookPath = func(name string) (string, error) {
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH", name)
}
