package build

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/patch"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/source"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// Options control a build.
type Options struct {
	Out   string // builds land in <Out>/<doris>/<target>/
	Cache string // the step cache and work directories
	Jobs  int    // the CPU budget: parallel jobs of a step (make -j), packages at once
	// PackagesAtOnce caps how many package builds run at once (Jobs when
	// 0): 1 builds them one after another, as Doris's own script does.
	PackagesAtOnce int
	Mirror         string // where third-party archives come from (dir, file:// or http(s)://)
	PGOProfile     string // a profile collected elsewhere (the plan then skips training)
	// StrictVersions fails a package whose unpacked source declares another
	// version than the tree names for it (a warning otherwise).
	StrictVersions bool
	// ThirdpartyBase is the prebuilt third-party install the plan's
	// thirdparty-base step copies (plan.CheckBase vouched for its digest).
	ThirdpartyBase string
	// CompileCache is where the build steps' ccache keeps what they
	// compiled (<Cache>/compile when empty; CompileCacheOff for none);
	// CompileCacheSize bounds each of its directories (ccache's
	// max_size, DefaultCompileCacheSize when empty).
	CompileCache, CompileCacheSize string
	// SharedCompileCache is a directory runners share (a network file
	// system): each BE step's ccache reads and adds to its key's
	// directory there as remote storage; "" for none.
	SharedCompileCache string
	// KeepGoing builds every third-party package it can after one fails and
	// reports each failure (as a *PackagesError); nothing is published then.
	KeepGoing bool
	// CacheFrom is where a step missing from the local cache is looked for
	// before it runs; CacheTo is where step results are offered (both an
	// OCI registry repository, see internal/cacheoci). Either may be nil.
	CacheFrom, CacheTo RemoteCache
	// Pulls remembers what this build restored from CacheFrom; RunAll
	// makes one when nil. Give the same one to every RunAll of a build
	// (a target planned again keeps the provenance of what its first
	// attempt pulled).
	Pulls  *Pulls
	Allow  []scan.Exception
	NoScan bool // skip the scan gate (reported as skipped in the record)
	// RequireTargetFlags makes the scan gate fail on lost tuning and
	// unrecorded flags (scan.Options.RequireTargetFlags).
	RequireTargetFlags bool
	Progress           *Progress
	// Exec runs the programs of the build (step commands, the tree's patch
	// tool, smoke runs); RunProcess when nil. Tests give one that needs no
	// compiler or emulator.
	Exec Exec
	// Replan, when set, plans a cell again after its toolchain step
	// rejected its compiler (o.Rejected; tried are the compilers this build
	// rejected for the target so far, o.Rejected last): RunAll builds what
	// it returns at once, in the cell's slot. An error ends the target
	// with it. Without Replan a rejected cell is a failed outcome.
	Replan func(ctx context.Context, o Outcome, tried []string) (*Input, error)
}

// Input is everything a cell's build needs besides the plan.
type Input struct {
	Plan   *plan.Plan
	Recipe *recipe.Recipe
	Tree   string
	Series *patch.Series
	TC     *toolchain.Toolchain
	Lock   *source.Lock
	Policy *scan.Policy
	// MakeSysroot is the plan's sysroot step (plan.Planned.MakeSysroot);
	// ProbeCache keeps the toolchain step's verdicts.
	// When MakeSysroot is nil, the caller made the sysroot (TC.Sysroot.Path)
	// and checked the compiler against it.
	MakeSysroot func(context.Context) (*toolchain.Sysroot, error)
	ProbeCache  string
	// Runtime is what the plan's C++ runtime step needs of this machine
	// (plan.Planned.Runtime); nil when the plan has none.
	Runtime *plan.RuntimeBuild
	// Rejected are the compilers this build tried for the cell before
	// (their toolchain step refused them): the record lists them.
	Rejected []Rejection
}

// Rejection is a compiler a build fell back from, and why.
type Rejection struct {
	Compiler string `json:"compiler"`
	Why      string `json:"why"`
}

// StepError is a failed step, with where its log is.
type StepError struct {
	Target, Step, Log, Tail string
	// First are the first lines of the log that say what went wrong.
	First []string
	// Missing are files the log names that a package the step does not
	// declare installed (an undeclared dependency, likely).
	Missing []string
	// Tree is the package's own tree, kept after it failed.
	Tree string
	Err  error
}

func (e *StepError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: step %s failed: %v", e.Target, e.Step, e.Err)
	if len(e.First) > 0 {
		fmt.Fprintf(&b, "\n--- first errors in %s ---\n%s", e.Log, strings.Join(e.First, "\n"))
	}
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, "\n--- the log names files of packages %s does not declare (add them to the recipe's thirdparty.deps) ---\n%s",
			e.Step, strings.Join(e.Missing, "\n"))
	}
	fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", e.Log, e.Tail)
	if e.Tree != "" {
		fmt.Fprintf(&b, "\n(the package's build tree is kept in %s; its programs saw it at the cell's tree)", e.Tree)
	}
	return b.String()
}

func (e *StepError) Unwrap() error { return e.Err }

// CompilerRejected is a toolchain step whose compiler cannot build for the
// sysroot. The verdict is remembered, so planning again takes the target's
// next compiler (build does that by itself unless --compiler forced one).
type CompilerRejected struct {
	Compiler string
	Err      error
}

func (e *CompilerRejected) Error() string { return e.Err.Error() }

func (e *CompilerRejected) Unwrap() error { return e.Err }

// ErrGate is a build that ran but does not fit its target (smoke run or scan).
var ErrGate = errors.New("build does not fit its target")

type runner struct {
	start               time.Time
	in                  Input
	opts                Options
	cache               *Cache
	work, src, logs     string
	stage               string // this build's staging directory in Out
	profileDir, profile string
	ltoCache            string
	shims               map[string]toolchain.Shim // per phase: how steps run target programs (cellState.shimMu)
	hostPath            string                    // PATH as dorisarm found it
	rec                 *Record
	warn                func(string)
	// partial publishes to PartialDir: some packages of a --keep-going
	// build failed.
	partial bool
	// cpu is the user and system time of the programs the step started
	// (each step runs in a copy of the runner of its own).
	cpu time.Duration
	// shared is what a cell's steps running at once share.
	shared *cellState
	// tree is a package step's own tree (pkgs/<PACKAGE> in the work
	// directory), laid out by layout just before the step runs; "" for a
	// step in the cell's tree.
	tree   string
	layout func() error
	// changed and deleted are the step's result: the paths (relative to
	// its tree) it made or changed, and those it removed.
	changed, deleted []string
	// runtimeSource and runtimeSysroot are what a runtime step's build
	// reads (its source archive in the cache, the sysroot capped at the
	// runtime's glibc), laid out just before it runs.
	runtimeSource, runtimeSysroot string
}

