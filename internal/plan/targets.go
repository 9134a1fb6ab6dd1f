package plan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/memo"
	"github.com/dorisarm/dorisarm/internal/patch"
	"github.com/dorisarm/dorisarm/internal/pgo"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/source"
	"github.com/dorisarm/dorisarm/internal/sysroot"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// Request asks for the plans of one source tree for several targets.
type Request struct {
	Matrix *matrix.Matrix
	// Targets is a target name, a comma-separated list, or "all".
	Targets string
	Tree    string
	Recipe  *recipe.Recipe
	// Doris is the Doris version ("": the version the tree declares).
	Doris string
	// Compiler picks one of a target's compilers instead of the first
	// installed.
	Compiler string
	// PGOProfile is a merged profile file or directory (skips training).
	PGOProfile string
	// Packages limits the plan to these third-party packages.
	// Slice builds the BE part way (--be-configure-only, --be-targets).
	Slice    *Slice
	Packages []string
	// ThirdpartyBase is a prebuilt third-party install (a directory) the
	// build starts from; "" for none.
	ThirdpartyBase string
	// SysrootWaiver builds against this machine's libraries, for this
	// recorded reason, instead of the target OS's sysroot.
	SysrootWaiver string
	// AcceptLostTuning builds a BE whose tree fixes an -march no patch
	// replaces, for this recorded reason.
	AcceptLostTuning string
	// SysrootCache is where sysroots (and which compilers passed their
	// check against one) are kept.
	SysrootCache string
	// Registry reaches the registries of image sysroots.
	Registry registry.Options
}

// Planned is one target's plan with what building it needs.
type Planned struct {
	Plan      *Plan
	Toolchain *toolchain.Toolchain
	Series    *patch.Series
	Lock      *source.Lock
	// MakeSysroot makes (or finds) the sysroot the plan knows by its key:
	// the plan's sysroot step. Nil when the sysroot is waived.
	MakeSysroot func(context.Context) (*toolchain.Sysroot, error)
	// ProbeCache keeps the verdicts of the toolchain step's check.
	ProbeCache string
	// Runtime is what the plan's C++ runtime step needs of this machine;
	// nil when the plan has none.
	Runtime *RuntimeBuild
}

