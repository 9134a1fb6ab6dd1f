package scan

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dorisarm/dorisarm/internal/flagrec"
)

// Flag read-back finding kinds: what an object records it was compiled
// with, against the target's flags and CPU.
const (
	// KindFlagsBeyond: compiled for extensions the CPU lacks (an error).
	KindFlagsBeyond = "flags-beyond-cpu"
	// KindLostTuning: compiled for a weaker architecture than the target's
	// flags (a warning; an error with --require-target-flags, and in the
	// records of the tree's own build when the scan knows origins).
	KindLostTuning = "lost-tuning"
	// KindFlagsUnresolved: recorded flags dorisarm cannot resolve.
	KindFlagsUnresolved = "flags-unresolved"
	// KindUnrecorded: compiled code that records no flags.
	KindUnrecorded = "flags-unrecorded"
)

// SevWarning is a finding that fails the scan only when asked to
// (--require-target-flags).
const SevWarning = "warning"

// Where a record was read from.
const (
	sourceSection  = ".GCC.command.line"
	sourceProducer = "DW_AT_producer"
)

// assembly is the verdict on an object with code, no record and no
// .comment: no compiler wrote it (hand-written assembly), so no compile
// flags apply to it; its instructions are still checked against the CPU.
const assembly = "assembly"

// FileFlags is what an object records about how it was compiled.
type FileFlags struct {
	// Source is where the records were read: .GCC.command.line,
	// DW_AT_producer or both (comma-separated), llvm.commandline for
	// bitcode; "" when there were none. Every record of every place is
	// judged.
	Source string `json:"source,omitempty"`
	// Records counts the recorded command lines (a linked file holds
	// those of every object that recorded one, identical ones merged).
	Records int `json:"records"`
	// Verdict is the worst verdict of its records: target, lost,
	// unresolved, beyond; or unrecorded, or assembly.
	Verdict string `json:"verdict"`
	// Verdicts counts the records by verdict.
	Verdicts map[string]int `json:"verdicts,omitempty"`
	// Flags describes the resolved flags of the worst record: the -march
	// or -mcpu that won, tuning, atomics, LTO, PGO.
	Flags string `json:"flags,omitempty"`
	// Detail says how the worst record differs from the target.
	Detail string `json:"detail,omitempty"`
	// Origins are the records by the build that compiled them (with
	// Options.Origins): OriginTree, or the package Origins.Packages names.
	Origins map[string]*OriginFlags `json:"origins,omitempty"`
}

// OriginTree is the origin of a record no third-party package's installed
// objects carry: the tree's own build compiled it (the BE's objects, and
// the link of everything into doris_be).
const OriginTree = "tree"

// Origins says which build compiled each record a scan reads
// (Options.Origins): a record one of the third-party packages' installed
// objects carries is that package's, every other one the tree's own. It
// is data the build collected, each package's records as its install
// scan read them (Options.Digests), not a rule about paths: a linked
// doris_be holds both the BE's records and those of the package archives
// linked into it.
type Origins struct {
	// Packages maps a record's digest (flagrec.Record.Digest) to the
	// package whose installed objects carry it.
	Packages map[string]string
	// Accepted is the user's reason for building the tree's own code below
	// the target's -march (--accept-lost-tuning): its lost tuning is then
	// judged as a package's, a warning (an error with
	// --require-target-flags). Without it, lost tuning in the tree's own
	// records is an error.
	Accepted string
}

// of is the origin of a record.
func (o *Origins) of(r flagrec.Record) string {
	if pkg, ok := o.Packages[r.Digest()]; ok {
		return pkg
	}
	return OriginTree
}

// OriginFlags is how the records of one origin in an object were judged.
type OriginFlags struct {
	Records int `json:"records"`
	// Verdict is the worst of them, Flags its resolved flags.
	Verdict string `json:"verdict"`
	Flags   string `json:"flags,omitempty"`
}