// cellState is what the steps of one cell, running at once, share.
type cellState struct {
	mu sync.Mutex // rec, files, owner
	// treeMu guards the cell's tree: a step in it holds it; a package
	// step reads its inputs from it under a read lock and merges its
	// result under the lock.
	treeMu sync.RWMutex
	// files are the paths (relative to the work directory) each finished
	// step's result put in the cell's tree.
	files map[string][]string
	// owner is the package that installed each path of the install tree.
	owner map[string]string
	// index is each step's place in the plan: the record lists steps in it.
	index map[string]int
	// sysrootMu guards the toolchain's sysroot paths, which the sysroot
	// step sets while fetch and unpack steps may run.
	sysrootMu sync.RWMutex
	// shimMu guards the runner's shims, which the toolchain step sets
	// while fetch and unpack steps may run and read them.
	shimMu sync.RWMutex
	// compileDirs and compileStats are each build step's compile cache
	// directory and what it did (under mu).
	compileDirs  map[string][2]string
	compileStats map[string]*CompileStats
}

// root is the directory the step's result is relative to: its own tree
// for a package step, the cell's work directory otherwise.
func (r *runner) root() string {
	if r.tree != "" {
		return r.tree
	}
	return r.work
}

// srcDir is where the step's copy of the tree is on this machine (the
// step's command sees it at r.src).
func (r *runner) srcDir() string { return filepath.Join(r.root(), "src") }

// checkInput makes the paths a build is given absolute (steps run in other
// directories), checks the directories do not overlap, and refuses a plan
// known to fail or with a malformed step.
func checkInput(in *Input, opts *Options) error {
	if opts.Jobs <= 0 {
		opts.Jobs = 2
	}
	if opts.Exec == nil {
		opts.Exec = RunProcess
	}
	// Steps run in other directories: every path they are given must be absolute.
	for _, p := range []*string{&opts.Cache, &opts.Out, &in.Tree} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	if opts.CompileCache != "" && opts.CompileCache != CompileCacheOff {
		abs, err := filepath.Abs(opts.CompileCache)
		if err != nil {
			return err
		}
		opts.CompileCache = abs
	}
	if opts.SharedCompileCache != "" {
		if opts.CompileCache == CompileCacheOff {
			return fault.Inputf("--be-compile-cache-shared %s with --be-compile-cache off: the shared cache is ccache's remote storage, which needs the compile cache on", opts.SharedCompileCache)
		}
		abs, err := filepath.Abs(opts.SharedCompileCache)
		if err != nil {
			return err
		}
		opts.SharedCompileCache = abs
	}
	if err := CheckDirs(in.Tree, opts.Out, opts.Cache); err != nil {
		return err
	}
	if why := in.Plan.Unbuildable; why != "" {
		return fault.Inputf("%s: %s", in.Plan.Cell.Target, why)
	}
	for i := range in.Plan.Steps {
		if err := in.Plan.Steps[i].Validate(); err != nil {
			return fmt.Errorf("%s: %w", in.Plan.Cell.Target, err)
		}
	}
	return nil
}