// ForTargets plans req's tree for each of its targets: the Doris series of
// the tree's version, the recipe's patch series and source lock, each
// target's sysroot and resolved toolchain. A missing compiler is a failed
// gate; everything else wrong is bad input.
func ForTargets(ctx context.Context, req Request) ([]Planned, error) {
	m, r := req.Matrix, req.Recipe
	targets, err := ExpandTargets(m, req.Targets)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(req.Tree); err != nil || !st.IsDir() {
		return nil, fault.Inputf("--source %s: not a directory", req.Tree)
	}
	ver := req.Doris
	if ver == "" {
		if ver, err = source.ReadVersion(req.Tree, r); err != nil {
			return nil, fault.Input(err)
		}
	} else if err := checkDorisFlag(req.Tree, r, ver); err != nil {
		return nil, err
	}
	var trunkNote string
	if req.Doris == "" {
		ver, trunkNote = trunkVersion(m, r, ver)
	}
	series, err := m.SeriesFor(ver)
	if err != nil {
		return nil, fault.Input(err)
	}
	ps, err := patch.LoadFor(r.Path(r.Patches), m)
	if err != nil {
		return nil, err
	}
	lock, err := source.ReadLock(r.Path(r.Lock))
	if err != nil {
		return nil, fault.Input(err)
	}
	profile, err := profileDigest(req.PGOProfile)
	if err != nil {
		return nil, err
	}
	var base *BaseInputs
	if req.ThirdpartyBase != "" {
		if base, err = CheckBase(req.ThirdpartyBase); err != nil {
			return nil, fault.Input(err)
		}
	}
	// The build machine's code generators and environment matter to BE and
	// FE steps only: a packages-only plan does not look for them.
	var tools []BuildToolInfo
	var hostEnv []HostEnvInfo
	if len(req.Packages) == 0 || req.Slice != nil {
		tools, hostEnv = ResolveBuildTools(ctx, r, memoDir(req.SysrootCache)), ResolveHostEnv(r)
	}
	var out []Planned
	for _, t := range targets {
		cell, err := m.Cell(series.Series, t)
		if err != nil {
			return nil, fault.Input(err)
		}
		// The sysroot by its key: made by the build's sysroot step, not here.
		sr, err := SysrootKey(ctx, m, cell, req.SysrootCache, req.SysrootWaiver, req.Registry)
		if err != nil {
			return nil, err
		}
		probes := ""
		var makeSysroot func(context.Context) (*toolchain.Sysroot, error)
		if sr != nil {
			probes = filepath.Join(req.SysrootCache, "sysroots", ".probes")
			cell, cache, ro := cell, req.SysrootCache, req.Registry
			makeSysroot = func(ctx context.Context) (*toolchain.Sysroot, error) {
				return Sysroot(ctx, m, cell, cache, "", ro)
			}
		}
		rt, rtIn, rtBuild, err := runtimeFor(ctx, m, r, cell, sr, req)
		if err != nil {
			return nil, err
		}
		tc, err := toolchain.Resolve(m, cell, toolchain.Options{Compiler: req.Compiler, Sysroot: sr, Runtime: rt, ProbeCache: probes, Memo: memoDir(req.SysrootCache)})
		if err != nil {
			var miss *toolchain.MissingError
			if errors.As(err, &miss) {
				return nil, fault.Gate(err)
			}
			return nil, fault.Input(err)
		}
		if req.PGOProfile != "" && cell.Target.PGO {
			// A profile the compiler cannot read fails the build late, with "bad magic".
			if _, err := pgo.Validate(req.PGOProfile, tc.Compiler.Dialect); err != nil {
				return nil, fault.Inputf("--pgo-profile for %s (%s %s): %w", t, tc.Compiler.Name, tc.Identity.Version, err)
			}
		}
		p, err := Make(Inputs{Matrix: m, Cell: cell, Recipe: r, Tree: req.Tree, Version: ver, Series: ps, Toolchain: tc, Lock: lock, Memo: memoDir(req.SysrootCache),
			Profile: profile, Packages: req.Packages, SysrootWaiver: req.SysrootWaiver, Slice: req.Slice,
			Base: base, BuildTools: tools, HostEnv: hostEnv, AcceptLostTuning: req.AcceptLostTuning, Runtime: rtIn})
		if err != nil {
			return nil, fault.Input(err)
		}
		if trunkNote != "" {
			p.Warnings = append([]string{trunkNote}, p.Warnings...)
		}
		out = append(out, Planned{Plan: p, Toolchain: tc, Series: ps, Lock: lock, MakeSysroot: makeSysroot, ProbeCache: probes, Runtime: rtBuild})
	}
	return out, nil
}

// trunkVersion maps the version a development tree declares (the
// recipe's version.trunk: Doris master's 0.0.0-trunk) to the newest series
// of the matrix, as <series>.0-trunk, and says so; other versions are
// returned as they are.
func trunkVersion(m *matrix.Matrix, r *recipe.Recipe, ver string) (string, string) {
	names := m.SeriesNames()
	if r.Version.Trunk == "" || ver != r.Version.Trunk || len(names) == 0 {
		return ver, ""
	}
	mapped := names[len(names)-1] + ".0-trunk"
	return mapped, fmt.Sprintf("the tree declares Doris %s (%s), a development tree (recipe %s version.trunk): it is planned as %s, the newest series in %s; pass --doris VERSION to plan it as another",
		ver, r.Version.File, r.Name, mapped, m.File)
}

// ExpandTargets expands "a,b" or "all" into target names.
func ExpandTargets(m *matrix.Matrix, spec string) ([]string, error) {
	if spec == "" {
		return nil, fault.Inputf("--target is required (a target name, a comma-separated list, or all; see dorisarm matrix)")
	}
	if spec == "all" {
		return m.TargetNames(), nil
	}
	var out []string
	for _, t := range strings.Split(spec, ",") {
		t = strings.TrimSpace(t)
		if _, err := m.Target(t); err != nil {
			return nil, fault.Input(err)
		}
		out = append(out, t)
	}
	return out, nil
}

