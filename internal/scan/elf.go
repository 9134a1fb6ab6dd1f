package scan

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/dorisarm/dorisarm/internal/isa"
)

// Magic numbers of the executable formats the scanner recognises.
var (
	magicELF    = []byte("\x7fELF")
	magicMachO  = [][]byte{{0xcf, 0xfa, 0xed, 0xfe}, {0xce, 0xfa, 0xed, 0xfe}, {0xfe, 0xed, 0xfa, 0xcf}, {0xfe, 0xed, 0xfa, 0xce}}
	magicFatMac = []byte{0xca, 0xfe, 0xba, 0xbe}
)

func machineName(m elf.Machine) string {
	switch m {
	case elf.EM_AARCH64:
		return "aarch64"
	case elf.EM_X86_64:
		return "x86_64"
	case elf.EM_386:
		return "i386"
	case elf.EM_ARM:
		return "arm"
	case elf.EM_RISCV:
		return "riscv"
	case elf.EM_PPC64:
		return "ppc64"
	case elf.EM_S390:
		return "s390"
	}
	return strings.ToLower(strings.TrimPrefix(m.String(), "EM_"))
}

// analyzed is what the ELF analysis returns.
type analyzed struct {
	file     File
	findings []Finding
	digests  []string // the flag records' digests (Options.Digests)
	eh       *ehTable // the unwind table, once read (ehTable)
}

// ehTable reads the unwind table once per object (checking that it is
// sorted reads every entry).
func (a *analyzed) ehTable(f *elf.File, data []byte) *ehTable {
	if a.eh == nil {
		a.eh = readEhTable(f, data)
	}
	return a.eh
}

// changedDetail says why a file that faulted was not read to its end.
const changedDetail = "the file changed while it was scanned (it ended before its mapped length): not read to its end; scan it again once nothing writes to it"

// panicDetail is the detail of a finding for a recovered panic r: a fault
// reading memory (SetPanicOnFault) is a file that shrank while mapped;
// anything else is what was being read when it went wrong.
func panicDetail(what string, r any) string {
	if isFault(r) {
		return changedDetail
	}
	return fmt.Sprintf("%s (%v)", what, r)
}

func unreadable(path, why string) Finding {
	return Finding{Kind: KindUnreadable, Severity: SevError, Path: path, Detail: why}
}