// Run builds one cell and publishes it to Out; it returns the build record.
func Run(ctx context.Context, in Input, opts Options) (*Record, error) {
	if err := checkInput(&in, &opts); err != nil {
		return nil, err
	}
	c := &Cache{Dir: opts.Cache}
	if err := c.Init(); err != nil {
		return nil, err
	}
	p := in.Plan
	cellName := p.Cell.Target + "-" + p.Cell.Doris
	r := &runner{in: in, opts: opts, cache: c, work: filepath.Join(opts.Cache, "work", cellName)}
	r.src = filepath.Join(r.work, "src")
	r.logs = filepath.Join(r.work, "logs")
	r.profileDir = filepath.Join(r.work, "pgo", "profile")
	r.profile = filepath.Join(r.work, "pgo", "merged.profdata")
	r.ltoCache = filepath.Join(r.work, "lto-cache")
	r.rec = newRecord(in)
	r.rec.Jobs = opts.Jobs
	r.shared = &cellState{files: map[string][]string{}, owner: map[string]string{}, index: map[string]int{}}
	for i, s := range p.Steps {
		r.shared.index[s.ID] = i
	}
	r.warn = func(s string) {
		// The record says this machine's paths by the plan's names for
		// them ($CACHE, $WORK …): records made on two machines differ
		// only in times. The terminal shows the paths themselves.
		rs := r.placeholders([]string{s})[0]
		r.shared.mu.Lock()
		r.rec.Warnings = append(r.rec.Warnings, rs)
		r.shared.mu.Unlock()
		opts.Progress.Warn(p.Cell.Target, s)
	}
	for _, w := range p.Warnings {
		r.warn(w)
	}
	if err := os.MkdirAll(filepath.Dir(r.work), 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockWork(ctx, r.work+".lock", func() {
		r.warn(fmt.Sprintf("waiting for another build of %s %s that uses the cache %s", p.Cell.Target, p.Cell.Doris, opts.Cache))
	})
	if err != nil {
		return nil, err
	}
	defer unlock()
	start := time.Now()
	r.start = start
	r.stage = stagingName(opts.Out, p.Cell)
	defer os.RemoveAll(r.stage) // published by a rename, or a failed build's
	var rec *Record
	ok := false
	if _, err := os.Stat(opts.Out); err == nil {
		unlockOut, err := lockOut(ctx, opts.Out, nil)
		if err != nil {
			return nil, err
		}
		rec, ok = upToDate(in.Plan, Dir(opts.Out, p.Cell.Doris, p.Cell.Target))
		unlockOut()
	}
	if ok {
		// Same plan keys as the published build, whose files are unchanged:
		// nothing to do, not even the smoke run and scan it already passed.
		opts.Progress.UpToDate(p.Cell.Target)
		rec.UpToDate = true
		return rec, nil
	}
	if err := r.prepare(); err != nil {
		return nil, err
	}
	r.prefetch(ctx)
	opts.Progress.Begin(p.Cell.Target, len(p.Steps))
	pe := &PackagesError{Target: p.Cell.Target}
	built, err := r.runSteps(ctx, pe)
	if err != nil {
		if rej := (*CompilerRejected)(nil); errors.As(err, &rej) {
			opts.Progress.Rejected(p.Cell.Target, rej.Compiler)
		} else {
			opts.Progress.End(p.Cell.Target, false, r.cacheStats())
		}
		return nil, err
	}
	if len(pe.Failed) > 0 {
		// A third-party-only build publishes the packages that built, as
		// a partial build beside the full build's name, never under it;
		// when none built (an archive only unpacked for another package,
		// RAGEL for HYPERSCAN, is no build), there is nothing to publish.
		if len(p.Only) > 0 && p.Slice == nil && built > 0 {
			pe.Partial, pe.PartialErr = r.publishPartial(ctx, pe)
		}
		opts.Progress.End(p.Cell.Target, false, r.cacheStats())
		return nil, pe
	}
	r.rec.Seconds = time.Since(start).Seconds()
	opts.Progress.End(p.Cell.Target, true, r.cacheStats())
	return r.rec, nil
}

// prepare lays out a fresh copy of the tree and the compiler homes.
func (r *runner) prepare() error {
	// What unpacks found is this build's: cache hits bring back their own.
	for _, d := range []string{r.src, filepath.Join(r.work, versionsDir)} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	for _, d := range []string{r.src, r.logs, r.profileDir, r.ltoCache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	ignore := append([]string{r.in.Recipe.Thirdparty.SrcDir, r.in.Recipe.Thirdparty.Install}, r.in.Recipe.Ignore...)
	if err := copyTree(r.in.Tree, r.src, ignore); err != nil {
		return fmt.Errorf("copying %s: %w", r.in.Tree, err)
	}
	if pf := r.in.Recipe.Thirdparty.PatchesFrom; pf != "" {
		// dorisarm fetched, unpacked and patched every package already; the
		// tree's build script still calls its download script first, which
		// would fetch every archive again (from the internet).
		stub := "#!/bin/sh\necho 'dorisarm: third-party archives are fetched, verified, unpacked and patched by dorisarm; " + filepath.Base(pf) + " does nothing here'\n"
		if err := os.WriteFile(filepath.Join(r.src, filepath.FromSlash(pf)), []byte(stub), 0o755); err != nil {
			return err
		}
	}
	r.hostPath = os.Getenv("PATH")
	r.shims = map[string]toolchain.Shim{}
	if r.opts.PGOProfile != "" && r.in.Plan.Cell.PGO && len(r.in.Plan.Only) == 0 {
		if st := r.in.Plan.Step("build:" + r.in.Recipe.PGO.Step); st != nil && st.Inputs.Build != nil {
			r.rec.PGOProfile = st.Inputs.Build.Profile
		}
		if r.in.TC.Compiler.Dialect == "clang" {
			return copyFile(r.opts.PGOProfile, r.profile)
		}
		// GCC: the .gcda directory of a -fprofile-generate run, in the profile directory.
		return copyTree(r.opts.PGOProfile, r.profileDir, nil)
	}
	return nil
}

// prepareToolchain lays out the compiler homes of the plan's phases
// (wrappers, the CMake toolchain file, the exec shim): the toolchain
// step's work, once the sysroot is made.
func (r *runner) prepareToolchain() error {
	// The toolchain as a step sees it: its flags, wrappers and CMake
	// toolchain file name the fixed paths of the step's namespace.
	var rtPath string
	if rt := r.in.TC.Runtime; rt != nil {
		rtPath = r.seen(rt.Path)
	}
	tc := r.in.TC.SeenAt(r.seen(r.sysrootPath()), r.seen(r.sysrootRunPath()), rtPath)
	for phase := range r.in.Plan.Phases {
		o := toolchain.FlagOptions{Phase: toolchain.Release, LTOCache: r.seen(r.ltoCache)}
		switch phase {
		case plan.PhaseThirdparty, plan.PhaseSlice:
			o.NoLTO = true
		case plan.PhaseInstrument:
			o = toolchain.FlagOptions{Phase: toolchain.Instrument, ProfileDir: r.seen(r.profileDir)}
		case plan.PhasePGO:
			o.ProfileDir = r.seen(r.profileDir)
			if tc.Compiler.Dialect == "clang" {
				o.Profile = r.seen(r.profile)
			}
		}
		f, err := tc.Flags(o)
		if err != nil {
			return err
		}
		home := filepath.Join(r.work, "toolchain", phase)
		clog := filepath.Join(r.logs, "compiler-"+phase+".log")
		if err := touch(clog); err != nil {
			return err
		}
		w, err := tc.WriteWrappersSeenAt(home, r.seen(home), f, r.seen(clog))
		if err != nil {
			return err
		}
		cache := map[string]string{}
		for _, kv := range r.in.Plan.Toolchain.CMakeCache {
			k, v, _ := strings.Cut(kv, "=")
			cache[k] = v
		}
		// CMake finds headers, libraries and packages only in installed/ and the sysroot.
		if err := os.WriteFile(filepath.Join(home, "toolchain.cmake"), []byte(tc.CMakeToolchainFile(w, cache, r.seen(r.installDir()))), 0o644); err != nil {
			return err
		}
		sh, err := tc.ExecShim(w, "")
		if err != nil {
			return err
		}
		r.shared.shimMu.Lock()
		r.shims[phase] = sh
		r.shared.shimMu.Unlock()
		flags := r.placeholders(f.Compile())
		r.shared.mu.Lock()
		r.rec.Flags[phase] = flags
		r.shared.mu.Unlock()
	}
	return nil
}

// setupStep runs a sysroot or toolchain step: they keep their results in
// stores of their own (the sysroot cache, the probe verdicts), so a step
// found there is recorded as cached.
func (r *runner) setupStep(ctx context.Context, i int, s plan.Step) error {
	target := r.in.Plan.Cell.Target
	t0 := time.Now()
	r.opts.Progress.Start(target, i, s.ID)
	var cached bool
	var err error
	switch s.Kind {
	case plan.KindSysroot:
		cached, err = r.makeSysroot(ctx, s)
	case plan.KindToolchain:
		cached, err = r.checkToolchain(ctx)
	default:
		err = fmt.Errorf("not a setup step (kind %s)", s.Kind)
	}
	if err != nil {
		if ctx.Err() != nil {
			r.opts.Progress.Stop(target, s.ID)
			return fmt.Errorf("%s: %s interrupted: %w", target, s.ID, ctx.Err())
		}
		r.opts.Progress.Failed(target, i, s.ID, time.Since(t0))
		return fmt.Errorf("%s: step %s failed: %w", target, s.ID, err)
	}
	r.addStep(StepRecord{ID: s.ID, Key: s.Key, Cached: cached, Seconds: time.Since(t0).Seconds(), Needs: s.Needs}, false)
	r.opts.Progress.Step(target, i, s.ID, cached, time.Since(t0))
	return nil
}

// makeSysroot makes (or finds) the sysroot the plan names by its key.
func (r *runner) makeSysroot(ctx context.Context, s plan.Step) (bool, error) {
	sr := r.in.TC.Sysroot
	if sr == nil {
		return false, fmt.Errorf("the plan has a sysroot step but the toolchain no sysroot: plan again")
	}
	if r.in.MakeSysroot == nil {
		if sr.Path != "" { // made by the caller
			return true, nil
		}
		return false, fmt.Errorf("nothing here makes sysroot %s: plan again", sr.Name)
	}
	made, err := r.in.MakeSysroot(ctx)
	if err != nil {
		return false, err
	}
	if made.Key != s.Inputs.Sysroot.Key {
		return false, fmt.Errorf("sysroot %s is keyed %s now, not %s as planned (the binutils that cap its glibc changed since the plan was made): plan again", sr.Name, made.Key, s.Inputs.Sysroot.Key)
	}
	r.shared.sysrootMu.Lock()
	sr.Path, sr.RunPath, sr.Digest, sr.Glibc, sr.Source = made.Path, made.RunPath, made.Digest, made.Glibc, made.Source
	r.shared.sysrootMu.Unlock()
	return made.Cached, nil
}

// checkToolchain checks the compiler against the made sysroot (a verdict
// the probe cache holds is not checked again) and lays out its homes.
func (r *runner) checkToolchain(ctx context.Context) (bool, error) {
	tc := r.in.TC
	cached := false
	if tc.Sysroot != nil && r.in.MakeSysroot != nil {
		var err error
		if cached, err = tc.CheckSysroot(ctx, r.in.ProbeCache); err != nil {
			var rej *toolchain.Rejected
			if errors.As(err, &rej) && rej.Verdict != "" {
				return false, &CompilerRejected{Compiler: tc.Compiler.Name, Err: err}
			}
			return false, err
		}
	}
	return cached, r.prepareToolchain()
}

// expandSeen substitutes the plan's placeholders by the paths a step's
// programs see (its command and environment).
func (r *runner) expandSeen(s, phase string) string { return r.expandIn(s, phase, r.seen) }

// expand substitutes the plan's placeholders by this machine's paths
// (what dorisarm itself reads and writes).
func (r *runner) expand(s, phase string) string {
	return r.expandIn(s, phase, func(p string) string { return p })
}

// expandIn substitutes the plan's placeholders by paths as view shows
// this machine's ($OUT is dorisarm's own: never shown to a step).
func (r *runner) expandIn(s, phase string, view func(string) string) string {
	if phase == "" {
		phase = plan.PhaseThirdparty
	}
	return strings.NewReplacer(
		"$TOOLCHAIN/$PHASE", view(filepath.Join(r.work, "toolchain", phase)),
		"$TOOLCHAIN", view(filepath.Join(r.work, "toolchain")),
		"$SRC", view(r.src), "$OUT", r.staging(), "$JOBS", fmt.Sprint(r.opts.Jobs),
		"$PROFILE_DIR", view(r.profileDir), "$PROFILE", view(r.profile), "$LTO_CACHE", view(r.ltoCache),
		toolchain.SysrootRunPlaceholder, view(r.sysrootRunPath()), toolchain.SysrootPlaceholder, view(r.sysrootPath()),
	).Replace(s)
}

// placeholders is the inverse of expand for what the record keeps: this
// machine's paths (the sysroot in its cache, the work tree, the profile)
// as the plan's placeholders, so that records of one build made on two
// machines differ only in times.
func (r *runner) placeholders(list []string) []string {
	var pairs []string
	// Longest first: a path inside another is replaced by its own name.
	// Each as this machine has it and as a step sees it.
	named := [][2]string{
		{filepath.Join(r.work, "toolchain"), "$TOOLCHAIN"}, {r.src, "$SRC"}, {r.profile, "$PROFILE"},
		{r.profileDir, "$PROFILE_DIR"}, {r.ltoCache, "$LTO_CACHE"},
		{r.sysrootRunPath(), toolchain.SysrootRunPlaceholder}, {r.sysrootPath(), toolchain.SysrootPlaceholder},
	}
	for _, pv := range named {
		if pv[0] != "" && pv[0] != "." {
			pairs = append(pairs, r.seen(pv[0]), pv[1])
		}
	}
	for _, pv := range append(named, [][2]string{{r.work, "$WORK"}, {r.opts.Cache, "$CACHE"}}...) {
		if pv[0] != "" && pv[0] != "." {
			pairs = append(pairs, pv[0], pv[1])
		}
	}
	rp := strings.NewReplacer(pairs...)
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = rp.Replace(s)
	}
	return out
}

// env is a step's environment: dorisarm's own, the toolchain's (the cross
// environment), the step's, and PATH with the phase's compiler home first.
func (r *runner) env(s plan.Step) []string {
	env := stepEnv(os.Environ(), slices.Sorted(maps.Keys(r.in.Recipe.HostEnv)))
	for _, e := range r.in.Plan.Toolchain.Env {
		env = append(env, r.expandSeen(e, s.Phase))
	}
	for _, e := range s.Env {
		env = append(env, r.expandSeen(e, s.Phase))
	}
	if s.Kind == plan.KindThirdparty || s.Kind == plan.KindBuild {
		// Steps that build; a training run is a target program already under qemu.
		env = append(env, r.shim(s).Env...)
	}
	dir, shared := r.compileDirs(s)
	env = append(env, r.compileCacheEnv(s, dir, shared)...)
	return append(env, "PATH="+r.expandSeen("$TOOLCHAIN/$PHASE/bin", s.Phase)+string(os.PathListSeparator)+r.hostPath)
}

func (r *runner) sysrootRunPath() string {
	r.shared.sysrootMu.RLock()
	defer r.shared.sysrootMu.RUnlock()
	if sr := r.in.TC.Sysroot; sr != nil {
		return sr.RunPath
	}
	return ""
}

// sysrootDigest is the made sysroot's content digest for a step that
// compiles against it (it needs the toolchain step); "" otherwise.
func (r *runner) sysrootDigest(s plan.Step) string {
	switch s.Kind {
	case plan.KindFetch, plan.KindUnpack, plan.KindPatch, plan.KindPatchTree, plan.KindBase:
		return ""
	case plan.KindRuntime:
		// Built against the sysroot capped at the runtime's glibc, which
		// its key names; every cell of the ISA shares it, whatever its OS.
		return ""
	}
	r.shared.sysrootMu.RLock()
	defer r.shared.sysrootMu.RUnlock()
	if sr := r.in.TC.Sysroot; sr != nil {
		return sr.Digest
	}
	return ""
}

func (r *runner) sysrootPath() string {
	r.shared.sysrootMu.RLock()
	defer r.shared.sysrootMu.RUnlock()
	if sr := r.in.TC.Sysroot; sr != nil {
		return sr.Path
	}
	return ""
}

// shim is how a step runs target programs (its phase's compiler home).
func (r *runner) shim(s plan.Step) toolchain.Shim {
	ph := stepPhase(s)
	r.shared.shimMu.RLock()
	defer r.shared.shimMu.RUnlock()
	if sh, ok := r.shims[ph]; ok {
		return sh
	}
	return r.shims[plan.PhaseRelease]
}

// step runs one plan step, or restores it from the cache.
func (r *runner) step(ctx context.Context, i int, s plan.Step) error {
	t0 := time.Now()
	target := r.in.Plan.Cell.Target
	if s.Kind.Cacheable() {
		// One build at a time makes a key's result (cells of one build run
		// at once and share their target-free steps; other processes may
		// use the cache too): the others wait, then restore it.
		unlock, err := r.cache.lockKey(ctx, s.Key, func() { r.opts.Progress.Wait(target, i, s.ID) })
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %s interrupted: %w", target, s.ID, ctx.Err())
			}
			return err
		}
		defer unlock()
		m, pulled, err := r.cacheEntry(ctx, s)
		if err != nil {
			return err
		}
		if m != nil {
			restored, err := r.restore(i, s, m, pulled, t0)
			if err != nil || restored {
				return err
			}
		}
	}
	return r.runAndStore(ctx, i, s, t0)
}

