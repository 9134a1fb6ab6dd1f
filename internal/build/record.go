package build

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/source"
	"github.com/dorisarm/dorisarm/internal/textfmt"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// RecordFile is the build record's name inside a build's output directory.
const RecordFile = "dorisarm-build.json"

// Record is the build record (DESIGN.md): what was built, from what, how.
type Record struct {
	Schema   int                `json:"schema"`
	Cell     plan.CellInfo      `json:"cell"`
	Source   plan.SourceInfo    `json:"source"`
	Recipe   plan.RecipeInfo    `json:"recipe"`
	Matrix   string             `json:"matrix_digest"`
	Compiler toolchain.Identity `json:"compiler"`
	// RejectedCompilers are the target's compilers tried first whose
	// toolchain step refused them (the build fell back to Compiler).
	RejectedCompilers []Rejection         `json:"rejected_compilers,omitempty"`
	Flags             map[string][]string `json:"flags"`
	CMakeCache        []string            `json:"cmake_cache,omitempty"`
	Patches           []plan.PatchRef     `json:"patches"`
	Packages          []Package           `json:"packages"`
	// NotUsed are the tree's packages the target's product does not use
	// (the recipe's thirdparty.not_used), with why and where it shows.
	NotUsed    []plan.NotUsedPackage `json:"not_used,omitempty"`
	PGOProfile string                `json:"pgo_profile,omitempty"`
	Cache      CacheStats            `json:"cache"`
	Steps      []StepRecord          `json:"steps"`
	Smoke      []SmokeResult         `json:"smoke,omitempty"`
	Scan       *scan.Summary         `json:"scan,omitempty"`
	// PackageFlags is the flag read-back of what each third-party package
	// installed (Scan.Flags has the published output's).
	PackageFlags map[string]*scan.FlagSummary `json:"package_flags,omitempty"`
	// PackageScans is what the scan found in each package's installed
	// files, judged alone (machines, instructions by extension, findings).
	PackageScans map[string]*PackageScan `json:"package_scans,omitempty"`
	// Slice is set when the build made a BE part way (--be-configure-only,
	// --be-targets): its output is be-slice/, not a BE.
	Slice *plan.SliceInfo `json:"slice,omitempty"`
	// ThirdpartyBase is the prebuilt third-party install the build started
	// from (--thirdparty-base), by digest.
	ThirdpartyBase *plan.BaseInputs `json:"thirdparty_base,omitempty"`
	// BuildTools are the build machine's programs its BE steps ran in place
	// of the tree's (a cross build's code generators).
	BuildTools []plan.BuildToolInfo `json:"build_tools,omitempty"`
	// CXXRuntime is the C++ runtime the build's C++ code compiled and
	// linked against instead of the sysroot's own (runtimes in the
	// matrix): which, for what glibc, and its step's key.
	CXXRuntime *CXXRuntime `json:"cxx_runtime,omitempty"`
	// Partial is set on a partial build: the packages it lacks.
	Partial  *Partial     `json:"partial,omitempty"`
	ScanSkip string       `json:"scan_skipped,omitempty"`
	Outputs  []OutputFile `json:"outputs"`
	Warnings []string     `json:"warnings,omitempty"`
	Seconds  float64      `json:"seconds"`
	// Jobs is the --jobs the steps ran with (make -j and the like).
	Jobs int `json:"jobs,omitempty"`
	// UpToDate is set (not stored) when a build found its published output current.
	UpToDate bool      `json:"-"`
	Finished time.Time `json:"finished"`
}

// Package is a third-party package as built.
type Package struct {
	Entry   string `json:"entry"`
	Version string `json:"version"`
	Archive string `json:"archive"`
	MD5     string `json:"md5"`
	SHA256  string `json:"sha256,omitempty"`
}

// PackageScan is the scan of the files one third-party package installed.
type PackageScan struct {
	Files      int            `json:"files"`
	ELF        int            `json:"elf"`
	Machines   map[string]int `json:"machines,omitempty"`
	Features   map[string]int `json:"features,omitempty"`
	Guarded    map[string]int `json:"guarded,omitempty"`
	Violations int            `json:"violations"`
	ByKind     map[string]int `json:"by_kind,omitempty"`
}