// analyzeELF inspects one ELF image held in data. pol may be nil (report only).
// table gives the instruction table; it is asked for only when there is code
// to classify, so that it can be built while the headers and symbols are read.
func analyzeELF(path string, data []byte, pol *Policy, table func() *isa.Table) (a analyzed) {
	defer func() {
		if r := recover(); r != nil {
			a = analyzed{findings: []Finding{unreadable(path, panicDetail("malformed ELF", r))}}
		}
	}()
	// A mapped file that shrinks while it is read faults: that is a panic
	// to recover, not the end of the program.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return analyzed{findings: []Finding{unreadable(path, "malformed ELF: "+err.Error())}}
	}
	layoutRel(f)
	fl := File{Path: path, Format: "elf", Machine: machineName(f.Machine), Size: int64(len(data))}
	switch f.Type {
	case elf.ET_EXEC:
		fl.Type = "exec"
	case elf.ET_DYN:
		fl.Type = "dyn"
	case elf.ET_REL:
		fl.Type = "rel"
	default:
		fl.Type = strings.ToLower(strings.TrimPrefix(f.Type.String(), "ET_"))
	}
	a.file = fl
	if why := emptyELF(f); why != "" {
		// Headers that describe nothing: nothing was looked at, so it is not clean.
		a.findings = append(a.findings, unreadable(path, why))
		return a
	}
	if pol != nil && int(f.Machine) != pol.Machine {
		// Code that cannot run on the target at all: its other properties
		// (page alignment, glibc, OpenSSL) do not matter.
		a.findings = append(a.findings, Finding{Kind: KindForeignArch, Severity: SevError, Path: path,
			Detail: fmt.Sprintf("%s %s code in a %s build for %s; it cannot run there (Exec format error)", fl.Machine, fl.Type, pol.ISA, pol.Target)})
		return a
	}
	if why := pol.abiMismatch(f); why != "" {
		// The right machine for another ABI or OS: the target's loader
		// rejects it just the same. The machine name says which, so a jar
		// holding only this does not count as covering the target.
		a.file.Machine += " (" + why + ")"
		a.findings = append(a.findings, Finding{Kind: KindForeignArch, Severity: SevError, Path: path,
			Detail: fmt.Sprintf("%s %s code is %s, but %s runs %s Linux objects; its loader rejects this one (Exec format error)", fl.Machine, fl.Type, why, pol.Target, pol.abi())})
		return a
	}
	a.judgeFlags(f, data, pol)
	syms := readSymtab(f, data, elf.SHT_SYMTAB)
	// The dynamic linker reads PT_DYNAMIC, not the section headers: that
	// decides the libraries and symbol versions the object needs. Of the
	// two dynamic symbol tables, the longer is read (decoded once).
	ld := readLoaderDyn(f, data)
	var di dynInfo
	dynEnt, dynStr := symtabSection(f, data, elf.SHT_DYNSYM)
	if ld.present {
		di = dynInfoFromLoader(f, data, ld)
		es := symEntSize(f)
		if b, str := loaderDynsym(f, data, ld); len(b)/es > len(dynEnt)/es {
			dynEnt, dynStr = b, str
		}
	} else {
		di = readDynamic(f, data)
	}
	dyn := decodeSyms(f, dynEnt, dynStr)
	// The linking checks (libraries, versions, OpenSSL, page size) read
	// other parts of the file than the code: they start once the classifier
	// is done with the CPUs and run beside the rest of the ISA scan (one
	// CPU), on their own copy; their findings follow the ISA ones.
	var link analyzed
	var linkPanic any
	var wg sync.WaitGroup
	// A panic in the ISA scan (malformed input) must not leave the linking
	// checks reading data the caller unmaps once this returns.
	defer wg.Wait()
	linking := f.Type == elf.ET_EXEC || f.Type == elf.ET_DYN
	linked := false
	startLink := func() {
		if !linking || linked {
			return
		}
		linked = true
		link.file = a.file
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { linkPanic = recover() }()
			debug.SetPanicOnFault(true)
			link.dynamic(f, data, syms, dyn, pol, di, ld)
			link.pageSize(f, pol)
		}()
	}
	if f.Machine == elf.EM_AARCH64 {
		a.scanISA(f, data, syms, dyn, pol, table, ld, di.soname, startLink)
	}
	startLink()
	wg.Wait()
	if linkPanic != nil {
		panic(linkPanic) // malformed input: reported by the recover above
	}
	if linking {
		a.file.Needed, a.file.Soname, a.file.GlibcMax, a.file.Glibcxx = link.file.Needed, link.file.Soname, link.file.GlibcMax, link.file.Glibcxx
		a.file.OpenSSL, a.file.PageAlign = link.file.OpenSSL, link.file.PageAlign
		a.findings = append(a.findings, link.findings...)
	}
	return a
}

// abiMismatch says how an object of the target's machine is not of its
// ABI: the ELF class and byte order the matrix gives the ISA, and an OS ABI
// the Linux loader accepts (ELFOSABI_NONE, or ELFOSABI_LINUX for objects
// that use GNU extensions such as ifuncs). "" when it is, or pol is nil.
func (pol *Policy) abiMismatch(f *elf.File) string {
	if pol == nil {
		return ""
	}
	var why []string
	if pol.ELFClass != 0 && elfClassBits(f.Class) != pol.ELFClass {
		why = append(why, fmt.Sprintf("%d-bit (%v)", elfClassBits(f.Class), f.Class))
	}
	if pol.ELFData != "" && elfDataName(f.Data) != pol.ELFData {
		why = append(why, fmt.Sprintf("%s-endian (%v)", elfDataName(f.Data), f.Data))
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		why = append(why, fmt.Sprintf("for OS ABI %s", strings.TrimPrefix(f.OSABI.String(), "ELFOSABI_")))
	}
	return strings.Join(why, ", ")
}

// abi names the target's ABI, as far as the policy states it.
func (pol *Policy) abi() string {
	var s []string
	if pol.ELFClass != 0 {
		s = append(s, fmt.Sprintf("%d-bit", pol.ELFClass))
	}
	if pol.ELFData != "" {
		s = append(s, pol.ELFData+"-endian")
	}
	return strings.Join(append(s, pol.ISA), " ")
}

func elfClassBits(c elf.Class) int {
	switch c {
	case elf.ELFCLASS32:
		return 32
	case elf.ELFCLASS64:
		return 64
	}
	return 0
}