// cacheEntry is the step's entry in the local cache, or pulled from
// --cache-from into it, with where it was pulled from; nil when there is
// none to use (an entry this build stored with other files, or one built
// against another sysroot, is discarded).
func (r *runner) cacheEntry(ctx context.Context, s plan.Step) (*Meta, *RemoteEntry, error) {
	target := r.in.Plan.Cell.Target
	m, ok := r.cache.Get(s.Key)
	var pulled *RemoteEntry
	if made := r.opts.Pulls.madeHere(s.Key); ok && made != "" && made != m.TarSHA256 {
		// A step of this build stored the entry with other files:
		// something changed the cache under the build.
		r.warn(fmt.Sprintf("%s: its cache entry holds files %s, not the %s this build stored; discarded it and running the step again", s.ID, plan.ShortDigest(m.TarSHA256), plan.ShortDigest(made)))
		if derr := r.cache.Discard(s.Key); derr != nil {
			return nil, nil, fmt.Errorf("%s: discarding the cache entry of %s: %w", target, s.ID, derr)
		}
		ok = false
	}
	if ok {
		pulled = r.opts.Pulls.get(s.Key, m.TarSHA256)
	} else {
		// Pulled earlier in this build but gone from the local cache
		// since (pruned by another process): pulled again below, or
		// run here; either way the old pull no longer says where
		// the bytes came from.
		r.opts.Pulls.drop(s.Key)
	}
	if !ok && r.opts.CacheFrom != nil {
		got, files, err := r.opts.Pulls.pull(s.Key, r.cache, func() (*RemoteEntry, error) { return r.opts.CacheFrom.Pull(ctx, r.cache, s.Key) })
		switch {
		case ctx.Err() != nil:
			return nil, nil, fmt.Errorf("%s: %s interrupted: %w", target, s.ID, ctx.Err())
		case err != nil:
			r.warn(fmt.Sprintf("%s: the remote cache: %v; running the step", s.ID, err))
		default:
			// Read again even when the pull brought nothing: another
			// build may have stored the entry meanwhile (the pull then
			// says so by bringing nothing), and it is as good a hit.
			if m, ok = r.cache.Get(s.Key); ok && got != nil && files == m.TarSHA256 {
				pulled = got
			}
		}
		if !ok {
			r.opts.Pulls.drop(s.Key) // it runs here: its entry will be this build's
		}
	}
	if sr := r.sysrootDigest(s); ok && m.Sysroot != "" && sr != "" && m.Sysroot != sr {
		r.warn(fmt.Sprintf("%s: its cache entry was built against sysroot %s, this build's %s is %s (the same spec made from other packages: another machine, or the suite moved; pin the packages or set the sysroot's digest in matrix.yaml); running the step again",
			s.ID, plan.ShortDigest(m.Sysroot), r.in.TC.Sysroot.Name, plan.ShortDigest(sr)))
		if derr := r.cache.Discard(s.Key); derr != nil {
			return nil, nil, fmt.Errorf("%s: discarding the cache entry of %s: %w", target, s.ID, derr)
		}
		r.opts.Pulls.drop(s.Key)
		return nil, nil, nil
	}
	if !ok {
		return nil, nil, nil
	}
	return m, pulled, nil
}