// CacheStats counts step cache use.
type CacheStats struct {
	Hits   []string `json:"hits"`
	Misses []string `json:"misses"`
	// Pulled are the hits restored from the remote cache (--cache-from):
	// each step, the artifact it came from by digest, and who signed it.
	Pulled []PulledStep `json:"pulled,omitempty"`
	// Pushed counts entries offered to the remote cache (--cache-to).
	Pushed int `json:"pushed,omitempty"`
	// NotPushed are the local hits a build with --cache-to did not offer:
	// entries an earlier process left, which this build neither made nor
	// verified against a trusted signature.
	NotPushed []string `json:"not_pushed,omitempty"`
}

// PulledStep is a step whose result came from the remote cache.
type PulledStep struct {
	Step string `json:"step"`
	RemoteEntry
}

// StepRecord is one step's outcome.
type StepRecord struct {
	ID      string  `json:"id"`
	Key     string  `json:"key"`
	Cached  bool    `json:"cached"`
	Seconds float64 `json:"seconds"`
	// RanSeconds is, for a step restored from the cache, how long it took
	// when it ran (the cache entry's record).
	RanSeconds float64 `json:"ran_seconds,omitempty"`
	// CPUSeconds is the user and system time of the programs the step ran
	// (for a restored step, RanCPUSeconds: when it ran), so a step's
	// profile says how many cores it kept busy: CPU / wall, at Jobs.
	CPUSeconds    float64 `json:"cpu_seconds,omitempty"`
	RanCPUSeconds float64 `json:"ran_cpu_seconds,omitempty"`
	// Needs are the steps it needs (the plan's edges), for replaying the
	// build's profile on other machines (dorisarm simulate).
	Needs []string `json:"needs,omitempty"`
	// CompileCache is what the compile cache (ccache) did for a build
	// step that ran: the compiles it answered and the ones it ran.
	CompileCache *CompileStats `json:"compile_cache,omitempty"`
}

// SmokeResult is one smoke run.
type SmokeResult struct {
	Command []string `json:"command"`
	Model   string   `json:"qemu_model,omitempty"`
	Exit    int      `json:"exit"`
	Signal  string   `json:"signal,omitempty"`
	Output  string   `json:"output,omitempty"`
}

// CXXRuntime says which C++ runtime a build used: the GCC release of its
// library, the glibc it was built for, its pinned source and the step
// (and key) that made it.
type CXXRuntime struct {
	Name      string `json:"name"`
	Libstdcxx string `json:"libstdcxx"`
	Glibc     string `json:"glibc"`
	Source    string `json:"source"`
	SHA256    string `json:"sha256"`
	Step      string `json:"step"`
	Key       string `json:"key"`
}

func newRecord(in Input) *Record {
	p := in.Plan
	r := &Record{Schema: RecordSchema, Cell: p.Cell, Source: p.Source, Recipe: p.Recipe, Matrix: p.Matrix, Compiler: p.Toolchain.Compiler,
		Flags: map[string][]string{}, CMakeCache: p.Toolchain.CMakeCache, Patches: p.Patches, RejectedCompilers: in.Rejected, NotUsed: p.NotUsed}
	for _, pk := range p.Packages {
		rp := Package{Entry: pk.Entry, Version: pk.Version, Archive: pk.Name, MD5: pk.MD5}
		// A fetch restored from the cache was verified against the lock
		// when it ran (the lock's checksum is part of its key).
		if in.Lock != nil {
			rp.SHA256 = in.Lock.Archives[pk.Name].SHA256
		}
		r.Packages = append(r.Packages, rp)
	}
	if r.Patches == nil {
		r.Patches = []plan.PatchRef{}
	}
	for _, s := range p.Steps {
		if in := s.Inputs.Runtime; in != nil {
			r.CXXRuntime = &CXXRuntime{Name: in.Name, Libstdcxx: in.Libstdcxx, Glibc: in.Glibc, Source: in.Source.URL, SHA256: in.Source.SHA256, Step: s.ID, Key: s.Key}
		}
	}
	for _, s := range p.Steps {
		switch {
		case s.Inputs.Base != nil:
			r.ThirdpartyBase = s.Inputs.Base
		case s.Inputs.Build != nil && len(s.Inputs.Build.Tools) > 0:
			r.BuildTools = s.Inputs.Build.Tools
		}
	}
	r.Cache.Hits, r.Cache.Misses = []string{}, []string{}
	return r
}

