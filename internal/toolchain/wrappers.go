package toolchain

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// writeNew creates path, which must not exist: it never follows a link.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteWrappers writes a compiler home under dir whose gcc/g++ (or clang/clang++)
// run the real compiler with the cell's flags and log every invocation to log.
// Target flags come first so a package's own -march still wins, exactly as it
// would on a native build (the scanner then proves what landed); link flags are
// added only when the driver links.
func (tc *Toolchain) WriteWrappers(dir string, f Flags, log string) (*Wrappers, error) {
	bin := filepath.Join(dir, "bin")
	// A home is written afresh: what an earlier write left there (a link to
	// a real tool under a name this write gives a script) must never be
	// written through.
	for _, d := range []string{"bin", "host-bin", "lib"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	ccName, cxxName := tc.driverNames()
	w := &Wrappers{Home: dir, CC: filepath.Join(bin, ccName), CXX: filepath.Join(bin, cxxName), Log: log, Tools: map[string]string{}}
	for _, d := range []struct{ path, real string }{{w.CC, tc.CC}, {w.CXX, tc.CXX}} {
		if err := writeNew(d.path, []byte(tc.wrapperScript(d.real, f, log)), 0o755); err != nil {
			return nil, err
		}
	}
	for _, role := range slices.Sorted(maps.Keys(tc.Tools)) {
		link := filepath.Join(bin, toolName(role, tc.Compiler.Dialect))
		_ = os.Remove(link)
		if err := os.Symlink(tc.Tools[role], link); err != nil {
			return nil, err
		}
		w.Tools[role] = link
	}
	if err := tc.writeCrossEnv(w); err != nil {
		return nil, err
	}
	return w, nil
}

func (tc *Toolchain) wrapperScript(real string, f Flags, log string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# Written by dorisarm for target %s with %s %s. Do not edit.\n",
		tc.Cell.Target.Name, tc.Identity.Name, tc.Identity.Version)
	b.WriteString("link=1\nfor a in \"$@\"; do case \"$a\" in -c|-S|-E|-M|-MM|--version|-v|-dumpmachine|-dumpversion|-print-*) link=0;; esac; done\n")
	fmt.Fprintf(&b, "if [ \"$link\" = 1 ]; then set -- %s \"$@\" %s; else set -- %s \"$@\"; fi\n",
		shellJoin(f.Compile()), shellJoin(f.Link), shellJoin(f.Compile()))
	if log != "" {
		fmt.Fprintf(&b, "printf '%%s\\t%%s\\n' \"$PWD\" \"%s $*\" >> %s\n", real, shellQuote(log))
	}
	fmt.Fprintf(&b, "exec %s \"$@\"\n", shellQuote(real))
	return b.String()
}

// CMakeToolchainFile returns a CMake toolchain file for the cell that uses the
// wrappers. For cross builds it sets CMAKE_SYSTEM_NAME and the target's
// CMAKE_SYSTEM_PROCESSOR (aarch64, whatever the host calls itself) and runs
// try_run programs under qemu; native builds keep CMake's own detection (setting
// CMAKE_SYSTEM_NAME would make CMake believe it cross-compiles). cache pins
// cache entries (FORCE) that packages would otherwise derive from the build
// host, such as vectorscan's BUILD_SVE or OpenBLAS's TARGET.
func (tc *Toolchain) CMakeToolchainFile(w *Wrappers, cache map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by dorisarm for target %s (%s %s). Do not edit.\n", tc.Cell.Target.Name, tc.Identity.Name, tc.Identity.Version)
	if tc.Cross {
		b.WriteString("set(CMAKE_SYSTEM_NAME Linux)\n")
		fmt.Fprintf(&b, "set(CMAKE_SYSTEM_PROCESSOR %s)\n", tc.Cell.ISA.CMakeProcessor)
	}
	fmt.Fprintf(&b, "set(CMAKE_C_COMPILER %q)\n", w.CC)
	fmt.Fprintf(&b, "set(CMAKE_CXX_COMPILER %q)\n", w.CXX)
	for _, role := range []string{"ar", "ranlib", "nm", "objcopy", "strip"} {
		if p := w.Tools[role]; p != "" {
			fmt.Fprintf(&b, "set(CMAKE_%s %q CACHE FILEPATH \"\" FORCE)\n", strings.ToUpper(role), p)
		}
	}
	if tc.Sysroot != nil {
		fmt.Fprintf(&b, "set(CMAKE_SYSROOT %q)\n", tc.Sysroot.Path)
	}
	if tc.Cross {
		root := tc.Cell.ISA.Sysroot
		if tc.Sysroot != nil {
			root = tc.Sysroot.Path
		}
		fmt.Fprintf(&b, "set(CMAKE_FIND_ROOT_PATH %q)\n", root)
		b.WriteString("set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)\n")
		b.WriteString("set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)\n")
		b.WriteString("set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)\n")
		b.WriteString("set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)\n")
		fmt.Fprintf(&b, "set(CMAKE_CROSSCOMPILING_EMULATOR %q)\n", strings.Join(tc.Emulator(), ";"))
	}
	keys := make([]string, 0, len(cache))
	for k := range cache {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := cache[k]
		typ := "STRING"
		if v == "ON" || v == "OFF" {
			typ = "BOOL"
		}
		fmt.Fprintf(&b, "set(%s %q CACHE %s \"pinned by dorisarm for %s\" FORCE)\n", k, v, typ, tc.Cell.Target.Name)
	}
	return b.String()
}