// restore puts the step's cache entry m into the tree and records the
// hit; restored is false when the entry turned out corrupt (discarded:
// the step runs).
func (r *runner) restore(i int, s plan.Step, m *Meta, pulled *RemoteEntry, t0 time.Time) (restored bool, err error) {
	target := r.in.Plan.Cell.Target
	r.changed, err = r.cache.RestoreFiles(s.Key, r.root(), m)
	r.deleted = m.Deleted
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		// Found before the tree changed: drop the entry and run the step.
		r.warn(fmt.Sprintf("%s: %v; discarded it and running the step again", s.ID, err))
		if derr := r.cache.Discard(s.Key); derr != nil {
			return false, fmt.Errorf("%s: discarding the corrupt cache entry of %s: %w", target, s.ID, derr)
		}
		r.opts.Pulls.drop(s.Key)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: restoring %s from the cache: %w", target, s.ID, err)
	}
	if s.Kind == plan.KindMerge {
		if r.rec.PGOProfile, err = r.profileDigest(s); err != nil {
			return false, fmt.Errorf("%s: the PGO profile %s restored from the cache: %w", target, s.ID, err)
		}
	}
	// A local hit is never offered to --cache-to: an entry pulled is the
	// registry's already, one a step of this build stored was offered when
	// it was stored, and one an earlier process left is not this build's
	// to vouch for.
	r.shared.mu.Lock()
	switch {
	case pulled != nil:
		r.rec.Cache.Pulled = append(r.rec.Cache.Pulled, PulledStep{Step: s.ID, RemoteEntry: *pulled})
	case r.opts.CacheTo != nil && r.opts.Pulls.madeHere(s.Key) == "":
		r.rec.Cache.NotPushed = append(r.rec.Cache.NotPushed, s.ID)
	}
	r.shared.mu.Unlock()
	r.addStep(StepRecord{ID: s.ID, Key: s.Key, Cached: true, Seconds: time.Since(t0).Seconds(), Needs: s.Needs,
		RanSeconds: m.Seconds, RanCPUSeconds: m.CPUSeconds}, s.Kind.Cacheable())
	r.opts.Progress.Step(target, i, s.ID, true, time.Since(t0))
	return true, nil
}

