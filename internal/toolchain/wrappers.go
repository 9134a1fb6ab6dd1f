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
	return tc.WriteWrappersSeenAt(dir, dir, f, log)
}

// WriteWrappersSeenAt is WriteWrappers for a home written at dir and seen
// at seen by the programs that use it (a step's namespace shows the
// cell's compiler home at a fixed path): what the home's files and the
// returned Wrappers name is under seen, what is written is under dir.
func (tc *Toolchain) WriteWrappersSeenAt(dir, seen string, f Flags, log string) (*Wrappers, error) {
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
	seenBin := filepath.Join(seen, "bin")
	w := &Wrappers{Home: seen, CC: filepath.Join(seenBin, ccName), CXX: filepath.Join(seenBin, cxxName), Log: log, Tools: map[string]string{}, dir: dir}
	for _, d := range []struct {
		name, real string
		cxx        bool
	}{{ccName, tc.CC, false}, {cxxName, tc.CXX, true}} {
		if err := writeNew(filepath.Join(bin, d.name), []byte(tc.wrapperScript(d.real, f, log, d.cxx)), 0o755); err != nil {
			return nil, err
		}
	}
	for _, role := range slices.Sorted(maps.Keys(tc.Tools)) {
		name := toolName(role, tc.Compiler.Dialect)
		link := filepath.Join(bin, name)
		_ = os.Remove(link)
		if err := os.Symlink(tc.Tools[role], link); err != nil {
			return nil, err
		}
		w.Tools[role] = filepath.Join(seenBin, name)
	}
	if err := tc.writeCrossEnv(w); err != nil {
		return nil, err
	}
	return w, nil
}

// wrapperScript is the driver real (the C++ driver when cxx) with the cell's
// flags. It adds no flag the driver would report unused, so a -Werror
// configure check sees what a native compiler would: link flags only when
// it links (inputs and no -c, -S, -E, -M, -MM, -fsyntax-only, -print-*,
// --version), the runtime flags only when it links the runtime libraries
// (not -r, -nostdlib, -nodefaultlibs), the C++ runtime flags only in the C++
// driver (and not with -nostdlib++), no recording or profile flags when
// every input is plain assembly (.s, -x assembler), and only --target and
// --sysroot when there is no input at all (-v, --version, -print-*).
// cmakeHostPathCheck runs at the end of a package's configure and warns,
// naming the variable and the path, of every header or library path in
// its cache that is on the build machine (outside the find roots, the
// source and the build tree: set explicitly, or found with
// NO_CMAKE_FIND_ROOT_PATH), and of every library taken from the sysroot
// whose name installed/ (the first find root) also has.
const cmakeHostPathCheck = `get_property(_dorisarm_checking GLOBAL PROPERTY DORISARM_HOST_PATH_CHECK)
if(NOT _dorisarm_checking AND NOT CMAKE_VERSION VERSION_LESS 3.19)
  set_property(GLOBAL PROPERTY DORISARM_HOST_PATH_CHECK ON)
  function(_dorisarm_host_path_check)
    list(GET CMAKE_FIND_ROOT_PATH 0 _installed)
    get_cmake_property(_vars CACHE_VARIABLES)
    foreach(_v IN LISTS _vars)
      if(_v MATCHES "^CMAKE_" OR NOT _v MATCHES "(INCLUDE|LIBRAR|_DIR$|_PATH$|^pkgcfg_lib_)")
        continue()
      endif()
      get_property(_t CACHE "${_v}" PROPERTY TYPE)
      if(_t STREQUAL "INTERNAL" OR _t STREQUAL "STATIC")
        continue()
      endif()
      foreach(_p IN LISTS ${_v})
        if(NOT IS_ABSOLUTE "${_p}")
          continue()
        endif()
        set(_inside "")
        foreach(_r IN LISTS CMAKE_FIND_ROOT_PATH CMAKE_SYSROOT CMAKE_SOURCE_DIR CMAKE_BINARY_DIR)
          string(FIND "${_p}/" "${_r}/" _at)
          if(_r AND _at EQUAL 0)
            set(_inside "${_r}")
            break()
          endif()
        endforeach()
        if(NOT _inside)
          message(WARNING "dorisarm: ${_v}=${_p} is on the build machine, outside the sysroot and installed/ (${_installed}): the host's copy leaks into the target build")
        elseif(NOT _inside STREQUAL _installed AND NOT IS_DIRECTORY "${_p}" AND _p MATCHES "/lib([^/]+)\\.(a|so)[.0-9]*$")
          file(GLOB _same "${_installed}/lib*/lib${CMAKE_MATCH_1}.a" "${_installed}/lib*/lib${CMAKE_MATCH_1}.so")
          if(_same)
            message(WARNING "dorisarm: ${_v}=${_p} is the sysroot's, but installed/ has ${_same}")
          endif()
        endif()
      endforeach()
    endforeach()
  endfunction()
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _dorisarm_host_path_check)
endif()
`

// findRoot is where the target's own headers and libraries are: the
// sysroot, the cross compiler's target directory without one, nothing for
// a native build without one.
func (tc *Toolchain) findRoot() string {
	switch {
	case tc.Sysroot != nil:
		return tc.Sysroot.Path
	case tc.Cross:
		return tc.Cell.ISA.Sysroot
	}
	return ""
}

