package sysroot

import (
	"github.com/dorisarm/dorisarm/internal/memo"
	"github.com/dorisarm/dorisarm/internal/unpack"

	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// A glibc ceiling makes a sysroot link like an older glibc than the one it
// holds, the way Zig links for old glibc targets, but derived from the real
// libraries rather than from glibc's abilists: glibc never removes a symbol
// version, so the (symbol, version) pairs with version <= X that a newer
// libc.so.6 defines are the ABI of glibc X for that architecture.
//
// LimitGlibc replaces each glibc shared library of the tree with a stub of
// the same SONAME that defines only those pairs. Linking against the stubs
// fails, or the program cannot bind at run time, exactly when it would need
// a version the older glibc lacks. Headers, crt*.o and static archives
// (libc_nonshared.a, libc.a, ...) stay those of the newer glibc.

// Tools are a GNU assembler and linker that make objects and shared
// libraries for the sysroot's architecture. Binutils 2.35 or later is
// needed (.symver ..., remove).
type Tools struct {
	As string // e.g. aarch64-linux-gnu-as
	Ld string // e.g. aarch64-linux-gnu-ld
}

var reTriple = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_]+(-[a-z0-9_.]+){1,3}$`) })

// ToolsFor picks the binutils for a GNU triple (aarch64-linux-gnu,
// x86_64-linux-gnu, ...): <triple>-as and <triple>-ld when both are on PATH,
// else this machine's as and ld when `as --version` says it was configured
// for the triple (vendor fields aside).
func ToolsFor(triple string) (Tools, error) {
	if !reTriple().MatchString(triple) {
		return Tools{}, fmt.Errorf("%q is not a GNU triple such as aarch64-linux-gnu", triple)
	}
	as, aerr := exec.LookPath(triple + "-as")
	ld, lerr := exec.LookPath(triple + "-ld")
	if aerr == nil && lerr == nil {
		return Tools{As: as, Ld: ld}, nil
	}
	hint := fmt.Sprintf("no assembler and linker for %s: %s-as and %s-ld are not on PATH (Debian: apt-get install binutils-%s)",
		triple, triple, triple, strings.ReplaceAll(triple, "_", "-"))
	as, aerr = exec.LookPath("as")
	ld, lerr = exec.LookPath("ld")
	if aerr != nil || lerr != nil {
		return Tools{}, errors.New(hint)
	}
	out, err := exec.Command(as, "--version").Output()
	if err != nil {
		return Tools{}, errors.New(hint)
	}
	m := regexp.MustCompile("configured for a target of [`'\"]?([A-Za-z0-9_.-]+)").FindSubmatch(out)
	if m == nil || !sameTriple(string(m[1]), triple) {
		host := "an unknown target"
		if m != nil {
			host = string(m[1])
		}
		return Tools{}, fmt.Errorf("%s, and this machine's as is for %s", hint, host)
	}
	return Tools{As: as, Ld: ld}, nil
}

// sameTriple compares GNU triples without their vendor field:
// x86_64-pc-linux-gnu is x86_64-linux-gnu.
func sameTriple(a, b string) bool {
	norm := func(t string) string {
		f := strings.Split(t, "-")
		if len(f) == 4 {
			f = append(f[:1], f[2:]...)
		}
		return strings.Join(f, "-")
	}
	return norm(a) == norm(b)
}

// identity is what identifies the tools' output: the first lines of their
// --version. It is part of the cache key of a Spec with a glibc ceiling.
// A memo answers for a binary it has seen (by content digest).
func (t Tools) identity(ctx context.Context, m memo.Dir) (string, error) {
	var ids []string
	for _, tool := range []string{t.As, t.Ld} {
		sum, err := fileDigest(tool)
		if err != nil {
			return "", fmt.Errorf("%s: %w", tool, err)
		}
		out, err := m.Output(memo.Key("version", sum, "--version"), func() ([]byte, error) {
			return exec.CommandContext(ctx, tool, "--version").Output()
		})
		if err != nil {
			return "", fmt.Errorf("%s --version: %w", tool, err)
		}
		first, _, _ := strings.Cut(string(out), "\n")
		ids = append(ids, strings.TrimSpace(first))
	}
	return strings.Join(ids, "; "), nil
}