func profileDigest(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	var d string
	var err error
	if st, serr := os.Stat(path); serr == nil && st.IsDir() {
		d, err = source.TreeDigest(path, nil)
	} else {
		d, err = source.FileDigest(path)
	}
	if err != nil {
		return "", fault.Inputf("--pgo-profile: %w", err)
	}
	return d, nil
}

// memoDir is where planning remembers what programs answered (a
// compiler's --version, a tree's vars.sh), beside the sysroots.
func memoDir(cacheDir string) memo.Dir {
	if cacheDir == "" {
		return ""
	}
	return memo.Dir(filepath.Join(cacheDir, "memo"))
}

// sysrootSpec is the sysroot spec of a cell's target OS and how to reach
// it; ok is false when the sysroot is waived.
func sysrootSpec(ctx context.Context, m *matrix.Matrix, cell matrix.Cell, cacheDir, waiver, glibc string, ro registry.Options) (spec sysroot.Spec, abs string, opts []sysroot.Option, ok bool, err error) {
	if waiver != "" {
		return spec, "", nil, false, nil
	}
	name := cell.OS.Sysroot[cell.ISA.Name]
	if name == "" {
		return spec, "", nil, false, fault.Inputf("target %s: %s has no sysroot for %s (oses.%s.sysroot in %s): add one, or pass --waive-sysroot REASON to link against this machine's libraries (the waiver and its reason are recorded, and the glibc gate is waived)",
			cell.Target.Name, cell.OS.ID, cell.ISA.Name, cell.OS.ID, m.File)
	}
	// apt and the unpacker run in other directories: the cache path must be absolute.
	if abs, err = filepath.Abs(cacheDir); err != nil {
		return spec, "", nil, false, err
	}
	sr := m.Sysroots[name]
	spec = sysroot.Spec{Name: name, Image: sr.Image, Digest: sr.Digest, Glibc: glibc, Triple: sr.Triple}
	if d := sr.Debian; d != nil {
		spec.Debian = &sysroot.DebianSpec{Suite: d.Suite, Arch: d.Arch, Packages: d.Packages, Mirror: d.Mirror}
	}
	opts = []sysroot.Option{sysroot.WithRemoteOptions(ro.Remote(ctx)...), sysroot.WithMemo(memoDir(abs)),
		sysroot.WithPlatform(v1.Platform{OS: cell.ISA.OCI.OS, Architecture: cell.ISA.OCI.Architecture, Variant: cell.ISA.OCI.Variant})}
	if ro.Insecure {
		opts = append(opts, sysroot.WithInsecure())
	}
	return spec, abs, opts, true, nil
}

// sysrootErr is a sysroot that could not be keyed or made (what says
// which: "sysroot", "cannot make sysroot"). A failure of the machine or the
// network (a full disk, a mirror or registry that cannot be reached) is
// said as it is and is no fault of the matrix: no waiver mends a full
// disk. Anything else is bad input, pointing at the matrix and the waiver.
func sysrootErr(m *matrix.Matrix, cell matrix.Cell, name, what string, err error) error {
	if fault.IsEnv(err) {
		return fault.Envf("target %s: %s %s for %s: %w", cell.Target.Name, what, name, cell.OS.ID, err)
	}
	return fault.Inputf("target %s: %s %s for %s: %w\n(check sysroots.%s in %s, or pass --waive-sysroot REASON to build against this machine's libraries, recorded as a waiver)",
		cell.Target.Name, what, name, cell.OS.ID, err, name, m.File)
}

// SysrootKey is the sysroot of a cell's target OS as a plan knows it: by
// the key of its spec, without making it. It returns nil with no error
// when the sysroot is waived.
func SysrootKey(ctx context.Context, m *matrix.Matrix, cell matrix.Cell, cacheDir, waiver string, ro registry.Options) (*toolchain.Sysroot, error) {
	return sysrootKey(ctx, m, cell, cacheDir, waiver, cell.OS.Glibc, ro)
}