func elfDataName(d elf.Data) string {
	switch d {
	case elf.ELFDATA2LSB:
		return "little"
	case elf.ELFDATA2MSB:
		return "big"
	}
	return "unknown"
}

// section returns a section's bytes without copying, or nil when they lie
// outside the image.
func sectionBytes(data []byte, s *elf.Section) []byte {
	if s.Type == elf.SHT_NOBITS || s.Offset > uint64(len(data)) || s.Size > uint64(len(data))-s.Offset {
		return nil
	}
	return data[s.Offset : s.Offset+s.Size]
}

func (a *analyzed) scanISA(f *elf.File, data []byte, syms, dyn *symtab, pol *Policy, table func() *isa.Table, ld loaderDyn, soname string, classified func()) {
	regions, names := a.codeRegions(f, data, syms, dyn, ld)
	for _, r := range regions {
		a.file.TextBytes += int64(len(r.Data))
		for _, sk := range r.Skip {
			a.file.TextBytes -= int64(sk[1] - sk[0])
		}
	}
	tbl := table()
	res := tbl.Scan(regions)
	classified() // the classifier's CPUs are free again
	// Attribute hits to functions: symtab, else dynsym.
	funcs := functions(syms)
	if funcs.empty() {
		funcs = functions(dyn)
	}
	hitAddrs := make([]uint64, len(res.Hits))
	for i, h := range res.Hits {
		hitAddrs[i] = h.Addr
	}
	funcs.prepare(hitAddrs) // one pass over the symbols for all hits
	j := &hitJudge{f: f, tbl: tbl, soname: soname, funcs: funcs, names: names, byName: map[nameFeat]string{},
		dispatched: ifuncTargets(f, data, []*symtab{syms, dyn}, funcs, regions, ld),
		shapes:     &shapeGuards{regions: regions, idx: map[int]*guardIndex{}, dynamic: dyn, dataPointers: dataPointers(f, data, ld)}}
	for v := range j.dispatched {
		j.variants = append(j.variants, v)
	}
	sort.Slice(j.variants, func(x, y int) bool { return j.variants[x] < j.variants[y] })
	if len(res.Hits) > 0 && syms.len() == 0 {
		j.starts = a.ehTable(f, data) // function starts of the unwind table, for stripped objects
	}
	a.findISA(res, j.judge(res.Hits), tbl, pol)
}

// hitJudge says, for each instruction the CPU may lack, which function it
// is in and whether something guards it: the function's name (the
// matrix's guard tables), an ifunc resolver choosing it, the code around
// it testing the CPU, or every caller doing so.
type hitJudge struct {
	f      *elf.File
	tbl    *isa.Table
	soname string
	funcs  *funcTable
	names  sectionNames
	// dispatched are the functions ifunc resolvers choose between, and
	// variants their starts in order.
	dispatched map[uint64]bool
	variants   []uint64
	starts     *ehTable
	shapes     *shapeGuards
	// byName remembers the guard tables' answer per function and feature
	// (they match names with globs).
	byName map[nameFeat]string
}

type nameFeat struct {
	fn   string
	feat uint8
}

// judged is one hit's function (and its start) and what guards it ("" for nothing).
type judged struct {
	fn    string
	start uint64
	why   string
}

// variantOf is the ifunc variant a hit no symbol covers belongs to:
// stripped objects name few functions, so the nearest preceding variant,
// when one starts before it with no named function in between; 0 for none.
func (j *hitJudge) variantOf(addr uint64) uint64 {
	i := sort.Search(len(j.variants), func(i int) bool { return j.variants[i] > addr }) - 1
	if i < 0 {
		return 0
	}
	v := j.variants[i]
	if j.funcs.startsIn(v, addr) {
		return 0 // a named function starts in between
	}
	return v
}

func (j *hitJudge) guardIn(fn string, feat uint8) string {
	k := nameFeat{fn, feat}
	why, ok := j.byName[k]
	if !ok {
		why = j.tbl.GuardIn(j.soname, fn, j.tbl.Features[feat])
		j.byName[k] = why
	}
	return why
}