// fileDigest is the sha256 of the file a path resolves to.
func fileDigest(p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	f, err := os.Open(real)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// stubFormat is part of the cache key of a Spec with a glibc ceiling: bump it
// when the stubs LimitGlibc makes change.
const stubFormat = 3

var (
	reCeiling  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+\.[0-9]+(\.[0-9]+)?$`) })
	reStubName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(lib[^/]*|ld-[^/]*)\.so\.[0-9][0-9.]*$`) })
)

// glibcLimit is what limitGlibc did.
type glibcLimit struct {
	Release string   // the tree's glibc before
	Stubbed []string // the files replaced, relative to the root
	Removed []string // libraries glibc added after the ceiling
}

// errNewerLibrary is a glibc library with no symbol version at or below the ceiling.
var errNewerLibrary = errors.New("the library is newer than the glibc ceiling")

// LimitGlibc makes the sysroot at root link like glibc ceiling ("2.17"): it
// replaces every glibc shared library (each lib*.so.N and ld-*.so.N in
// lib/<triple>, usr/lib/<triple>, lib64, usr/lib64, lib and usr/lib that
// defines GLIBC_x.y versions and no versions but GLIBC_ ones: libc.so.6,
// libm.so.6, libpthread.so.0, ld-linux-aarch64.so.1, ...; through symlinks,
// the file they point to) with a stub shared library made with tools.
//
// A stub has the library's SONAME, its GLIBC_x.y version definitions up to
// the ceiling in their order and with their parents, and, for each dynamic
// symbol the library defines at such a version, a definition of the same
// binding and kind: a function (IFUNCs too) is one trap instruction, an
// object or TLS object is zeros of its size (aliases of one object stay
// aliases, as copy relocations need). Versions above the ceiling and the
// unnumbered GLIBC_PRIVATE and GLIBC_ABI_DT_RELR (2.36) are dropped with
// their symbols, so a program needing them
// fails to link ("undefined symbol") or to load.
//
// A symbol keeps its default (@@) version when that is at most the ceiling.
// When the default is above it, the symbol's highest remaining version
// becomes the default, as it was in the older glibc: exp, log, pow (2.29),
// glob (2.27), quick_exit (2.24) and fmemopen (2.22) link to their GLIBC_2.17
// versions on aarch64 under ceilings below those. Symbols that have no
// default version (compatibility symbols such as stime) stay hidden, as they
// are in the tree: a stub never accepts what the real library refuses.
//
// The stubs are made only for linking: they cannot run. libc.so.6's stub
// carries a banner, so GlibcVersion reports the ceiling afterwards, and
// GlibcDefinedVersion the highest version the architecture has at or below
// it (aarch64's first is 2.17). The output is deterministic for given tools.
//
// A ceiling at or above the tree's glibc changes nothing; one below the
// architecture's first glibc version is an error, and so is one below the
// default version of the tree's __libc_start_main (GLIBC_2.34 from glibc
// 2.34 on): the tree's crt1.o would start programs wrongly on the older
// glibc. Libraries for another machine than libc.so.6's (a 32-bit multilib)
// are left as they are.
//
// Limits: the stubs fix symbol versions only. The headers stay the tree's,
// so a declaration the newer headers redirect (fcntl to fcntl64@GLIBC_2.28
// under _FILE_OFFSET_BITS=64) makes a link fail under an older ceiling, and
// a struct or constant that changed without a new symbol version is not
// caught. Shared libraries that are not glibc's (libgcc_s.so.1,
// libstdc++.so.6) are kept, with their own glibc needs.
func LimitGlibc(root, ceiling string, tools Tools) error {
	_, err := limitGlibc(context.Background(), root, ceiling, tools)
	return err
}