// runAndStore runs the step in its sandbox and, for a cacheable one,
// stores what it changed in the tree.
func (r *runner) runAndStore(ctx context.Context, i int, s plan.Step, t0 time.Time) error {
	target := r.in.Plan.Cell.Target
	cacheable := s.Kind.Cacheable()
	r.opts.Progress.Start(target, i, s.ID)
	if r.layout != nil {
		if err := r.layout(); err != nil {
			return fmt.Errorf("%s: laying out the tree of %s: %w", target, s.ID, err)
		}
	}
	before, err := takeSnapshot(r.root(), notResults)
	if err != nil {
		return err
	}
	logPath := filepath.Join(r.logs, strings.NewReplacer(":", "_", "/", "_").Replace(s.ID)+".log")
	r.cpu = 0
	err = r.execute(ctx, s, logPath)
	cpu := r.cpu.Seconds()
	if err != nil {
		if ctx.Err() == nil {
			r.opts.Progress.Failed(target, i, s.ID, time.Since(t0))
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %s interrupted: %w", target, s.ID, ctx.Err())
		}
		var se *StepError
		if errors.As(err, &se) || errors.Is(err, ErrGate) {
			return err
		}
		return &StepError{Target: target, Step: s.ID, Log: logPath, First: firstErrors(logPath, 5), Tail: tail(logPath, 50), Err: err}
	}
	if cacheable || s.Kind == plan.KindBase {
		after, err := takeSnapshot(r.root(), notResults)
		if err != nil {
			return err
		}
		r.changed, r.deleted = diff(before, after)
		if copies := r.hostToolCopies(s); len(copies) > 0 {
			r.opts.Progress.Failed(target, i, s.ID, time.Since(t0))
			return &StepError{Target: target, Step: s.ID, Log: logPath, Tail: tail(logPath, 20),
				Err: fmt.Errorf("its result holds copies of the build machine's code generators, which no output may ship: %s", strings.Join(copies, ", "))}
		}
	}
	if cacheable {
		var files string
		files, err = r.cache.store(Meta{Key: s.Key, Step: s.ID, Deleted: r.deleted, Seconds: time.Since(t0).Seconds(), CPUSeconds: cpu,
			Sysroot: r.sysrootDigest(s)}, r.root(), r.changed)
		r.opts.Pulls.stored(s.Key, files)
		var ue *UncacheableError
		switch {
		case errors.As(err, &ue):
			r.warn(fmt.Sprintf("%s: %v; it will run again next time", s.ID, err))
		case err != nil:
			return fmt.Errorf("%s: caching %s: %w", target, s.ID, err)
		case files != "":
			r.push(ctx, s, files)
		}
	}
	r.addStep(StepRecord{ID: s.ID, Key: s.Key, Seconds: time.Since(t0).Seconds(), Needs: s.Needs, CPUSeconds: cpu, CompileCache: r.compiled(s)}, s.Kind.Cacheable())
	r.opts.Progress.Step(target, i, s.ID, false, time.Since(t0))
	return nil
}

// notResults are the work directory's parts no step's result holds.
var notResults = map[string]bool{"logs": true, "toolchain": true, "lto-cache": true, pkgsDir: true, timesFile: true}

// addStep records a finished step, keeping the record's lists in the
// plan's order whatever order steps finish in.
func (r *runner) addStep(sr StepRecord, cacheable bool) {
	sh := r.shared
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec := r.rec
	if i := slices.IndexFunc(rec.Steps, func(x StepRecord) bool { return x.ID == sr.ID }); i >= 0 {
		// The scan step is recorded before the record is written, and
		// again, with its whole time, when it ends.
		rec.Steps[i] = sr
		return
	}
	rec.Steps = append(rec.Steps, sr)
	switch {
	case sr.Cached && cacheable:
		rec.Cache.Hits = append(rec.Cache.Hits, sr.ID)
	case cacheable:
		rec.Cache.Misses = append(rec.Cache.Misses, sr.ID)
	}
	byPlan := func(a, b string) int { return sh.index[a] - sh.index[b] }
	slices.SortStableFunc(rec.Steps, func(a, b StepRecord) int { return byPlan(a.ID, b.ID) })
	slices.SortStableFunc(rec.Cache.Hits, byPlan)
	slices.SortStableFunc(rec.Cache.Misses, byPlan)
	slices.SortStableFunc(rec.Cache.Pulled, func(a, b PulledStep) int { return byPlan(a.Step, b.Step) })
}