// judge judges every hit: first by what names, tables and the code around
// it say; then, for the functions still unexplained, by their callers (one
// pass for all).
func (j *hitJudge) judge(hits []isa.Hit) []judged {
	js := make([]judged, len(hits))
	var unnamed []uint64 // starts of functions whose name guards nothing
	for i, h := range hits {
		fn, start := j.function(h.Addr)
		why := j.guardIn(fn, h.Feature)
		if why == "" {
			unnamed = append(unnamed, start)
		}
		js[i] = judged{fn, start, why}
	}
	j.funcs.prepareAliases(unnamed) // one pass for all
	var ask []uint64
	for i, h := range hits {
		if start := j.byShape(&js[i], h); start != 0 {
			ask = append(ask, start)
		}
	}
	if len(ask) == 0 {
		return js
	}
	byCallers := j.shapes.calledOnlyGuarded(ask)
	for i := range js {
		if js[i].why == "" && js[i].start != 0 {
			js[i].why = byCallers[js[i].start]
		}
	}
	return js
}

// function names the function at addr and where it starts: a symbol's,
// an ifunc variant's, the unwind table's, or (none of them) its section's.
func (j *hitJudge) function(addr uint64) (string, uint64) {
	fn, start := j.funcs.lookup(addr)
	if fn != "" {
		return fn, start
	}
	if v := j.variantOf(addr); v != 0 {
		return fmt.Sprintf("ifunc variant at 0x%x", v), v
	}
	if s, ok := j.starts.lastAtOrBefore(addr); ok {
		// No symbol covers it, but the unwind table says where its function starts.
		return fmt.Sprintf("(no symbol) function at 0x%x", s), s
	}
	// No symbol covers it: one finding per section, with the first address.
	return j.names.at(addr), start
}

// byShape judges a hit its name did not explain by its function's other
// names, an ifunc resolver choosing it, and the code around it; it
// returns the function's start when its callers are still to be asked.
func (j *hitJudge) byShape(jd *judged, h isa.Hit) uint64 {
	if jd.why != "" {
		return 0
	}
	// Another name of the same function (glibc's malloc is also
	// __libc_malloc) may be the one the guard table knows.
	for _, al := range j.funcs.aliases(jd.start) {
		if n := j.funcs.name(al); n != jd.fn {
			if jd.why = j.guardIn(n, h.Feature); jd.why != "" {
				jd.fn = n
				break
			}
		}
	}
	if jd.why == "" && j.dispatched[jd.start] && jd.start != 0 {
		jd.why = "runtime-dispatched: an ifunc resolver selects it by CPU"
	}
	if j.f.Type == elf.ET_REL {
		// Before linking, branches and loads of globals are unresolved
		// (relocations): the code's shape says nothing about a CPU
		// check. Names and the guard tables still do; the linked
		// binary is judged by its code.
		return 0
	}
	if jd.why == "" {
		jd.why = j.shapes.local(h.Addr)
	}
	if jd.why == "" && jd.start != 0 {
		return jd.start
	}
	return 0
}

// findISA counts the instructions by extension and reports them by
// function and feature: an error for those the target's CPU lacks, info
// for those something guards.
func (a *analyzed) findISA(res *isa.Result, js []judged, tbl *isa.Table, pol *Policy) {
	type key struct {
		feat    uint8
		fn      string
		guarded bool
	}
	type agg struct {
		count   int
		first   uint64
		guarded string
	}
	byFn := map[key]*agg{}
	for i, h := range res.Hits {
		jd := js[i]
		k := key{h.Feature, jd.fn, jd.why != ""}
		g := byFn[k]
		if g == nil {
			g = &agg{first: h.Addr, guarded: jd.why}
			byFn[k] = g
		}
		g.count++
	}
	a.file.Features, a.file.Guarded, a.file.Hints = map[string]int{}, map[string]int{}, map[string]int{}
	for id, n := range res.Counts {
		if id > 0 && n > 0 {
			a.file.Features[tbl.Features[id]] = int(n)
		}
	}
	for id, n := range res.Hints {
		if n > 0 {
			a.file.Hints[tbl.Features[id]] = int(n)
		}
	}
	keys := make([]key, 0, len(byFn))
	for k := range byFn {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].fn != keys[j].fn {
			return keys[i].fn < keys[j].fn
		}
		if keys[i].feat != keys[j].feat {
			return keys[i].feat < keys[j].feat
		}
		return !keys[i].guarded && keys[j].guarded
	})
	for _, k := range keys {
		g := byFn[k]
		feat := tbl.Features[k.feat]
		if g.guarded != "" {
			a.file.Guarded[feat] += g.count
		}
		fd := Finding{Kind: KindISA, Path: a.file.Path, Feature: feat, Function: k.fn, Count: g.count,
			Address: "0x" + strconv.FormatUint(g.first, 16), Guarded: g.guarded != ""}
		switch {
		case pol == nil || pol.ISA != "aarch64":
			continue // without a target there is nothing to compare with; the counts say it all
		case pol.Allows(feat):
			continue
		case g.guarded != "":
			fd.Severity = SevInfo
			fd.Detail = fmt.Sprintf("%d %s instruction(s), guarded (%s)", g.count, feat, g.guarded)
		default:
			fd.Severity = SevError
			fd.Detail = fmt.Sprintf("%d %s instruction(s) in %s; cpu %s has no %s, so this dies with SIGILL when it runs", g.count, feat, k.fn, pol.CPU, feat)
		}
		a.findings = append(a.findings, fd)
	}
	if len(a.file.Guarded) == 0 {
		a.file.Guarded = nil
	}
	if len(a.file.Hints) == 0 {
		a.file.Hints = nil
	}
}

