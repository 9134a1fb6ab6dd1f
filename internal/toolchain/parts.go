package toolchain

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/memo"
	"github.com/dorisarm/dorisarm/internal/source"
)

// A compiler is more than its driver: Debian's clang-16 is a small launcher
// whose code (and version string) is in libclang-cpp.so.16 and
// libLLVM-16.so.1; GCC's driver runs cc1, cc1plus and lto1, which load GMP,
// MPFR, MPC and ISL. matrix.yaml says, per compiler, which of these count
// (compilers.NAME.identity); their bytes join the driver's in the identity,
// so an upgraded libLLVM is another compiler to every cache key.

// maxObjects bounds the shared-library closure walked for one program.
const maxObjects = 512

// statDigest is the content digest of the file p resolves to, remembered
// in m by the file's identity and change times (device, inode, size,
// mtime, ctime: a write to the file changes ctime), so a plan on a warm
// machine does not read 190 MB of compiler libraries again.
func statDigest(p string, m memo.Dir) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return source.FileDigest(real)
	}
	key := memo.Key("file-digest", real,
		fmt.Sprint(st.Dev), fmt.Sprint(st.Ino), fmt.Sprint(st.Size),
		fmt.Sprint(st.Mtim.Nano()), fmt.Sprint(st.Ctim.Nano()))
	if b, ok := m.Get(key); ok && source.ValidDigest(string(b)) {
		return string(b), nil
	}
	d, err := source.FileDigest(real)
	if err != nil {
		return "", err
	}
	m.Put(key, []byte(d))
	return d, nil
}

// libraryDirs are the dynamic loader's default search directories on this
// machine: /etc/ld.so.conf (with its includes) then the built-in ones.
func libraryDirs() []string {
	var dirs []string
	seen := map[string]bool{}
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	var read func(file string, depth int)
	read = func(file string, depth int) {
		if depth > 8 {
			return
		}
		f, err := os.Open(file)
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for n := 0; sc.Scan() && n < 10000; n++ {
			line, _, _ := strings.Cut(sc.Text(), "#")
			line = strings.TrimSpace(line)
			if rest, ok := strings.CutPrefix(line, "include "); ok {
				pat := strings.TrimSpace(rest)
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(file), pat)
				}
				ms, _ := filepath.Glob(pat)
				slices.Sort(ms)
				for _, m := range ms {
					read(m, depth+1)
				}
				continue
			}
			if filepath.IsAbs(line) {
				add(filepath.Clean(line))
			}
		}
	}
	read("/etc/ld.so.conf", 0)
	for _, d := range []string{"/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
		add(d)
	}
	return dirs
}

// sharedClosure returns the shared libraries prog loads, directly or
// through each other, by DT_NEEDED name → the file the loader would pick.
// As glibc's loader searches: an object with DT_RUNPATH uses that alone;
// one without uses its DT_RPATH, then the DT_RPATH of the objects that
// loaded it (up to the program, each unless it has a DT_RUNPATH); then
// the default directories. $ORIGIN is the directory the program's real
// path is in, and for a library the one it was found in (a symlink's, not
// its target's). Like the loader, it passes over files built for another machine
// or class, such as the arm64 copies multiarch installs beside the
// host's. A library it cannot find is left out: the program could not
// run either, and the compiler's own check fails loudly.
func sharedClosure(prog string, dirs []string) (map[string]string, error) {
	type object struct {
		path      string   // as found: its directory is $ORIGIN
		inherited []string // DT_RPATH directories of the objects that loaded it
	}
	found := map[string]string{}
	real, err := filepath.EvalSymlinks(prog)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prog, err)
	}
	queue := []object{{path: real}}
	var class elf.Class
	var machine elf.Machine
	for len(queue) > 0 {
		obj := queue[0]
		queue = queue[1:]
		f, err := elf.Open(obj.path)
		switch {
		case err != nil && obj.path == real:
			return found, nil // not ELF (a script, a wrapper): no libraries of its own to name
		case err != nil:
			continue
		}
		if obj.path == real {
			class, machine = f.Class, f.Machine
		}
		needed, _ := f.ImportedLibraries()
		runpath, hasRunpath := dynPath(f, elf.DT_RUNPATH, obj.path)
		rpath, _ := dynPath(f, elf.DT_RPATH, obj.path)
		f.Close()
		search, pass := runpath, obj.inherited
		if !hasRunpath {
			search = append(slices.Clone(rpath), obj.inherited...)
			pass = search
		}
		for _, name := range needed {
			if _, ok := found[name]; ok || strings.Contains(name, "/") {
				continue
			}
			for _, d := range append(slices.Clone(search), dirs...) {
				p := filepath.Join(d, name)
				if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && elfFor(p, class, machine) {
					lib, err := filepath.EvalSymlinks(p)
					if err != nil {
						break
					}
					found[name] = lib
					if len(found) > maxObjects {
						return nil, fmt.Errorf("%s loads more than %d shared libraries", prog, maxObjects)
					}
					queue = append(queue, object{path: filepath.Clean(p), inherited: pass})
					break
				}
			}
		}
	}
	return found, nil
}

