// Package report turns a release (its build records, or its signed images
// and their attestations) into plain data, and that data into Markdown and a
// self-contained HTML page.
package report

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/scan"
)

// Report is one release: every target's build and image.
type Report struct {
	// From is what the report was made from: a build directory or an image reference.
	From string `json:"from"`
	// Images is where the images were looked up ("" when not).
	Images string `json:"images,omitempty"`
	// Trust says what signatures were checked against ("" when not checked).
	Trust   string   `json:"trust,omitempty"`
	Doris   []string `json:"doris"`
	Targets []Target `json:"targets"`
	// Shared are the release's images that belong to no single target: the
	// multi-arch index and images shared by every target (the FE).
	Shared []Image `json:"shared,omitempty"`
	Totals Totals  `json:"totals"`
	// Problems are what does not add up: images without builds.
	Problems []string `json:"problems,omitempty"`
	// Made says which dorisarm made the report, when, and from which
	// matrix the builds were planned (Stamp).
	Made *Made `json:"made,omitempty"`
}

// Made is a report's provenance.
type Made struct {
	Dorisarm string `json:"dorisarm"`
	Date     string `json:"date"`
	// Matrix are the digests of the matrix files the builds were planned
	// with (each target's record); more than one is worth a look.
	Matrix []string `json:"matrix_digests"`
}

// Stamp records the dorisarm version that made r and when (UTC).
func (r *Report) Stamp(dorisarm string, at time.Time) {
	m := &Made{Dorisarm: dorisarm, Date: at.UTC().Format("2006-01-02 15:04 UTC"), Matrix: []string{}}
	for _, t := range r.Targets {
		if t.Matrix != "" && !slices.Contains(m.Matrix, t.Matrix) {
			m.Matrix = append(m.Matrix, t.Matrix)
		}
	}
	slices.Sort(m.Matrix)
	r.Made = m
}

// Totals sum the targets.
type Totals struct {
	Targets    int     `json:"targets"`
	Clean      int     `json:"scans_clean"`
	Signed     int     `json:"signed"`
	Attested   int     `json:"attested"`
	CacheHits  int     `json:"cache_hits"`
	CacheSteps int     `json:"cache_steps"`
	Seconds    float64 `json:"build_seconds"`
	ImageBytes int64   `json:"image_bytes"`
}

// HitRate is the share of steps that came from the cache, in percent.
func (t Totals) HitRate() float64 { return percent(t.CacheHits, t.CacheSteps) }

// Target is one target's build and image.
type Target struct {
	// Matrix is the digest of the matrix file the target was planned with.
	Matrix      string `json:"matrix_digest,omitempty"`
	Doris       string `json:"doris"`
	Target      string `json:"target"`
	Description string `json:"description,omitempty"`
	CPU         string `json:"cpu"`
	OS          string `json:"os"`
	ISA         string `json:"isa"`
	March       string `json:"march,omitempty"`
	// Tune is the -mtune= or -mcpu= the compiler was given ("" when neither).
	Tune            string `json:"tune,omitempty"`
	Compiler        string `json:"compiler"`
	CompilerVersion string `json:"compiler_version"`
	// Rejected are the compilers the build tried first and fell back from.
	Rejected []string `json:"rejected_compilers,omitempty"`
	Flags    string   `json:"flags"`
	PGO      bool     `json:"pgo"`
	// PGONone says why a target that uses PGO was built without it.
	PGONone string   `json:"pgo_none,omitempty"`
	LTO     string   `json:"lto,omitempty"`
	Patches []string `json:"patches"`
	// Extensions are the CPU's allowed extensions and every extension the
	// build's code uses.
	Extensions []Extension `json:"extensions"`
	// Glibc is the newest glibc symbol version the build needs; GlibcMax the target OS's.
	Glibc    string `json:"glibc_required,omitempty"`
	GlibcMax string `json:"glibc_max"`
	Glibcxx  string `json:"glibcxx_required,omitempty"`
	// GlibcWaived: the allow file waived the scan's glibc findings.
	GlibcWaived bool `json:"glibc_waived,omitempty"`
	// Sysroot is the target OS's libraries the build linked against (name,
	// glibc, digest); SysrootWaiver the user's reason for building without.
	Sysroot       string `json:"sysroot,omitempty"`
	SysrootWaiver string `json:"sysroot_waiver,omitempty"`
	// LostTuning is the user's reason for a BE built at a -march its tree
	// fixes (--accept-lost-tuning).
	LostTuning string `json:"lost_tuning,omitempty"`
	// Landed is the flag read-back of the build's objects: how many are at
	// the target's -march, and the flags that landed (nil: not read back).
	Landed *scan.FlagSummary `json:"landed,omitempty"`
	// Scanned is false when the build skipped its scan.
	Scanned    bool    `json:"scanned"`
	Clean      bool    `json:"scan_clean"`
	Violations int     `json:"violations"`
	Smoke      string  `json:"smoke,omitempty"`
	CacheHits  int     `json:"cache_hits"`
	CacheSteps int     `json:"cache_steps"`
	Seconds    float64 `json:"build_seconds"`
	BuildID    string  `json:"build_digest"`
	Image      *Image  `json:"image,omitempty"`
	// Problems are what does not add up: no image, an image of another build.
	Problems []string `json:"problems,omitempty"`
}