func limitGlibc(ctx context.Context, root, ceiling string, tools Tools) (glibcLimit, error) {
	var res glibcLimit
	if !reCeiling().MatchString(ceiling) {
		return res, fmt.Errorf("glibc ceiling %q is not a version such as 2.17", ceiling)
	}
	cv, _ := parseVersion(ceiling)
	if tools.As == "" || tools.Ld == "" {
		return res, fmt.Errorf("limiting glibc to %s: no assembler or linker given (ToolsFor)", ceiling)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return res, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real == "/" {
		return res, fmt.Errorf("limiting glibc to %s: refusing to replace the libraries of this machine's root", ceiling)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return res, err
	}
	defer r.Close()

	release, defined, err := glibcVersions(root)
	if err != nil {
		return res, fmt.Errorf("limiting glibc to %s: %w", ceiling, err)
	}
	if release == "" {
		release = defined
	}
	res.Release = release
	if rv, _ := parseVersion(release); compareVersions(cv, rv) >= 0 {
		return res, nil
	}
	libcPath, err := findLibc(r)
	if err != nil {
		return res, err
	}
	libc, err := readLib(r, libcPath)
	if err != nil {
		return res, fmt.Errorf("%s: %w", libcPath, err)
	}
	if first := libc.firstGlibc(); first != nil && compareVersions(cv, first) < 0 {
		return res, fmt.Errorf("glibc ceiling %s is older than this architecture's first glibc version %s (%s)", ceiling, joinVersion(first), libcPath)
	}
	if err := checkStartMain(libc, cv, ceiling); err != nil {
		return res, err
	}
	files := glibcLibraryFiles(r)
	work, err := os.MkdirTemp("", "glibc-stub-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(work)
	if m, c, err := tools.target(ctx, work); err != nil {
		return res, err
	} else if m != libc.machine || c != libc.class {
		return res, fmt.Errorf("%s makes %v %v objects, and %s is %v %v: the triple does not match the sysroot's architecture", tools.As, c, m, libcPath, libc.class, libc.machine)
	}
	for i, p := range files {
		if err := stubLibrary(ctx, r, p, libc, cv, ceiling, tools, filepath.Join(work, fmt.Sprint(i)), &res); err != nil {
			return res, err
		}
	}
	if len(res.Stubbed) == 0 {
		return res, fmt.Errorf("no glibc shared library found to limit to %s", ceiling)
	}
	return res, nil
}

// checkStartMain refuses a tree whose crt1.o calls a default
// __libc_start_main above the ceiling (GLIBC_2.34, where start-up moved
// into libc and crt1.o stopped passing the program's init function): the
// older version a program would bind to does not run its constructors,
// so it would make programs that start wrong.
func checkStartMain(libc *lib, cv []int, ceiling string) error {
	for _, sym := range libc.syms {
		if sym.Name != "__libc_start_main" || sym.Section == elf.SHN_UNDEF || !sym.HasVersion || sym.VersionIndex.IsHidden() {
			continue
		}
		if v, ok := glibcNum(sym.Version); ok && compareVersions(v, cv) > 0 {
			return fmt.Errorf("the tree's crt1.o is made for __libc_start_main@@%s, above the glibc ceiling %s: programs linked with it would not start right on glibc %s; use a tree of an older glibc (below %s, e.g. Debian bullseye's 2.31)",
				sym.Version, ceiling, ceiling, strings.TrimPrefix(sym.Version, "GLIBC_"))
		}
	}
	return nil
}

// glibcLibraryFiles are the regular files of the library directories
// whose names a glibc library may have, each resolved inside the root to
// the file it names, once, in name order.
func glibcLibraryFiles(r *os.Root) []string {
	seen := map[string]bool{}
	var files []string
	for _, d := range libDirs(r) {
		rd, ents, ok := readDirIn(r, d)
		if !ok {
			continue
		}
		for _, e := range ents {
			if !reStubName().MatchString(e.Name()) {
				continue
			}
			p, err := unpack.Resolve(r, join(rd, e.Name()), nil)
			if err != nil || seen[p] {
				continue
			}
			seen[p] = true
			if fi, err := r.Lstat(p); err == nil && fi.Mode().IsRegular() {
				files = append(files, p)
			}
		}
	}
	sort.Strings(files)
	return files
}

// stubLibrary replaces the library at p, when it is glibc's for libc's
// machine, with a stub that defines only its symbols at or below the
// ceiling, or, for a library glibc added after the ceiling (libmvec,
// 2.22), with an empty one (the OS has none; linker scripts such as
// libm.so still name it, AS_NEEDED). work is its own scratch directory.
func stubLibrary(ctx context.Context, r *os.Root, p string, libc *lib, cv []int, ceiling string, tools Tools, work string, res *glibcLimit) error {
	l, err := readLib(r, p)
	if err != nil || !l.isGlibc() || l.machine != libc.machine || l.class != libc.class {
		return nil // not ELF, not glibc's, or for another machine
	}
	st, err := makeStub(l, cv, ceiling, res.Release)
	if errors.Is(err, errNewerLibrary) {
		out, err := emptyLibrary(ctx, tools, l.soname, work)
		if err != nil {
			return fmt.Errorf("empty stub of %s: %w", p, err)
		}
		if err := replaceFile(r, p, out, l.mode); err != nil {
			return fmt.Errorf("replacing %s: %w", p, err)
		}
		res.Removed = append(res.Removed, p)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	out, err := st.build(ctx, tools, work)
	if err != nil {
		return fmt.Errorf("stub of %s: %w", p, err)
	}
	if err := replaceFile(r, p, out, l.mode); err != nil {
		return fmt.Errorf("replacing %s: %w", p, err)
	}
	res.Stubbed = append(res.Stubbed, p)
	return nil
}

// readDirIn resolves dir inside the root and lists it; ok is false when it
// does not resolve to a readable directory.
func readDirIn(r *os.Root, dir string) (resolved string, ents []fs.DirEntry, ok bool) {
	rd, err := unpack.Resolve(r, dir, nil)
	if err != nil {
		return "", nil, false
	}
	f, err := r.Open(join(rd, "."))
	if err != nil {
		return "", nil, false
	}
	defer f.Close()
	ents, _ = f.ReadDir(-1)
	return rd, ents, true
}

// libDirs are the directories glibc's libraries are looked for in, in
// order: lib/<triple>, usr/lib/<triple>, lib64, usr/lib64, lib, usr/lib.
func libDirs(r *os.Root) []string {
	var dirs []string
	for _, dir := range []string{"lib", "usr/lib"} {
		_, ents, ok := readDirIn(r, dir)
		if !ok {
			continue
		}
		var triples []string
		for _, e := range ents {
			if strings.Contains(e.Name(), "-linux-") {
				triples = append(triples, e.Name())
			}
		}
		sort.Strings(triples)
		for _, t := range triples {
			dirs = append(dirs, dir+"/"+t)
		}
	}
	return append(dirs, "lib64", "usr/lib64", "lib", "usr/lib")
}

// findLibc returns the resolved path of the libc.so.6 glibcVersions reads.
func findLibc(r *os.Root) (string, error) {
	for _, d := range libDirs(r) {
		p, err := unpack.Resolve(r, d+"/libc.so.6", nil)
		if err != nil {
			continue
		}
		if lib, err := readLib(r, p); err == nil && lib.firstGlibc() != nil {
			return p, nil
		}
	}
	return "", errors.New("no libc.so.6 with GLIBC_ versions")
}

// lib is what a stub is made from.
type lib struct {
	soname   string
	machine  elf.Machine
	class    elf.Class
	mode     fs.FileMode
	versions []elf.DynamicVersion
	syms     []elf.Symbol
	sections []*elf.Section
	banner   bool // .rodata holds glibc's release banner
}

func readLib(r *os.Root, p string) (*lib, error) {
	f, err := r.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, err
	}
	if ef.Type != elf.ET_DYN {
		return nil, errors.New("not a shared library")
	}
	l := &lib{machine: ef.Machine, class: ef.Class, mode: fi.Mode().Perm(), sections: ef.Sections}
	if l.versions, err = ef.DynamicVersions(); err != nil {
		return nil, err
	}
	if l.syms, err = ef.DynamicSymbols(); err != nil {
		return nil, err
	}
	if so, err := ef.DynString(elf.DT_SONAME); err == nil && len(so) > 0 {
		l.soname = so[0]
	} else {
		return nil, errors.New("no SONAME")
	}
	if sec := ef.Section(".rodata"); sec != nil && sec.Size < 64<<20 {
		if data, err := sec.Data(); err == nil {
			l.banner = reRelease().Match(data)
		}
	}
	return l, nil
}

func glibcNum(v string) ([]int, bool) {
	n, ok := strings.CutPrefix(v, "GLIBC_")
	if !ok {
		return nil, false
	}
	return parseVersion(n)
}

func joinVersion(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ".")
}

// isGlibc: the library defines GLIBC_x.y versions and, besides its base
// version, no others than GLIBC_ ones (GLIBC_PRIVATE, GLIBC_ABI_DT_RELR);
// libgcc_s.so.1 defines GLIBC_2.0 too, with its GCC_x.y.
func (l *lib) isGlibc() bool {
	n := 0
	for _, v := range l.versions {
		switch {
		case v.Flags&elf.VER_FLG_BASE != 0:
		case !strings.HasPrefix(v.Name, "GLIBC_"):
			return false
		default:
			if _, ok := glibcNum(v.Name); ok {
				n++
			}
		}
	}
	return n > 0
}

func (l *lib) firstGlibc() []int {
	var first []int
	for _, v := range l.versions {
		if n, ok := glibcNum(v.Name); ok && v.Flags&elf.VER_FLG_BASE == 0 && (first == nil || compareVersions(n, first) < 0) {
			first = n
		}
	}
	return first
}

// stub is a stub library's sources and what it must define.
type stub struct {
	soname   string
	machine  elf.Machine
	class    elf.Class
	asm      string
	script   string
	versions []string        // the version definitions, in order
	want     map[string]bool // name@VER, name@@VER, or name when unversioned
}

type stubSym struct {
	name, version string
	def           bool // name@@version
	weak, unique  bool
	size          uint64
}

type stubGroup struct {
	kind    int // kindFunc, kindData, kindTLS
	typ     string
	section elf.SectionIndex
	value   uint64
	align   uint64
	size    uint64
	syms    []stubSym
}

// stbGNUUnique is STB_GNU_UNIQUE (STB_LOOS), which debug/elf does not name.
const stbGNUUnique = elf.STB_LOOS

const (
	kindFunc = iota
	kindData
	kindTLS
)

// makeStub works out the stub of l for the ceiling cv.
func makeStub(l *lib, cv []int, ceiling, release string) (*stub, error) {
	sm := &stubMaker{l: l, cv: cv, st: &stub{soname: l.soname, machine: l.machine, class: l.class, want: map[string]bool{}},
		kept: map[string]bool{}, isVersion: map[string]bool{}, groups: map[stubKey]*stubGroup{}, droppedDefault: map[string]bool{}}
	sm.versions()
	if len(sm.st.versions) == 0 {
		return nil, fmt.Errorf("%w (no GLIBC_ version at or below %s)", errNewerLibrary, ceiling)
	}
	if err := sm.symbols(); err != nil {
		return nil, err
	}
	sm.restoreDefaults()
	sm.st.asm = sm.assembly(ceiling, release)
	return sm.st, nil
}

// stubKey is a place a stub defines symbols at: of a kind (function,
// data, TLS), at a section and value of the library.
type stubKey struct {
	kind    int
	section elf.SectionIndex
	value   uint64
}

// stubMaker makes one library's stub.
type stubMaker struct {
	l  *lib
	cv []int
	st *stub
	// kept are the versions at or below the ceiling; isVersion every version name.
	kept, isVersion map[string]bool
	groups          map[stubKey]*stubGroup
	order           []stubKey
	// droppedDefault are the names whose default version is above the ceiling.
	droppedDefault map[string]bool
}

// versions keeps the library's GLIBC_ versions at or below the ceiling,
// each with the kept versions it inherits from, as a version script.
func (sm *stubMaker) versions() {
	st := sm.st
	vers := append([]elf.DynamicVersion(nil), sm.l.versions...)
	sort.SliceStable(vers, func(i, j int) bool { return vers[i].Index < vers[j].Index })
	var script strings.Builder
	for _, v := range vers {
		sm.isVersion[v.Name] = true
		if v.Flags&elf.VER_FLG_BASE != 0 {
			continue
		}
		n, ok := glibcNum(v.Name)
		if !ok || compareVersions(n, sm.cv) > 0 {
			continue // GLIBC_PRIVATE, GLIBC_ABI_DT_RELR, or above the ceiling
		}
		sm.kept[v.Name] = true
		st.versions = append(st.versions, v.Name)
		var parents []string
		for _, d := range v.Deps {
			if sm.kept[d] {
				parents = append(parents, d)
			}
		}
		fmt.Fprintf(&script, "%s {\n}", v.Name)
		if len(parents) > 0 {
			script.WriteString(" " + strings.Join(parents, " "))
		}
		script.WriteString(";\n")
	}
	st.script = script.String()
}

// symbols groups the symbols at kept versions by where they are, and
// notes the names whose default version was dropped.
func (sm *stubMaker) symbols() error {
	l := sm.l
	for _, s := range l.syms {
		bind := elf.ST_BIND(s.Info)
		if s.Section == elf.SHN_UNDEF || (bind != elf.STB_GLOBAL && bind != elf.STB_WEAK && bind != stbGNUUnique) {
			continue
		}
		if s.Section == elf.SHN_ABS && sm.isVersion[s.Name] {
			continue // the symbol old linkers made for each version
		}
		hidden := s.HasVersion && s.VersionIndex.IsHidden()
		switch {
		case s.HasVersion && s.VersionIndex.Index() == 0:
			continue // local
		case s.Version != "" && !sm.kept[s.Version]:
			if _, ok := glibcNum(s.Version); ok && !hidden {
				sm.droppedDefault[s.Name] = true
			}
			continue
		}
		var k stubKey
		var typ string
		switch elf.ST_TYPE(s.Info) {
		case elf.STT_FUNC, elf.STT_GNU_IFUNC:
			k.kind, typ = kindFunc, "%function"
		case elf.STT_OBJECT:
			k.kind, typ = kindData, "%object"
		case elf.STT_NOTYPE:
			k.kind = kindData
		case elf.STT_TLS:
			k.kind, typ = kindTLS, "%tls_object"
		default:
			return fmt.Errorf("symbol %s@%s is of type %v, which stubs do not make", s.Name, s.Version, elf.ST_TYPE(s.Info))
		}
		if bind == stbGNUUnique {
			typ = "%gnu_unique_object"
		}
		k.section, k.value = s.Section, s.Value
		g := sm.groups[k]
		if g == nil {
			g = &stubGroup{kind: k.kind, typ: typ, section: s.Section, value: s.Value, align: l.align(s.Section, s.Value, k.kind)}
			sm.groups[k] = g
			sm.order = append(sm.order, k)
		}
		g.size = max(g.size, s.Size)
		g.syms = append(g.syms, stubSym{name: s.Name, version: s.Version, def: s.Version != "" && !hidden,
			weak: bind == elf.STB_WEAK, unique: bind == stbGNUUnique, size: s.Size})
	}
	return nil
}

// restoreDefaults gives a name whose default version is above the
// ceiling its highest remaining version as default, as in the older glibc.
func (sm *stubMaker) restoreDefaults() {
	// Pointers into the groups' slices are stable only now.
	byName := map[string][]*stubSym{}
	for _, k := range sm.order {
		g := sm.groups[k]
		for i := range g.syms {
			byName[g.syms[i].name] = append(byName[g.syms[i].name], &g.syms[i])
		}
	}
	for name, ss := range byName {
		if !sm.droppedDefault[name] {
			continue
		}
		var best *stubSym
		var bv []int
		for _, s := range ss {
			if s.def {
				best = nil
				break
			}
			if v, ok := glibcNum(s.version); ok && (best == nil || compareVersions(v, bv) > 0) {
				best, bv = s, v
			}
		}
		if best != nil {
			best.def = true
		}
	}
}

// assembly is the stub's source: each group's symbols at one label, in
// order of kind, section and value; functions trap.
func (sm *stubMaker) assembly(ceiling, release string) string {
	l, order := sm.l, sm.order
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.section != b.section {
			return a.section < b.section
		}
		return a.value < b.value
	})
	var asm strings.Builder
	fmt.Fprintf(&asm, "// Stub of %s (glibc %s) limited to the ABI of glibc %s: for linking only.\n", l.soname, release, ceiling)
	asm.WriteString("\t.section .note.GNU-stack,\"\",%progbits\n")
	sections := map[int]string{
		kindFunc: "\t.text\n",
		kindData: "\t.bss\n",
		kindTLS:  "\t.section .tbss,\"awT\",%nobits\n",
	}
	cur, n := -1, 0
	for _, k := range order {
		g := sm.groups[k]
		if g.kind != cur {
			asm.WriteString(sections[g.kind])
			cur = g.kind
		}
		n = sm.group(&asm, g, n)
	}
	if l.banner {
		// GlibcVersion reads "release version X.Y" from libc.so.6's .rodata.
		asm.WriteString("\t.section .rodata\n")
		fmt.Fprintf(&asm, "\t.asciz \"GNU C Library stub, release version %s: the ABI of glibc %s, made from glibc %s for linking only.\\n\"\n", ceiling, ceiling, release)
	}
	return asm.String()
}