const rAArch64Irelative = 1032

// ifuncTargets finds the functions ifunc resolvers choose between: resolver
// addresses come from STT_GNU_IFUNC symbols and R_AARCH64_IRELATIVE addends;
// each resolver is decoded up to its RET and every address it builds with
// ADRP+ADD or ADR is a variant. It returns the start addresses of the
// functions containing those variants.
func ifuncTargets(f *elf.File, data []byte, tabs []*symtab, funcs *funcTable, regions []isa.Code, ld loaderDyn) map[uint64]bool {
	resolvers := map[uint64]bool{}
	for _, t := range tabs {
		for _, s := range t.all() {
			if elf.SymType(s.info()&0xf) == elf.STT_GNU_IFUNC && s.value != 0 {
				resolvers[s.value] = true
			}
		}
	}
	// Relocation tables: what PT_DYNAMIC names, and RELA sections (static
	// executables have no PT_DYNAMIC); each byte range is read once.
	var relas []span
	for _, t := range [][2]elf.DynTag{{elf.DT_RELA, elf.DT_RELASZ}, {elf.DT_JMPREL, elf.DT_PLTRELSZ}} {
		if a, ok := ld.one(t[0]); ok {
			if off, ok := vaddrOff(f, uint64(len(data)), a); ok {
				sz, _ := ld.one(t[1])
				relas = append(relas, span{off, off + min(sz, uint64(len(data))-off)})
			}
		}
	}
	for _, s := range f.Sections {
		if s.Type == elf.SHT_RELA && s.Offset < uint64(len(data)) {
			relas = append(relas, span{s.Offset, s.Offset + min(s.Size, uint64(len(data))-s.Offset)})
		}
	}
	merged := mergeSpans(relas)
	// DT_RELACOUNT says how many R_*_RELATIVE relocations open DT_RELA (the
	// linker sorts them first): most of a large library's relocations, and
	// none of them names a resolver. A file that overstates it only loses
	// ifunc guards (stricter, not laxer).
	if n, ok := ld.one(elf.DT_RELACOUNT); ok && n > 0 {
		if a, ok := ld.one(elf.DT_RELA); ok {
			if off, ok := vaddrOff(f, uint64(len(data)), a); ok {
				merged = cutSpan(merged, span{off, off + min(n, uint64(len(data))/24)*24})
			}
		}
	}
	for _, r := range merged {
		b := data[r.lo:r.hi]
		for i := 0; i+24 <= len(b); i += 24 {
			info := binary.LittleEndian.Uint64(b[i+8:])
			if elf.R_AARCH64(info&0xffffffff) == rAArch64Irelative {
				resolvers[binary.LittleEndian.Uint64(b[i+16:])] = true
			}
		}
	}
	if len(resolvers) > 1<<16 {
		return map[uint64]bool{} // not a real ifunc table; decoding each would cost more than the file
	}
	out := map[uint64]bool{}
	if len(resolvers) == 0 {
		return out
	}
	var targets []uint64 // the addresses resolvers build
	for r := range resolvers {
		code, base := codeAt(regions, r)
		var regs [32]uint64 // pages ADRP put in registers (set: which hold one; page 0 is a page)
		var set uint32
		for i := 0; i+4 <= len(code) && i < 4*512; i += 4 {
			w := binary.LittleEndian.Uint32(code[i:])
			pc := base + uint64(i)
			switch {
			case w == 0xd65f03c0: // ret
				i = len(code)
			case w&0x9f000000 == 0x90000000: // adrp
				imm := int64(int32(((w>>5)&0x7ffff)<<2|(w>>29)&3) << 11 >> 11)
				regs[w&31] = uint64(int64(pc&^0xfff) + imm<<12)
				set |= 1 << (w & 31)
			case w&0x9f000000 == 0x10000000: // adr
				imm := int64(int32(((w>>5)&0x7ffff)<<2|(w>>29)&3) << 11 >> 11)
				targets = append(targets, uint64(int64(pc)+imm))
			case w&0xff800000 == 0x91000000: // add xd, xn, #imm{, lsl 12}
				rn, rd := (w>>5)&31, w&31
				imm := uint64((w >> 10) & 0xfff)
				if w&(1<<22) != 0 {
					imm <<= 12
				}
				if set>>rn&1 != 0 {
					targets = append(targets, regs[rn]+imm)
				}
				set &^= 1 << rd // it holds an address now, not a page
			}
		}
	}
	// Each target marks the function holding it (itself when none does),
	// all found in one pass over the symbols.
	funcs.prepare(targets)
	for _, a := range targets {
		if _, start := funcs.lookup(a); start != 0 {
			out[start] = true
		} else {
			out[a] = true
		}
	}
	return out
}