// HitRate is the share of the build's steps that came from the cache, in percent.
func (t Target) HitRate() float64 { return percent(t.CacheHits, t.CacheSteps) }

// GlibcOK reports whether the build's glibc need fits the target OS.
// A need the allow file waived is not a failure; the report says so.
func (t Target) GlibcOK() bool { return t.GlibcState() != "bad" }

// GlibcState is ok (fits the OS), waived (too new, waived by the allow
// file) or bad.
func (t Target) GlibcState() string {
	switch {
	case scan.CompareVersions(t.Glibc, t.GlibcMax) <= 0:
		return "ok"
	case t.GlibcWaived:
		return "waived"
	}
	return "bad"
}

// Extension is one ISA extension of a target.
type Extension struct {
	Name string `json:"name"`
	// Allowed: the target CPU has it. Enabled: -march turns it on.
	Allowed bool `json:"allowed"`
	Enabled bool `json:"enabled"`
	// Instructions found in code that runs unconditionally, behind a
	// run-time check, and outside the CPU but waived by the allow file.
	Unguarded int `json:"unguarded"`
	Guarded   int `json:"guarded"`
	Waived    int `json:"waived"`
}

// Total is every instruction of the extension found.
func (e Extension) Total() int { return e.Unguarded + e.Guarded + e.Waived }

// Bad reports whether the extension is used where the CPU cannot run it.
func (e Extension) Bad() bool { return !e.Allowed && e.Unguarded > 0 }

// Image is one published image or index.
type Image struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Size is what a pull downloads: manifest, config and layers (for an
	// index, each platform's).
	Size         int64  `json:"size"`
	Platforms    int    `json:"platforms,omitempty"`
	Signature    Status `json:"signature"`
	Attestations Status `json:"attestations"`
	// BuildID is the image's io.dorisarm.build.digest ("" for shared images).
	BuildID string `json:"build_digest,omitempty"`
}

// Status of a signature or attestation check.
type Status struct {
	State  string `json:"state"` // verified, failed, not checked, none
	Detail string `json:"detail,omitempty"`
}

const (
	Verified   = "verified"
	Failed     = "failed"
	NotChecked = "not checked"
	None       = "none"
)

// FromRecord is a target as its build record tells it.
func FromRecord(rec *build.Record) Target {
	t := fromCell(rec.Cell)
	t.Matrix = rec.Matrix
	t.SysrootWaiver = rec.Cell.SysrootWaiver
	t.LostTuning = rec.Cell.LostTuning
	if sr := rec.Cell.Sysroot; sr != nil {
		t.Sysroot = sysrootText(sr.Name, sr.Glibc, sr.Digest)
	}
	t.Compiler, t.CompilerVersion = rec.Compiler.Name, rec.Compiler.Version
	for _, r := range rec.RejectedCompilers {
		t.Rejected = append(t.Rejected, r.Compiler)
	}
	t.CacheHits, t.CacheSteps = len(rec.Cache.Hits), len(rec.Cache.Hits)+len(rec.Cache.Misses)
	t.Seconds, t.BuildID = rec.Seconds, rec.ContentDigest()
	flags := rec.Flags[ReleasePhase(rec.Flags)]
	t.Flags = strings.Join(flags, " ")
	t.Tune = tuneOf(flags)
	for _, p := range rec.Patches {
		t.Patches = append(t.Patches, p.ID)
	}
	t.applyScan(rec.Cell, rec.Scan)
	pass, fail := 0, 0
	for _, s := range rec.Smoke {
		if s.Exit == 0 && s.Signal == "" {
			pass++
		} else {
			fail++
		}
	}
	if len(rec.Smoke) > 0 {
		t.Smoke = fmt.Sprintf("%d passed", pass)
		if fail > 0 {
			t.Smoke += fmt.Sprintf(", %d failed", fail)
		}
		if m := rec.Smoke[0].Model; m != "" {
			t.Smoke += " under qemu -cpu " + m
		}
	}
	return t
}

// fromCell starts a target's row with what its cell says.
func fromCell(c plan.CellInfo) Target {
	return Target{
		Doris: c.Doris, Target: c.Target, Description: c.Description, CPU: c.CPU, OS: c.OS, ISA: c.ISA,
		March: c.March, PGO: c.PGO, PGONone: c.PGONone, LTO: c.LTO, GlibcMax: c.Glibc,
	}
}