// group writes one group's symbols (labels numbered from n+1; it returns
// the last number used) and what they label: a trap, or zeros.
func (sm *stubMaker) group(asm *strings.Builder, g *stubGroup, n int) int {
	sort.Slice(g.syms, func(i, j int) bool {
		if g.syms[i].name != g.syms[j].name {
			return g.syms[i].name < g.syms[j].name
		}
		return g.syms[i].version < g.syms[j].version
	})
	fmt.Fprintf(asm, "\t.balign %d\n", g.align)
	var labels []string
	for _, s := range g.syms {
		n++
		label := fmt.Sprintf("__glibc_stub_%d", n)
		if s.version == "" {
			label = s.name
		}
		labels = append(labels, label)
		if s.weak {
			fmt.Fprintf(asm, "\t.weak %s\n", label)
		} else {
			fmt.Fprintf(asm, "\t.globl %s\n", label)
		}
		if g.typ != "" {
			fmt.Fprintf(asm, "\t.type %s, %s\n", label, g.typ)
		}
		if g.kind != kindFunc {
			fmt.Fprintf(asm, "\t.size %s, %d\n", label, s.size)
		}
		switch {
		case s.version == "":
			sm.st.want[s.name] = true
		case s.def:
			fmt.Fprintf(asm, "\t.symver %s, %s@@%s, remove\n", label, s.name, s.version)
			sm.st.want[s.name+"@@"+s.version] = true
		default:
			fmt.Fprintf(asm, "\t.symver %s, %s@%s, remove\n", label, s.name, s.version)
			sm.st.want[s.name+"@"+s.version] = true
		}
	}
	for _, label := range labels {
		fmt.Fprintf(asm, "%s:\n", label)
	}
	if g.kind == kindFunc {
		asm.WriteString(trapInstruction(sm.l.machine))
		for _, label := range labels {
			fmt.Fprintf(asm, "\t.size %s, .-%s\n", label, label)
		}
	} else if g.size > 0 {
		fmt.Fprintf(asm, "\t.zero %d\n", g.size)
	}
	return n
}