func codeAt(regions []isa.Code, addr uint64) ([]byte, uint64) {
	for _, r := range regions {
		if r.Addr <= addr && addr-r.Addr < uint64(len(r.Data)) {
			return r.Data[addr-r.Addr:], addr
		}
	}
	return nil, 0
}

func (a *analyzed) dynamic(f *elf.File, data []byte, syms, dyn *symtab, pol *Policy, di dynInfo, ld loaderDyn) {
	a.file.Needed, a.file.Soname = di.needed, di.soname
	// Highest GLIBC_ and GLIBCXX_ versions this object needs, and who needs them.
	var glibc, glibcxx string
	for _, dep := range di.verNeed {
		if v, ok := strings.CutPrefix(dep, "GLIBC_"); ok && isVersion(v) && CompareVersions(v, glibc) > 0 {
			glibc = v
		}
		if v, ok := strings.CutPrefix(dep, "GLIBCXX_"); ok && isVersion(v) && CompareVersions(v, glibcxx) > 0 {
			glibcxx = v
		}
	}
	a.file.GlibcMax, a.file.Glibcxx = glibc, glibcxx
	// The symbols behind a violation are named; the version tables are only read then.
	if pol != nil && glibc != "" && CompareVersions(glibc, pol.GlibcMax) > 0 {
		imported := versionedImports(f, data, ld, dyn, newer("GLIBC_", pol.GlibcMax))
		a.findings = append(a.findings, Finding{Kind: KindGlibc, Severity: SevError, Path: a.file.Path, Feature: "GLIBC_" + glibc,
			Detail: fmt.Sprintf("needs GLIBC_%s but %s has glibc %s: %s", glibc, pol.OS, pol.GlibcMax, newerSymbols(imported, "GLIBC_", pol.GlibcMax))})
	}
	if pol != nil && pol.GlibcxxMax != "" && glibcxx != "" && CompareVersions(glibcxx, pol.GlibcxxMax) > 0 {
		imported := versionedImports(f, data, ld, dyn, newer("GLIBCXX_", pol.GlibcxxMax))
		a.findings = append(a.findings, Finding{Kind: KindGlibcxx, Severity: SevError, Path: a.file.Path, Feature: "GLIBCXX_" + glibcxx,
			Detail: fmt.Sprintf("links libstdc++ dynamically and needs GLIBCXX_%s but %s's libstdc++ has %s (link it with -static-libstdc++): %s",
				glibcxx, pol.OS, pol.GlibcxxMax, newerSymbols(imported, "GLIBCXX_", pol.GlibcxxMax))})
	}
	a.openssl(f, data, syms, dyn, pol)
}

// newer accepts the versions prefix+V with V above ceiling.
func newer(prefix, ceiling string) func(string) bool {
	return func(version string) bool {
		v, ok := strings.CutPrefix(version, prefix)
		return ok && isVersion(v) && CompareVersions(v, ceiling) > 0
	}
}