// FlagSummary counts the flag read-back over a scan.
type FlagSummary struct {
	// Requested is the target's -march (with a policy).
	Requested string `json:"requested,omitempty"`
	// Objects counts the ELF objects judged, by verdict in Verdicts.
	Objects  int            `json:"objects"`
	Verdicts map[string]int `json:"verdicts"`
	// Landed counts objects by the flags their worst record resolves to
	// (the five most common, the rest as "other").
	Landed map[string]int `json:"landed,omitempty"`
	// AtTarget is the share of compiled objects (assembly left out) whose
	// every record is at the target's flags.
	AtTarget float64 `json:"at_target"`
	// LostBy counts the objects with lost tuning by the origin of the
	// records that lost it (with Options.Origins): OriginTree or a package.
	LostBy map[string]int `json:"lost_by,omitempty"`
	// LostTuningAccepted is the user's reason for accepting lost tuning in
	// the tree's own objects (Origins.Accepted).
	LostTuningAccepted string `json:"lost_tuning_accepted,omitempty"`
}

// maxProducerUnits bounds the compile units whose DW_AT_producer is read.
const maxProducerUnits = 100_000

// maxFlagSection bounds the bytes of .GCC.command.line read.
const maxFlagSection = 256 << 20

// flagRecords reads every record an ELF carries of how it was compiled:
// each command line in .GCC.command.line and each compile unit's
// DW_AT_producer, identical ones once. Both are read, so a record
// replaced in one place still tells in the other; source names the
// places that held records.
func flagRecords(f *elf.File, data []byte) (recs []flagrec.Record, source string, compiled bool) {
	compiled = f.Section(".comment") != nil
	var sources []string
	for _, src := range []struct {
		name string
		recs []flagrec.Record
	}{{sourceSection, sectionRecords(f, data)}, {sourceProducer, producers(f, data)}} {
		if len(src.recs) > 0 {
			sources = append(sources, src.name)
			recs = append(recs, src.recs...)
		}
	}
	if recs = distinct(recs); len(recs) == 0 {
		return nil, "", compiled
	}
	return recs, strings.Join(sources, ", "), true
}