// align is the alignment of a stub of the symbol at value in section: the
// largest power of two dividing value, at most the section's alignment (the
// alignment a linker infers for a copy relocation).
func (l *lib) align(section elf.SectionIndex, value uint64, kind int) uint64 {
	if kind == kindFunc {
		return 4
	}
	var sa uint64 = 16
	if int(section) < len(l.sections) && section != elf.SHN_ABS {
		sa = max(l.sections[section].Addralign, 1)
	}
	a := value & -value
	if a == 0 || a > sa {
		a = sa
	}
	return min(a, 4096)
}

// trapInstruction is a stub function's body: an instruction that traps.
func trapInstruction(m elf.Machine) string {
	switch m {
	case elf.EM_AARCH64:
		return "\tudf #0\n"
	case elf.EM_X86_64, elf.EM_386:
		return "\tud2\n"
	case elf.EM_RISCV:
		return "\tunimp\n"
	case elf.EM_PPC64, elf.EM_PPC:
		return "\ttrap\n"
	default:
		return "\t.balign 4\n\t.zero 4\n"
	}
}

// target assembles an empty file and returns the machine and class of the
// object.
func (t Tools) target(ctx context.Context, dir string) (elf.Machine, elf.Class, error) {
	src, obj := filepath.Join(dir, "probe.s"), filepath.Join(dir, "probe.o")
	if err := os.WriteFile(src, []byte("\t.text\n"), 0o644); err != nil {
		return 0, 0, err
	}
	if err := run(ctx, t.As, "-o", obj, src); err != nil {
		return 0, 0, err
	}
	f, err := elf.Open(obj)
	if err != nil {
		return 0, 0, fmt.Errorf("%s made no ELF object: %w", t.As, err)
	}
	defer f.Close()
	return f.Machine, f.Class, nil
}