func (r *runner) execute(ctx context.Context, s plan.Step, logPath string) error {
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	switch s.Kind {
	case plan.KindFetch:
		return r.fetch(s, log)
	case plan.KindPatchTree:
		return r.applyPatches(s, r.src, log)
	case plan.KindPatch:
		dir := r.expand(s.Outputs[0], "")
		return r.applyPatches(s, dir, log)
	case plan.KindUnpack:
		if len(s.Command) == 0 {
			return r.unpack(ctx, s, log)
		}
		return r.command(ctx, s, s.Command, r.env(s), log)
	case plan.KindThirdparty:
		before, err := takeSnapshot(r.hostInstallDir(), nil)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		err = r.command(ctx, s, s.Command, r.env(s), log)
		if err == nil {
			err = leakError(s, logPath)
		}
		if err == nil {
			err = r.checkInstalled(s, before, log)
		}
		if err != nil && r.tree == "" {
			// What a failed package installed must not reach the
			// packages after it (--keep-going) or a partial build. (A
			// package's own tree is dropped whole.)
			r.dropInstalled(before, log)
		}
		return err
	case plan.KindBase:
		return r.layBase(s, log)
	case plan.KindRuntime:
		return r.buildRuntime(ctx, s, log)
	case plan.KindBuild:
		restore, err := r.placeBuildTools(s, log)
		if err != nil {
			return err
		}
		done, err := r.startCompileCache(s, log)
		if err != nil {
			return err
		}
		err = r.buildCommand(ctx, s, log)
		done()
		if rerr := restore(); rerr != nil && err == nil {
			err = fmt.Errorf("putting the tree back after the build tools (what stood at their paths): %w", rerr)
		}
		if err != nil {
			return err
		}
		return leakError(s, logPath)
	case plan.KindTrain:
		env := append(r.env(s), "LLVM_PROFILE_FILE="+r.seen(filepath.Join(r.profileDir, "%m-%p.profraw")))
		err := r.command(ctx, s, s.Command, env, log)
		if err != nil {
			if signalOf(err) == syscall.SIGILL {
				return fmt.Errorf("%w: %s: the instrumented build died with SIGILL under qemu -cpu %s during PGO training: it uses an instruction the %s CPU does not have (dorisarm scan --target %s shows which)",
					ErrGate, r.in.Plan.Cell.Target, r.in.Plan.Cell.Qemu, r.in.Plan.Cell.CPU, r.in.Plan.Cell.Target)
			}
		}
		return err
	case plan.KindMerge:
		if len(s.Command) == 0 {
			// GCC: the .gcda directory is the profile.
			d, err := source.TreeDigest(r.profileDir, nil)
			r.rec.PGOProfile = d
			return err
		}
		raws, _ := filepath.Glob(filepath.Join(r.profileDir, "*.profraw"))
		if len(raws) == 0 {
			return fmt.Errorf("the training run wrote no profile to %s", r.profileDir)
		}
		args := []string{"merge", "-o", r.seen(r.profile)}
		for _, p := range raws {
			args = append(args, r.seen(p))
		}
		tool := r.in.TC.Tools["profdata"]
		if tool == "" {
			return fmt.Errorf("%s has no llvm-profdata (tools.profdata in matrix.yaml)", r.in.TC.Compiler.Name)
		}
		if err := r.run(ctx, s, tool, args, r.env(s), r.seen(r.src), log); err != nil {
			return err
		}
		d, err := source.FileDigest(r.profile)
		r.rec.PGOProfile = d
		return err
	case plan.KindCollect:
		if err := r.versionWarnings(); err != nil {
			return err
		}
		return r.collect(s, log)
	case plan.KindScan:
		return r.gate(ctx, log)
	}
	return fmt.Errorf("unknown step kind %q", s.Kind)
}

// buildCommand runs a build step's command (after removing the PGO
// build's stale directories).
func (r *runner) buildCommand(ctx context.Context, s plan.Step, log io.Writer) error {
	if s.Phase == plan.PhasePGO && len(r.in.Recipe.PGO.Clean) > 0 {
		// Through an os.Root: a directory the instrumented build made a
		// link out of the tree is not followed.
		root, err := os.OpenRoot(r.src)
		if err != nil {
			return err
		}
		defer root.Close()
		for _, d := range r.in.Recipe.PGO.Clean {
			fmt.Fprintf(log, "removing %s before the optimized build\n", d)
			if err := root.RemoveAll(filepath.FromSlash(d)); err != nil {
				return err
			}
		}
	}
	return r.command(ctx, s, s.Command, r.env(s), log)
}

func (r *runner) command(ctx context.Context, s plan.Step, argv []string, env []string, log io.Writer) error {
	if len(argv) == 0 {
		return fmt.Errorf("step %s has no command", s.ID)
	}
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = r.expandSeen(a, s.Phase)
	}
	if p := r.shim(s).Prefix; len(p) > 0 {
		// Target programs the step starts run under qemu on the target's CPU model.
		args = append(append([]string{}, p...), args...)
	}
	return r.run(ctx, s, args[0], args[1:], env, r.seen(r.src), log)
}

// run runs one program of step through Options.Exec, logging it.
func (r *runner) run(ctx context.Context, s plan.Step, name string, args, env []string, dir string, log io.Writer) error {
	fmt.Fprintf(log, "$ %s %s\n", name, strings.Join(args, " "))
	// A package step sees its own tree where the cell's is, and nothing
	// of the cell but its declared inputs.
	c := Command{Step: s.ID, Path: name, Args: args, Env: env, Dir: dir, Stdout: log, Stderr: log, CPU: &r.cpu, Sandbox: r.stepSandbox(s)}
	return r.opts.Exec(ctx, c)
}