// dynPath is the directories of f's DT_RUNPATH or DT_RPATH, with $ORIGIN
// expanded to the directory of path; present says whether f has the tag
// at all (a DT_RUNPATH of directories this cannot expand still turns
// DT_RPATH off).
func dynPath(f *elf.File, tag elf.DynTag, path string) (dirs []string, present bool) {
	vals, _ := f.DynString(tag)
	origin := filepath.Dir(path)
	for _, v := range vals {
		for _, d := range strings.Split(v, ":") {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
			if filepath.IsAbs(d) {
				dirs = append(dirs, filepath.Clean(d))
			}
		}
	}
	return dirs, len(vals) > 0
}

// elfFor says whether p is an ELF object of class and machine.
func elfFor(p string, class elf.Class, machine elf.Machine) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var h [20]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:4]) != elf.ELFMAG {
		return false
	}
	var order binary.ByteOrder
	switch elf.Data(h[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		order = binary.LittleEndian
	case elf.ELFDATA2MSB:
		order = binary.BigEndian
	default:
		return false
	}
	return elf.Class(h[elf.EI_CLASS]) == class && elf.Machine(order.Uint16(h[18:20])) == machine
}

// libParts adds to parts the libraries of prog's closure whose names match
// the compiler's identity.libs, as "lib NAME" → content digest.
func libParts(parts map[string]string, prog string, globs []string, dirs []string, m memo.Dir) error {
	if len(globs) == 0 {
		return nil
	}
	libs, err := sharedClosure(prog, dirs)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(libs)) {
		if !slices.ContainsFunc(globs, func(g string) bool { ok, _ := path.Match(g, name); return ok }) {
			continue
		}
		d, err := statDigest(libs[name], m)
		if err != nil {
			return err
		}
		parts["lib "+name] = d
	}
	return nil
}

// compilerParts finds the compiler's parts beyond the driver (see the top
// of this file). The libraries come from reading ELF files; the programs'
// paths from the driver itself (-print-prog-name=), remembered by the
// digests of the driver and its libraries, so only a new compiler runs.
// A program the driver does not find is recorded as absent: installing it
// later changes the identity too.
func compilerParts(driver, driverDigest string, id matrix.CompilerIdentity, m memo.Dir) (libs, parts map[string]string, err error) {
	libs, parts = map[string]string{}, map[string]string{}
	dirs := libraryDirs()
	if err := libParts(libs, driver, id.Libs, dirs, m); err != nil {
		return nil, nil, err
	}
	for k, v := range libs {
		parts[k] = v
	}
	for _, name := range id.Programs {
		p, err := progName(driver, driverDigest, libs, name, m)
		if err != nil {
			return nil, nil, err
		}
		if !filepath.IsAbs(p) {
			parts["program "+name] = "absent"
			continue
		}
		d, err := statDigest(p, m)
		if errors.Is(err, os.ErrNotExist) {
			parts["program "+name] = "absent"
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		parts["program "+name] = d
		if err := libParts(parts, p, id.Libs, dirs, m); err != nil {
			return nil, nil, err
		}
	}
	return libs, parts, nil
}

// progName asks the driver where a program it runs is. A path is
// remembered by the driver's path (GCC finds its programs relative to
// where it is installed: two copies of one relocatable toolchain answer
// differently) and the digests of the driver and its libraries; it is
// asked again when the remembered program is gone. "Not found" (GCC
// prints the bare name) is not remembered, since installing the program
// changes the answer.
func progName(driver, driverDigest string, libs map[string]string, name string, m memo.Dir) (string, error) {
	abs, err := filepath.Abs(driver)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	key := memo.Key(append([]string{"print-prog-name", abs, real, driverDigest, name}, flatten(libs)...)...)
	if b, ok := m.Get(key); ok && filepath.IsAbs(string(b)) {
		if _, err := os.Stat(string(b)); err == nil {
			return string(b), nil
		}
	}
	out, err := exec.Command(driver, "-print-prog-name="+name).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%s -print-prog-name=%s: %w", driver, name, err)
	}
	p := strings.TrimSpace(string(out))
	if filepath.IsAbs(p) {
		m.Put(key, []byte(p))
	}
	return p, nil
}

// flatten lists a map as sorted "k=v" strings, for memo keys.
func flatten(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}