// sysrootKeyAt is the key of the cell's sysroot capped at glibc instead
// of its OS's (a C++ runtime's).
func sysrootKeyAt(ctx context.Context, m *matrix.Matrix, cell matrix.Cell, cacheDir, glibc string, ro registry.Options) (*toolchain.Sysroot, error) {
	return sysrootKey(ctx, m, cell, cacheDir, "", glibc, ro)
}

func sysrootKey(ctx context.Context, m *matrix.Matrix, cell matrix.Cell, cacheDir, waiver, glibc string, ro registry.Options) (*toolchain.Sysroot, error) {
	spec, abs, opts, ok, err := sysrootSpec(ctx, m, cell, cacheDir, waiver, glibc, ro)
	if err != nil || !ok {
		return nil, err
	}
	key, err := sysroot.Key(ctx, spec, abs, opts...)
	if err != nil {
		return nil, sysrootErr(m, cell, spec.Name, "sysroot", err)
	}
	return &toolchain.Sysroot{Name: spec.Name, Key: key}, nil
}

// Sysroot makes (or finds under cacheDir) the sysroot of a cell's target
// OS: the matrix's sysroot for its ISA, capped at the OS's glibc; an image
// sysroot is pulled for the ISA's platform through ro. It returns nil with
// no error when the sysroot is waived. A build's sysroot step runs it.
func Sysroot(ctx context.Context, m *matrix.Matrix, cell matrix.Cell, cacheDir, waiver string, ro registry.Options) (*toolchain.Sysroot, error) {
	return makeSysroot(ctx, m, cell, cacheDir, waiver, cell.OS.Glibc, ro)
}

// sysrootAt makes the cell's sysroot capped at glibc instead of its OS's
// (a C++ runtime's).
func sysrootAt(ctx context.Context, m *matrix.Matrix, cell matrix.Cell, cacheDir, glibc string, ro registry.Options) (*toolchain.Sysroot, error) {
	return makeSysroot(ctx, m, cell, cacheDir, "", glibc, ro)
}

func makeSysroot(ctx context.Context, m *matrix.Matrix, cell matrix.Cell, cacheDir, waiver, glibc string, ro registry.Options) (*toolchain.Sysroot, error) {
	spec, abs, opts, ok, err := sysrootSpec(ctx, m, cell, cacheDir, waiver, glibc, ro)
	if err != nil || !ok {
		return nil, err
	}
	name := spec.Name
	key, err := sysroot.Key(ctx, spec, abs, opts...)
	if err != nil {
		return nil, sysrootErr(m, cell, name, "sysroot", err)
	}
	got, err := sysroot.Ensure(ctx, spec, abs, opts...)
	if err != nil {
		return nil, sysrootErr(m, cell, name, "cannot make sysroot", err)
	}
	run := got.Path
	if got.GlibcFrom != "" {
		// Target programs run under qemu with the real libraries the stubs stand for.
		spec.Glibc = ""
		base, err := sysroot.Ensure(ctx, spec, abs, opts...)
		if err != nil {
			return nil, sysrootErr(m, cell, name, "cannot make sysroot", err)
		}
		run = base.Path
	}
	return &toolchain.Sysroot{Name: name, Key: key, Path: got.Path, RunPath: run, Digest: got.Digest, Glibc: got.Glibc, Source: got.Source, Cached: got.Cached}, nil
}

// checkDorisFlag refuses --doris naming another version than the one the
// tree declares: the build's record, its images' labels and the report
// would then name a release the binaries are not. It names the version of
// a tree that declares none, or a development tree (recipe version.trunk).
func checkDorisFlag(tree string, r *recipe.Recipe, flag string) error {
	declared, err := source.ReadVersion(tree, r)
	if err != nil || (r.Version.Trunk != "" && declared == r.Version.Trunk) || declared == flag {
		return nil
	}
	return fault.Inputf("--doris %s: the tree declares Doris %s (%s); a build of it is Doris %s, so its record, images and report say so: drop --doris (it names the version of a tree that declares none, or of a development tree)",
		flag, declared, filepath.Join(tree, r.Version.File), declared)
}