func (tc *Toolchain) wrapperScript(real string, f Flags, log string, cxx bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# Written by dorisarm for target %s with %s %s. Do not edit.\n",
		tc.Cell.Target.Name, tc.Identity.Name, tc.Identity.Version)
	b.WriteString(wrapperScan)
	if cxx && len(f.CXXInclude) > 0 {
		// The C++ runtime's headers, only where the driver compiles a
		// source (clang calls -nostdinc++ unused in a link or a question,
		// an error under -Werror).
		fmt.Fprintf(&b, "if [ \"$src\" = 1 ]; then set -- %s \"$@\"; fi\n", shellJoin(f.CXXInclude))
	}
	fmt.Fprintf(&b, "if [ \"$inputs\" = 0 ]; then set -- %s \"$@\"\nelif [ \"$asm\" = 1 ] && [ \"$other\" = 0 ]; then set -- %s \"$@\"\nelse set -- %s \"$@\"; fi\n",
		shellJoin(f.Query()), shellJoin(f.Assemble()), shellJoin(f.Compile()))
	fmt.Fprintf(&b, "if [ \"$link\" = 1 ]; then\n  set -- \"$@\" %s\n", shellJoin(f.Link))
	if len(f.Runtime) > 0 {
		fmt.Fprintf(&b, "  if [ \"$rt\" = 1 ]; then set -- \"$@\" %s; fi\n", shellJoin(f.Runtime))
	}
	if cxx && len(f.CXXRuntime) > 0 {
		fmt.Fprintf(&b, "  if [ \"$rt\" = 1 ] && [ \"$cxxrt\" = 1 ]; then set -- \"$@\" %s; fi\n", shellJoin(f.CXXRuntime))
	}
	b.WriteString("fi\n")
	if log != "" {
		fmt.Fprintf(&b, "printf '%%s\\t%%s\\n' \"$PWD\" \"%s $*\" >> %s\n", real, shellQuote(log))
	}
	fmt.Fprintf(&b, "exec %s \"$@\"\n", shellQuote(real))
	return b.String()
}

// wrapperScan reads a driver's arguments: whether it links (it has inputs
// and no option that stops before the link), whether it links the runtime
// libraries, whether its inputs are all plain assembly, and whether it
// compiles a source (src: a C, C++ or preprocessed file, standard input,
// or an input of a -x language). Options whose
// value is the next argument are skipped with it, so "-o x.s" is no input.
const wrapperScan = `link=1 inputs=0 rt=1 cxxrt=1 asm=0 other=0 src=0 lang= skip=
for a in "$@"; do
  if [ -n "$skip" ]; then
    [ "$skip" = -x ] && lang=$a
    skip=
    continue
  fi
  case "$a" in
  -c|-S|-E|-M|-MM|-fsyntax-only|--version|-dumpmachine|-dumpversion|-dumpfullversion|-print-*|--print-*|'-###') link=0 ;;
  -r|-nostdlib|-nodefaultlibs) rt=0 ;;
  -nostdlib++) cxxrt=0 ;;
  -x|-o|-I|-L|-D|-U|-include|-imacros|-isystem|-idirafter|-iquote|-iprefix|-iwithprefix|-iwithprefixbefore|-isysroot|-Xlinker|-Xassembler|-Xpreprocessor|-Xclang|-MF|-MT|-MQ|-u|-T|-z|-e|--param|-target|-arch|-mllvm|-aux-info) skip=$a ;;
  -x*) lang=${a#-x} ;;
  -) inputs=1; if [ "$lang" = assembler ]; then asm=1; else other=1 src=1; fi ;;
  -*) ;;
  *) inputs=1
    case "$lang" in
    assembler) asm=1 ;;
    ''|none) case "$a" in
      *.s) asm=1 ;;
      *.c|*.cc|*.cp|*.cxx|*.cpp|*.CPP|*.c++|*.C|*.i|*.ii|*.h|*.hh|*.hpp|*.hxx|*.h++|*.H|*.tcc) other=1 src=1 ;;
      *) other=1 ;;
      esac ;;
    *) other=1 src=1 ;;
    esac ;;
  esac
done
[ "$inputs" = 1 ] || link=0
`

// CMakeToolchainFile returns a CMake toolchain file for the cell that uses the
// wrappers. For cross builds it sets CMAKE_SYSTEM_NAME and the target's
// CMAKE_SYSTEM_PROCESSOR (aarch64, whatever the host calls itself) and runs
// try_run programs under qemu; native builds keep CMake's own detection (setting
// CMAKE_SYSTEM_NAME would make CMake believe it cross-compiles). cache pins
// cache entries (FORCE) that packages would otherwise derive from the build
// host, such as vectorscan's BUILD_SVE or OpenBLAS's TARGET.
//
// Headers, libraries and packages are found only under installed (the
// cell's thirdparty/installed: the packages dorisarm built, first, so
// Doris's own OpenSSL wins over the sysroot's) and the sysroot: the find
// root path modes are ONLY, so the build machine's /usr/include and
// /usr/lib are never searched (protobuf found the host's zlib.h with
// BOTH). Programs are the build machine's (NEVER). A native build with no
// sysroot (a waiver) searches the build machine, which is its target.
func (tc *Toolchain) CMakeToolchainFile(w *Wrappers, cache map[string]string, installed ...string) string {
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
	if root := tc.findRoot(); root != "" {
		var roots []string
		for _, d := range installed {
			if d != "" {
				roots = append(roots, d)
			}
		}
		roots = append(roots, root)
		var q []string
		for _, r := range roots {
			q = append(q, fmt.Sprintf("%q", r))
		}
		fmt.Fprintf(&b, "set(CMAKE_FIND_ROOT_PATH %s)\n", strings.Join(q, " "))
		b.WriteString("set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)\n")
		b.WriteString("set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)\n")
		b.WriteString("set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)\n")
		b.WriteString("set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)\n")
		b.WriteString(cmakeHostPathCheck)
	}
	if tc.Cross {
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