// distinct keeps the first of records with the same arguments (GCC writes
// the same line in both places; clang's producer repeats its command line).
func distinct(recs []flagrec.Record) []flagrec.Record {
	seen := map[string]bool{}
	out := recs[:0]
	for _, r := range recs {
		k := r.Dialect + "\x00" + strings.Join(r.Args, "\x00")
		if !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}

// sectionRecords reads the command lines of .GCC.command.line.
func sectionRecords(f *elf.File, data []byte) []flagrec.Record {
	s := f.Section(".GCC.command.line")
	if s == nil || s.Type == elf.SHT_NOBITS || s.Size > maxFlagSection {
		return nil
	}
	b := sectionBytes(data, s)
	if b == nil {
		if rb, err := s.Data(); err == nil {
			b = rb
		}
	}
	var strs []string
	for _, p := range bytes.Split(b, []byte{0}) {
		if len(p) > 0 {
			strs = append(strs, string(p))
		}
	}
	return flagrec.Split(strs)
}

// producers reads the DW_AT_producer of each compile unit (GCC writes its
// switches there by default with -g, clang its command line with
// -grecord-command-line); only the unit entries are read.
func producers(f *elf.File, data []byte) (recs []flagrec.Record) {
	defer func() {
		if recover() != nil {
			recs = nil
		}
	}()
	d := producerDWARF(f, data)
	if d == nil {
		return nil
	}
	seen := map[string]bool{}
	r := d.Reader()
	for n := 0; n < maxProducerUnits; n++ {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit {
			if p, ok := e.Val(dwarf.AttrProducer).(string); ok && !seen[p] {
				seen[p] = true
				if rec, ok := flagrec.Parse(p); ok {
					recs = append(recs, rec)
				}
			}
		}
		r.SkipChildren() // of a unit: on to the next unit
	}
	return recs
}

// judgeFlags reads and judges an ELF's records against the policy.
func (a *analyzed) judgeFlags(f *elf.File, data []byte, pol *Policy) {
	if pol == nil || pol.Flags == nil {
		return
	}
	recs, source, compiled := flagRecords(f, data)
	var fs []Finding
	a.file.Flags, fs = judgeRecords(a.file.Path, recs, source, compiled, pol)
	a.findings = append(a.findings, fs...)
	if pol.keepDigests {
		for _, r := range recs {
			a.digests = append(a.digests, r.Digest())
		}
	}
}

// judgeRecords judges an object's records against the policy: its flags
// and the findings they make. With origins (Policy.origins) the records of
// each origin are judged apart, each origin's worst making its own
// finding, and lost tuning in the tree's own records is an error unless
// the user accepted it.
func judgeRecords(path string, recs []flagrec.Record, source string, compiled bool, pol *Policy) (ff *FileFlags, findings []Finding) {
	ff = &FileFlags{Source: source, Records: len(recs)}
	sev := SevWarning
	if pol.RequireFlags {
		sev = SevError
	}
	if len(recs) == 0 {
		if !compiled {
			ff.Verdict = assembly
			return ff, findings
		}
		ff.Verdict = flagrec.Unrecorded
		findings = append(findings, Finding{Kind: KindUnrecorded, Severity: sev, Path: path,
			Detail: "compiled code that records no compile flags (no .GCC.command.line, no switches in DW_AT_producer, no command line in LTO bitcode's metadata): build it with -frecord-gcc-switches (GCC) or -frecord-command-line (clang), and do not strip the record"})
		return ff, findings
	}
	ff.Verdicts = map[string]int{}
	all := &worstOf{}
	var byOrigin map[string]*worstOf
	if pol.origins != nil {
		byOrigin = map[string]*worstOf{}
	}
	for _, r := range recs {
		res := pol.Flags.Resolve(r)
		v, d := pol.Flags.Judge(res)
		ff.Verdicts[v]++
		all.add(v, res, d)
		if byOrigin != nil {
			o := pol.origins.of(r)
			if byOrigin[o] == nil {
				byOrigin[o] = &worstOf{}
			}
			byOrigin[o].add(v, res, d)
		}
	}
	ff.Verdict, ff.Flags, ff.Detail = all.verdict, all.res.Describe(), all.detail
	if byOrigin == nil {
		return ff, all.findings(path, len(recs), "", sev, pol)
	}
	ff.Origins = map[string]*OriginFlags{}
	for _, o := range slices.Sorted(maps.Keys(byOrigin)) {
		w := byOrigin[o]
		ff.Origins[o] = &OriginFlags{Records: w.n, Verdict: w.verdict, Flags: w.res.Describe()}
		findings = append(findings, w.findings(path, len(recs), o, sev, pol)...)
	}
	return ff, findings
}

// worstOf is the worst verdict of some records, and how many there were
// and of which verdict.
type worstOf struct {
	n       int
	counts  map[string]int
	verdict string
	res     flagrec.Resolved
	detail  string
}

func (w *worstOf) add(v string, res flagrec.Resolved, detail string) {
	if w.counts == nil {
		w.counts = map[string]int{}
	}
	w.n++
	w.counts[v]++
	if w.verdict == "" || flagrec.Rank(v) > flagrec.Rank(w.verdict) {
		w.verdict, w.res, w.detail = v, res, detail
	}
}

// findings are the findings of the worst verdict of records of origin
// ("": not known) in an object holding total records.
func (w *worstOf) findings(path string, total int, origin, sev string, pol *Policy) []Finding {
	flags := w.res.Describe()
	var of []string
	if total > 1 {
		of = append(of, fmt.Sprintf("%d of its %d recorded command lines", w.counts[w.verdict], total))
	}
	switch {
	case origin == OriginTree:
		of = append(of, "compiled by the tree's own build")
	case origin != "":
		of = append(of, "compiled by "+origin)
	}
	in := ""
	if len(of) > 0 {
		in = " (" + strings.Join(of, ", ") + ")"
	}
	switch w.verdict {
	case flagrec.Beyond:
		return []Finding{{Kind: KindFlagsBeyond, Severity: SevError, Path: path, Origin: origin,
			Detail: fmt.Sprintf("compiled with %s%s: %s; on %s it may die with SIGILL", flags, in, w.detail, pol.CPU)}}
	case flagrec.Lost:
		lsev, why := sev, "lost tuning: a flag after the target's overrode it"
		if origin == OriginTree {
			if pol.origins.Accepted == "" {
				lsev = SevError
				why += "; the tree's own objects must be at the target's -march: patch the tree's -march, or accept it with --accept-lost-tuning REASON"
			} else {
				why += "; accepted (--accept-lost-tuning): " + pol.origins.Accepted
			}
		}
		return []Finding{{Kind: KindLostTuning, Severity: lsev, Path: path, Origin: origin,
			Detail: fmt.Sprintf("compiled with %s%s: %s (%s)", flags, in, w.detail, why)}}
	case flagrec.Unresolved:
		return []Finding{{Kind: KindFlagsUnresolved, Severity: sev, Path: path, Origin: origin,
			Detail: fmt.Sprintf("recorded flags cannot be judged%s: %s", in, w.detail)}}
	}
	return nil
}

// sourceBitcode: the command line in LTO bitcode's metadata.
const sourceBitcode = "llvm.commandline"

// bitcodeFlags judges what native LTO bitcode records it was compiled
// with (its machine code is made at link time, so only the flags can be
// read here).
func (w *walker) bitcodeFlags(name string, b []byte) {
	if w.pol == nil || w.pol.Flags == nil {
		return
	}
	strs, ok := bitcodeStrings(b)
	var recs []flagrec.Record
	if ok {
		for _, s := range strs {
			if r, ok := flagrec.Parse(s); ok && r.Dialect == "clang" {
				recs = append(recs, r)
			}
		}
	}
	source := ""
	if recs = distinct(recs); len(recs) > 0 {
		source = sourceBitcode
	}
	_, fs := judgeRecords(name, recs, source, true, w.pol)
	w.add(fs...)
	if w.pol.keepDigests {
		w.mu.Lock()
		for _, r := range recs {
			w.digests[r.Digest()] = true
		}
		w.mu.Unlock()
	}
}

// summarizeFlags fills the report's flag summary from its files.
func (r *Report) summarizeFlags() {
	if r.Policy == nil || r.Policy.Flags == nil {
		return
	}
	s := &FlagSummary{Requested: r.Policy.Flags.March, Verdicts: map[string]int{}}
	landed := map[string]int{}
	compiled, at := 0, 0
	for _, f := range r.Files {
		if f.Flags == nil {
			continue
		}
		s.Objects++
		s.Verdicts[f.Flags.Verdict]++
		if f.Flags.Verdict == assembly {
			continue
		}
		compiled++
		if f.Flags.Verdict == flagrec.AtTarget {
			at++
		}
		if f.Flags.Flags != "" {
			landed[f.Flags.Flags]++
		}
		for o, of := range f.Flags.Origins {
			if of.Verdict == flagrec.Lost {
				if s.LostBy == nil {
					s.LostBy = map[string]int{}
				}
				s.LostBy[o]++
			}
		}
	}
	if r.Policy.origins != nil {
		s.LostTuningAccepted = r.Policy.origins.Accepted
	}
	if compiled > 0 {
		s.AtTarget = float64(at) / float64(compiled)
	}
	s.Landed = topN(landed, 5)
	r.Summary.Flags = s
}

// topN keeps the n largest counts (ties by name) and sums the rest as "other".
func topN(m map[string]int, n int) map[string]int {
	if len(m) <= n {
		if len(m) == 0 {
			return nil
		}
		return m
	}
	out := map[string]int{}
	for i, k := range sortedByCount(m) {
		if i < n {
			out[k] = m[k]
		} else {
			out["other"] += m[k]
		}
	}
	return out
}

// flagLine is the summary's flag read-back line, "" without one.
func (s *FlagSummary) line() string {
	if s == nil || s.Objects == 0 {
		return ""
	}
	return fmt.Sprintf("flags: %d object(s), %.0f%% at the target's -march=%s (%s)", s.Objects, 100*s.AtTarget, s.Requested, strings.TrimSuffix(mapList(s.Verdicts), ", "))
}

func isFlagKind(k string) bool {
	return k == KindFlagsBeyond || k == KindLostTuning || k == KindFlagsUnresolved || k == KindUnrecorded
}