func sysrootText(name, glibc, digest string) string {
	if len(digest) > 19 {
		digest = digest[:19]
	}
	return fmt.Sprintf("%s (glibc %s, %s)", name, glibc, digest)
}

// ReleasePhase is the phase whose flags made the shipped binaries: the
// optimized PGO phase when there is one.
func ReleasePhase(flags map[string][]string) string {
	if _, ok := flags["pgo"]; ok {
		return "pgo"
	}
	return "release"
}

func tuneOf(flags []string) string {
	for _, f := range flags {
		for _, p := range []string{"-mcpu=", "-mtune="} {
			if v, ok := strings.CutPrefix(f, p); ok {
				return p + v
			}
		}
	}
	return ""
}

// applyScan fills the ISA, glibc and scan columns from a scan summary.
func (t *Target) applyScan(c plan.CellInfo, s *scan.Summary) {
	allowed, enabled := set(c.Allowed), set(c.Enabled)
	names := map[string]bool{}
	for _, a := range c.Allowed {
		names[a] = true
	}
	if s != nil {
		t.Scanned, t.Clean, t.Violations = true, s.Clean, s.Violations
		t.Landed = s.Flags
		t.Glibc, t.Glibcxx = s.GlibcMax, s.GlibcxxMax
		t.GlibcWaived = s.AllowedByKind[scan.KindGlibc] > 0
		for f, n := range s.Features {
			if n > 0 {
				names[f] = true
			}
		}
	}
	t.Extensions = nil
	for n := range names {
		e := Extension{Name: n, Allowed: allowed[n], Enabled: enabled[n]}
		if s != nil {
			e.Guarded, e.Waived = s.Guarded[n], s.Waived[n]
			e.Unguarded = max(s.Features[n]-e.Guarded-e.Waived, 0)
		}
		t.Extensions = append(t.Extensions, e)
	}
	// Allowed ones first, then the rest; each group by name.
	sort.Slice(t.Extensions, func(i, j int) bool {
		a, b := t.Extensions[i], t.Extensions[j]
		if a.Allowed != b.Allowed {
			return a.Allowed
		}
		return a.Name < b.Name
	})
}

// Total recomputes the totals.
func (r *Report) Total() {
	t := Totals{Targets: len(r.Targets)}
	vs := map[string]bool{}
	for _, x := range r.Targets {
		vs[x.Doris] = true
		if x.Clean {
			t.Clean++
		}
		t.CacheHits += x.CacheHits
		t.CacheSteps += x.CacheSteps
		t.Seconds += x.Seconds
		if x.Image != nil {
			t.ImageBytes += x.Image.Size
			if x.Image.Signature.State == Verified {
				t.Signed++
			}
			if x.Image.Attestations.State == Verified {
				t.Attested++
			}
		}
	}
	for _, s := range r.Shared {
		t.ImageBytes += s.Size
	}
	r.Doris = r.Doris[:0]
	for v := range vs {
		r.Doris = append(r.Doris, v)
	}
	sort.Strings(r.Doris)
	r.Totals = t
}

// Sort orders targets by Doris version, then as the matrix names them.
func (r *Report) Sort() {
	sort.SliceStable(r.Targets, func(i, j int) bool {
		a, b := r.Targets[i], r.Targets[j]
		if a.Doris != b.Doris {
			return a.Doris < b.Doris
		}
		return a.Target < b.Target
	})
}

func set(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func percent(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// LandedText says what the flag read-back found: the share of objects at
// the target's -march and, when not all are, the most common flags that
// landed instead; "not read back" without one.
func (t Target) LandedText() string {
	l := t.Landed
	if l == nil || l.Objects == 0 {
		return "not read back"
	}
	noun := "objects"
	if l.Objects == 1 {
		noun = "object"
	}
	s := fmt.Sprintf("%s of %d %s at target", Percent(100*l.AtTarget), l.Objects, noun)
	if l.AtTarget >= 1 {
		return s
	}
	best, n := "", 0
	req := "-march=" + l.Requested
	for k, c := range l.Landed {
		// Describe starts with the -march that won, then ", " or " (".
		atReq := k == req || strings.HasPrefix(k, req+",") || strings.HasPrefix(k, req+" ")
		if (c > n || c == n && k < best) && !atReq {
			best, n = k, c
		}
	}
	if best != "" {
		s += fmt.Sprintf("; %d: %s", n, best)
	}
	return s
}

// LandedOK reports whether every compiled object is at the target's flags.
func (t Target) LandedOK() bool {
	return t.Landed != nil && t.Landed.Objects > 0 && t.Landed.AtTarget >= 1
}