// build assembles and links the stub in dir and returns its bytes.
// emptyLibrary is a shared library named soname that defines nothing.
func emptyLibrary(ctx context.Context, tools Tools, soname, dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	src, obj, out := filepath.Join(dir, "empty.s"), filepath.Join(dir, "empty.o"), filepath.Join(dir, "empty.so")
	if err := os.WriteFile(src, nil, 0o644); err != nil {
		return nil, err
	}
	if err := run(ctx, tools.As, "-o", obj, src); err != nil {
		return nil, err
	}
	if err := run(ctx, tools.Ld, "-shared", "-soname", soname, "--build-id=none", "--strip-all", "-o", out, obj); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

func (st *stub) build(ctx context.Context, tools Tools, dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	src, obj := filepath.Join(dir, "stub.s"), filepath.Join(dir, "stub.o")
	vs, out := filepath.Join(dir, "stub.map"), filepath.Join(dir, "stub.so")
	if err := os.WriteFile(src, []byte(st.asm), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(vs, []byte(st.script), 0o644); err != nil {
		return nil, err
	}
	if err := run(ctx, tools.As, "-o", obj, src); err != nil {
		return nil, err
	}
	if f, err := elf.Open(obj); err != nil {
		return nil, err
	} else {
		m, c := f.Machine, f.Class
		f.Close()
		if m != st.machine || c != st.class {
			return nil, fmt.Errorf("%s makes %v %v objects, and the library is %v %v: the triple does not match the sysroot's architecture", tools.As, c, m, st.class, st.machine)
		}
	}
	if err := run(ctx, tools.Ld, "-shared", "-soname", st.soname, "--version-script", vs,
		"-z", "defs", "--build-id=none", "--strip-all", "-o", out, obj); err != nil {
		return nil, err
	}
	if err := st.check(out); err != nil {
		return nil, fmt.Errorf("%s made a stub that %w", tools.Ld, err)
	}
	return os.ReadFile(out)
}

func run(ctx context.Context, tool string, args ...string) error {
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(lastLines(stderr.String(), 10))
		return fmt.Errorf("%s: %w: %s", filepath.Base(tool), err, msg)
	}
	return nil
}

// check reads the linked stub back: its SONAME, version definitions and
// versioned symbols must be what was asked for.
func (st *stub) check(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if so, err := f.DynString(elf.DT_SONAME); err != nil || len(so) != 1 || so[0] != st.soname {
		return fmt.Errorf("has SONAME %v, not %s", so, st.soname)
	}
	vers, err := f.DynamicVersions()
	if err != nil {
		return fmt.Errorf("has no version definitions: %w", err)
	}
	var names []string
	isVersion := map[string]bool{}
	for _, v := range vers {
		isVersion[v.Name] = true
		if v.Flags&elf.VER_FLG_BASE == 0 {
			names = append(names, v.Name)
		}
	}
	if strings.Join(names, " ") != strings.Join(st.versions, " ") {
		return fmt.Errorf("defines versions %v, not %v", names, st.versions)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return err
	}
	got := map[string]bool{}
	for _, s := range syms {
		b := elf.ST_BIND(s.Info)
		if s.Section == elf.SHN_UNDEF || (b != elf.STB_GLOBAL && b != elf.STB_WEAK && b != stbGNUUnique) || (s.Section == elf.SHN_ABS && isVersion[s.Name]) {
			continue
		}
		switch {
		case s.Version == "":
			got[s.Name] = true
		case s.HasVersion && s.VersionIndex.IsHidden():
			got[s.Name+"@"+s.Version] = true
		default:
			got[s.Name+"@@"+s.Version] = true
		}
	}
	var extra, missing []string
	for k := range got {
		if !st.want[k] {
			extra = append(extra, k)
		}
	}
	for k := range st.want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	if len(extra)+len(missing) > 0 {
		sort.Strings(extra)
		sort.Strings(missing)
		return fmt.Errorf("differs from what was asked: %d symbols more %v, %d missing %v", len(extra), head(extra, 5), len(missing), head(missing, 5))
	}
	return nil
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// replaceFile writes data to p (a resolved path in r) with mode, through a
// temporary file in the same directory renamed over it: other hard links to
// the old file keep their content.
func replaceFile(r *os.Root, p string, data []byte, mode fs.FileMode) error {
	tmp := join(path.Dir(p), ".stub-"+path.Base(p))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, p)
	}
	if err != nil {
		r.Remove(tmp)
	}
	return err
}