func newerSymbols(imported []elf.ImportedSymbol, prefix, ceiling string) string {
	seen := map[string]bool{}
	var names []string
	for _, s := range imported {
		v, ok := strings.CutPrefix(s.Version, prefix)
		if ok && isVersion(v) && CompareVersions(v, ceiling) > 0 && !seen[s.Name] {
			seen[s.Name] = true
			names = append(names, s.Name+"@"+s.Version)
		}
	}
	sort.Strings(names)
	if len(names) > 8 {
		names = append(names[:8], fmt.Sprintf("and %d more", len(names)-8))
	}
	if len(names) == 0 {
		return "(required by the version-needs table)"
	}
	return strings.Join(names, ", ")
}

func isVersion(v string) bool {
	for _, p := range strings.Split(v, ".") {
		if _, err := strconv.Atoi(p); err != nil {
			return false
		}
	}
	return v != ""
}

// CompareVersions compares dotted numeric versions (glibc's 2.28 < 2.36);
// "" is the smallest.
func CompareVersions(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

func isOpenSSLLib(name string) bool {
	return strings.HasPrefix(name, "libcrypto.so") || strings.HasPrefix(name, "libssl.so")
}

// openssl decides how the object links OpenSSL and checks it against the policy.
func (a *analyzed) openssl(f *elf.File, data []byte, syms, dyn *symtab, pol *Policy) {
	if isOpenSSLLib(a.file.Soname) || isOpenSSLLib(baseName(a.file.Path)) {
		return // OpenSSL itself
	}
	dynamic := false
	for _, n := range a.file.Needed {
		if isOpenSSLLib(n) {
			dynamic = true
		}
	}
	defined := 0
	seen := map[string]bool{}
	for _, t := range []*symtab{syms, dyn} {
		if !containsAt(t.str, "EVP_", 1) && !containsAt(t.str, "SSL_CTX_", 6) {
			continue // no such name in the string table: no need to read every name
		}
		for _, s := range t.all() {
			if s.shndx() == uint16(elf.SHN_UNDEF) || elf.SymType(s.info()&0xf) != elf.STT_FUNC {
				continue
			}
			if c := t.nameByte(s); c != 'E' && c != 'S' || !t.nameHasPrefix(s, "EVP_") && !t.nameHasPrefix(s, "SSL_CTX_") {
				continue
			}
			if n := t.nameBytes(s); !seen[string(n)] {
				seen[string(n)] = true
				defined++
			}
		}
	}
	if defined == 0 && syms.len() == 0 {
		// Stripped: OpenSSL's version banner in the read-only data gives a static copy away.
		if ro := f.Section(".rodata"); ro != nil {
			if containsEach(sectionBytes(data, ro), needle{"OpenSSL ", 0}, needle{"EVP_", 1}) {
				defined = 1
			}
		}
	}
	switch {
	case defined > 0:
		a.file.OpenSSL = "static"
	case dynamic:
		a.file.OpenSSL = "dynamic"
	}
	if pol == nil {
		return
	}
	switch {
	case pol.OpenSSL == "dynamic" && defined > 0:
		a.findings = append(a.findings, Finding{Kind: KindOpenSSLStatic, Severity: SevError, Path: a.file.Path, Count: defined,
			Detail: fmt.Sprintf("carries its own copy of OpenSSL (%d EVP_/SSL_CTX_ functions defined) but %s links OpenSSL dynamically (apply the dynamic-openssl patch)", defined, pol.Target)})
	case pol.OpenSSL == "static" && dynamic:
		a.findings = append(a.findings, Finding{Kind: KindOpenSSLShared, Severity: SevError, Path: a.file.Path,
			Detail: fmt.Sprintf("needs a shared OpenSSL (%s) but %s links OpenSSL statically", strings.Join(a.file.Needed, ", "), pol.Target)})
	}
}

// containsAt reports whether b contains pat, looking for pat[k] first: a
// byte rare in symbol names and data ('V' of EVP_, 'X' of SSL_CTX_) makes
// the search run at memory speed (bytes.Contains stops at every 'E').
func containsAt(b []byte, pat string, k int) bool {
	c := pat[k]
	for pos := k; pos < len(b); {
		i := bytes.IndexByte(b[pos:], c)
		if i < 0 {
			return false
		}
		if at := pos + i - k; at+len(pat) <= len(b) && string(b[at:at+len(pat)]) == pat {
			return true
		}
		pos += i + 1
	}
	return false
}

// needle is a pattern for containsAt: s, looked for by its byte s[k].
type needle struct {
	s string
	k int
}

// pieceBytes is how much of a mapped file containsEach reads at a time.
const pieceBytes = 64 << 10

// containsEach reports whether b contains every needle. A part of a mapped
// file is read from the file in pieces, in one pass for all the needles,
// not through the mapping (see reader): libLLVM-16's 39 MB of read-only
// data took 21 ms through a fresh mapping on this project's VM.
func containsEach(b []byte, needles ...needle) bool {
	read := reader(b)
	if read == nil || len(b) <= pieceBytes {
		for _, n := range needles {
			if !containsAt(b, n.s, n.k) {
				return false
			}
		}
		return true
	}
	overlap := 0
	for _, n := range needles {
		overlap = max(overlap, len(n.s)-1)
	}
	found := make([]bool, len(needles))
	left := len(needles)
	buf := make([]byte, pieceBytes+overlap)
	for off := 0; off < len(b) && left > 0; off += pieceBytes {
		piece := buf[:min(len(buf), len(b)-off)]
		if !read(piece, off) {
			piece = b[off : off+len(piece)]
		}
		for i, n := range needles {
			if !found[i] && containsAt(piece, n.s, n.k) {
				found[i] = true
				left--
			}
		}
	}
	return left == 0
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, "/!("); i >= 0 {
		p = p[i+1:]
	}
	return strings.TrimSuffix(p, ")")
}