// fetch copies an archive from the mirror into the tree's source directory
// after checking it against vars.sh's MD5 and the lock's sha256.
func (r *runner) fetch(s plan.Step, log io.Writer) error {
	name := s.Inputs.Fetch.Archive
	mirror := r.opts.Mirror
	if mirror == "" {
		mirror = r.in.Recipe.Thirdparty.Mirror
		if mirror != "" && !strings.Contains(mirror, "://") && !filepath.IsAbs(mirror) {
			mirror = filepath.Join(r.in.Tree, mirror)
		}
	}
	if mirror == "" {
		return fmt.Errorf("no mirror for %s: pass --mirror DIR|URL", name)
	}
	rc, err := source.Open(mirror, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	dst := r.expand(s.Outputs[0], "")
	os.MkdirAll(filepath.Dir(dst), 0o755)
	tmp := dst + ".part"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	h := md5.New()
	sum, err := source.Sum(io.TeeReader(rc, io.MultiWriter(f, h)))
	f.Close()
	if err != nil {
		os.Remove(tmp)
		return err
	}
	pkg := source.Package{Entry: strings.TrimPrefix(s.ID, "fetch:"), Name: name, MD5: s.Inputs.Fetch.MD5}
	warning, err := source.Verify(pkg, sum, r.in.Lock)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if warning != "" {
		// The plan's warnings already say it, once per archive.
		fmt.Fprintln(log, "warning: "+warning)
	}
	fmt.Fprintf(log, "fetched %s from %s: %d bytes, md5 %s, sha256 %s\n", name, mirror, sum.Size, hex.EncodeToString(h.Sum(nil)), sum.SHA256)
	r.shared.mu.Lock()
	r.rec.addArchive(pkg.Entry, name, sum)
	r.shared.mu.Unlock()
	return os.Rename(tmp, dst)
}

func (r *runner) applyPatches(s plan.Step, root string, log io.Writer) error {
	// In the plan's order; each patch as the plan saw it.
	var ps []*patch.Patch
	for _, in := range s.Inputs.Patch.Patches {
		i := slices.IndexFunc(r.in.Series.Patches, func(p *patch.Patch) bool { return p.ID() == in.ID })
		if i < 0 {
			return fmt.Errorf("patch %s of the plan is not in %s any more; plan again", in.ID, r.in.Series.Dir)
		}
		if p := r.in.Series.Patches[i]; p.SHA256 != in.SHA256 {
			return fmt.Errorf("patch %s changed since the plan was made (sha256 %s, the plan says %s); plan again", in.ID, p.SHA256, in.SHA256)
		}
		ps = append(ps, r.in.Series.Patches[i])
	}
	res, err := patch.Apply(root, ps, patch.DefaultOptions())
	if err != nil {
		return err
	}
	for _, h := range res.Hunks {
		fmt.Fprintln(log, h.String())
	}
	if !res.OK() {
		var lines []string
		for _, h := range res.Failed() {
			lines = append(lines, h.String())
		}
		return fmt.Errorf("patches no longer apply (nothing was changed); check them with dorisarm patch check:\n  %s", strings.Join(lines, "\n  "))
	}
	return nil
}

// profileDigest is the digest the record gives the profile a merge step
// made: its directory (GCC) or file (clang).
func (r *runner) profileDigest(s plan.Step) (string, error) {
	if len(s.Command) == 0 {
		return source.TreeDigest(r.profileDir, nil)
	}
	return source.FileDigest(r.profile)
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// push offers a step's local cache entry to --cache-to. A registry that
// does not take it costs a warning, not the build.
func (r *runner) push(ctx context.Context, s plan.Step, files string) {
	if r.opts.CacheTo == nil {
		return
	}
	if m, ok := r.cache.Get(s.Key); !ok || m.TarSHA256 != files {
		r.warn(fmt.Sprintf("%s: its cache entry changed after this build stored it: not offered to the remote cache", s.ID))
		return
	}
	if err := r.opts.CacheTo.Push(ctx, r.cache, s.Key, files); err != nil {
		r.warn(fmt.Sprintf("%s: %v", s.ID, err))
		return
	}
	r.shared.mu.Lock()
	r.rec.Cache.Pushed++
	r.shared.mu.Unlock()
}

// prefetch pulls, a few at a time, every cacheable step the local cache
// lacks from CacheFrom before the steps run (one by one they would wait on
// the registry's round trips). What fails here is tried again, and warned
// about, when its step comes.
func (r *runner) prefetch(ctx context.Context) {
	if r.opts.CacheFrom == nil {
		return
	}
	var keys []string
	for _, s := range r.in.Plan.Steps {
		if !s.Kind.Cacheable() {
			continue
		}
		if _, ok := r.cache.Get(s.Key); !ok {
			keys = append(keys, s.Key)
		}
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func(k string) {
			defer func() { <-sem; wg.Done() }()
			r.opts.Pulls.pull(k, r.cache, func() (*RemoteEntry, error) { return r.opts.CacheFrom.Pull(ctx, r.cache, k) })
		}(k)
	}
	wg.Wait()
}

// Pulls remembers, by step key, the entries a build restored from its
// remote cache, so that a cell (or a later attempt at a target) that
// finds such an entry in the local cache records where its bytes came
// from and whose signature vouched for them, not a local hit. An entry
// is remembered with the digest of its files as pulled: a local entry
// with other files (pruned and made again by another process) is not
// the pulled one. The zero value is ready; a nil *Pulls remembers
// nothing.
type Pulls struct {
	mu       sync.Mutex
	m        map[string]pulledEntry
	inflight map[string]*flight
	// made are the entries this process's steps stored, by key, with the
	// digest of their files.tar: the only local entries a build offers
	// to --cache-to, and what a restore of them must find.
	made map[string]string
}

// stored remembers that a step of this process stored key's entry with
// files (its files.tar digest).
func (p *Pulls) stored(key, files string) {
	if p == nil || files == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.made == nil {
		p.made = map[string]string{}
	}
	p.made[key] = files
}

// madeHere is the files.tar digest a step of this process stored key's
// entry with, or "".
func (p *Pulls) madeHere(key string) string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.made[key]
}

type pulledEntry struct {
	e     *RemoteEntry
	files string // the entry's files.tar digest as pulled
}

// flight is a pull in progress; its outcome once done is closed. waiters
// counts the pulls waiting on it (under Pulls.mu).
type flight struct {
	done    chan struct{}
	got     pulledEntry
	err     error
	waiters int
}

// pull runs fn, the pull of key into c, unless this build pulled key
// already or is pulling it now (cells sharing a target-free step would
// each fetch the same bytes): then it waits for that pull and returns its
// outcome, its error included (a waiter's step warns about it and runs,
// as the puller's does; nothing failed is remembered, so a later pull
// tries again). files is the digest of the pulled entry's files.tar, to
// compare with what the local cache holds.
func (p *Pulls) pull(key string, c *Cache, fn func() (*RemoteEntry, error)) (e *RemoteEntry, files string, err error) {
	do := func() (pulledEntry, error) {
		e, err := fn()
		if e == nil || err != nil {
			return pulledEntry{}, err
		}
		m, ok := c.Get(key)
		if !ok {
			return pulledEntry{}, nil // gone already
		}
		return pulledEntry{e, m.TarSHA256}, nil
	}
	if p == nil {
		got, err := do()
		return got.e, got.files, err
	}
	p.mu.Lock()
	if got, ok := p.m[key]; ok {
		p.mu.Unlock()
		return got.e, got.files, nil
	}
	if f, ok := p.inflight[key]; ok {
		f.waiters++
		p.mu.Unlock()
		<-f.done
		return f.got.e, f.got.files, f.err
	}
	if p.inflight == nil {
		p.inflight = map[string]*flight{}
	}
	f := &flight{done: make(chan struct{})}
	p.inflight[key] = f
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.inflight, key)
		if f.got.e != nil && f.err == nil {
			if p.m == nil {
				p.m = map[string]pulledEntry{}
			}
			p.m[key] = f.got
		}
		p.mu.Unlock()
		close(f.done) // also when fn panics: no waiter is left behind
	}()
	f.got, f.err = do()
	return f.got.e, f.got.files, f.err
}

// get is the entry pulled for key when the local cache's entry has the
// files it was pulled with (files: the local entry's files.tar digest).
func (p *Pulls) get(key, files string) *RemoteEntry {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if got, ok := p.m[key]; ok && got.files == files {
		return got.e
	}
	return nil
}

// drop forgets a key whose entry was discarded: what the step makes
// instead is this machine's own.
func (p *Pulls) drop(key string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
}

// cacheStats is a copy of the record's cache counts so far.
func (r *runner) cacheStats() CacheStats {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	c := r.rec.Cache
	c.Hits, c.Misses = slices.Clone(c.Hits), slices.Clone(c.Misses)
	return c
}