func (r *Record) addArchive(entry, name string, sum source.LockEntry) {
	for i := range r.Packages {
		if r.Packages[i].Entry == entry {
			r.Packages[i].SHA256 = sum.SHA256
		}
	}
}

// upToDate reports whether the build published in dir came from exactly this
// plan (every step key equal) and its files are still what the record says.
func upToDate(p *plan.Plan, dir string) (*Record, bool) {
	rec, err := Verify(dir)
	// Every step of the plan, the scan step (the last, which writes the
	// record) included; records of dorisarm before it lack the scan step.
	if err != nil || len(p.Steps) == 0 || len(rec.Steps) != len(p.Steps) {
		return nil, false
	}
	for i, s := range p.Steps {
		if rec.Steps[i].ID != s.ID || rec.Steps[i].Key != s.Key {
			return nil, false
		}
	}
	return rec, true
}

// Verify reads the build record of the published build in dir and checks
// that dir holds exactly what it lists: every file with its bytes and
// mode, every link with its target, every directory, and nothing else.
func Verify(dir string) (*Record, error) {
	path := filepath.Join(dir, RecordFile)
	rec, err := ReadRecord(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s has no build record (%s): is it a dorisarm build --out directory (<out>/<doris>/<target>)?", dir, RecordFile)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	outs, err := DigestTree(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if err := rec.checkEntries(dir, outs); err != nil {
		return nil, err
	}
	return rec, nil
}

// HitRate is the share of cacheable steps restored from the cache.
func (r *Record) HitRate() float64 {
	n := len(r.Cache.Hits) + len(r.Cache.Misses)
	if n == 0 {
		return 0
	}
	return float64(len(r.Cache.Hits)) / float64(n)
}

func (r *Record) write(path string) error {
	r.Finished = time.Now().UTC()
	data, err := json.MarshalIndent(textfmt.NoNulls(r), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// maxRecord bounds a build record read back: a real one is a few kB.
const maxRecord = 16 << 20

// ReadRecord reads a build record.
func ReadRecord(path string) (*Record, error) {
	data, err := fsutil.ReadFile(path, maxRecord)
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, jsonAt(data, err)
	}
	return &r, nil
}

// jsonAt says where in data a JSON syntax or type error is (line and
// column), so a damaged record can be found in an editor.
func jsonAt(data []byte, err error) error {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return err
	}
	// Offset counts the bytes read when the error was found: the one at
	// fault is the last of them.
	off = min(max(off-1, 0), int64(len(data)))
	before := data[:off]
	line := 1 + bytes.Count(before, []byte("\n"))
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

// ContentDigest identifies what a build is, leaving out when and how fast
// it ran: sha256 over its cell (Doris version and target), plan step keys
// and output entries (files, links with their targets, directories). Two builds of the same cell and plan with the same
// outputs have the same content digest, whatever their timings and cache
// hits; images carry it.
func (r *Record) ContentDigest() string {
	h := sha256.New()
	// The cell first: two targets with the same CPU and flags (graviton2 and
	// ampere-altra) share every step and output, but are different builds,
	// with their own images and provenance.
	fmt.Fprintf(h, "cell %s %s\n", r.Cell.Doris, r.Cell.Target)
	for _, s := range r.Steps {
		fmt.Fprintf(h, "step %s %s\n", s.ID, s.Key)
	}
	outs := append([]OutputFile{}, r.Outputs...)
	sort.Slice(outs, func(i, j int) bool { return outs[i].Path < outs[j].Path })
	for _, o := range outs {
		io.WriteString(h, digestLine(o))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// digestLine is an output entry's line of the content digest, its path
// and target quoted (a space in one cannot pass for the other). A regular
// file without a mode (a schema 1 record's) has the line it always had, so
// old records keep their digests.
func digestLine(o OutputFile) string {
	switch o.Type {
	case "":
		if o.Mode == "" {
			return fmt.Sprintf("file %s %d %s\n", o.Path, o.Size, o.SHA256)
		}
		return fmt.Sprintf("file %q %d %s %s\n", o.Path, o.Size, o.SHA256, o.Mode)
	case TypeLink:
		return fmt.Sprintf("link %q %q\n", o.Path, o.Target)
	case TypeDir:
		return fmt.Sprintf("dir %q %s\n", o.Path, o.Mode)
	}
	return fmt.Sprintf("%q %q\n", o.Type, o.Path)
}