func (a *analyzed) pageSize(f *elf.File, pol *Policy) {
	var minAlign uint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && (minAlign == 0 || p.Align < minAlign) {
			minAlign = p.Align
		}
	}
	a.file.PageAlign = minAlign
	if pol != nil && minAlign != 0 && minAlign < uint64(pol.PageSize) {
		a.findings = append(a.findings, Finding{Kind: KindPageSize, Severity: SevError, Path: a.file.Path,
			Detail: fmt.Sprintf("LOAD segments are aligned to %d bytes but %s runs %d KiB pages; link with -Wl,-z,max-page-size=%d", minAlign, pol.OS, pol.PageSize/1024, pol.PageSize)})
	}
}

// otherFormat recognises PE and Mach-O images (JNI libraries for other OSes).
func otherFormat(data []byte) (format, machine string, ok bool) {
	if len(data) >= 0x40 && data[0] == 'M' && data[1] == 'Z' {
		off := int(binary.LittleEndian.Uint32(data[0x3c:]))
		if off > 0 && off+6 <= len(data) && string(data[off:off+4]) == "PE\x00\x00" {
			switch binary.LittleEndian.Uint16(data[off+4:]) {
			case 0x8664:
				return "pe", "x86_64", true
			case 0x014c:
				return "pe", "i386", true
			case 0xaa64:
				return "pe", "aarch64", true
			}
			return "pe", "other", true
		}
	}
	if len(data) >= 8 {
		for _, m := range magicMachO {
			if bytes.Equal(data[:4], m) {
				cpu := binary.LittleEndian.Uint32(data[4:])
				if m[0] == 0xfe {
					cpu = binary.BigEndian.Uint32(data[4:])
				}
				switch cpu {
				case 0x01000007:
					return "macho", "x86_64", true
				case 0x0100000c:
					return "macho", "aarch64", true
				}
				return "macho", "other", true
			}
		}
		// Fat Mach-O shares its magic with Java class files: a small arch count tells them apart.
		if bytes.Equal(data[:4], magicFatMac) {
			if n := binary.BigEndian.Uint32(data[4:]); n > 0 && n < 20 {
				return "macho", "universal", true
			}
		}
	}
	return "", "", false
}

// emptyELF says why an ELF image has nothing to scan: a linked image
// without a PT_LOAD segment cannot run, and an object with no sections holds
// nothing; a file that claims to be either is not a real one.
func emptyELF(f *elf.File) string {
	switch f.Type {
	case elf.ET_EXEC, elf.ET_DYN:
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD {
				return ""
			}
		}
		return "malformed ELF: an executable or shared object without PT_LOAD segments (nothing the loader could run; not a real binary)"
	case elf.ET_REL:
		if len(f.Sections) == 0 {
			return "malformed ELF: a relocatable object without sections"
		}
	}
	return ""
}
