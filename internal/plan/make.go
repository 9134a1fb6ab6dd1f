package plan

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	goversion "github.com/hashicorp/go-version"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/memo"
	"github.com/dorisarm/dorisarm/internal/patch"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/source"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// Inputs are everything a plan is made from.
type Inputs struct {
	Matrix    *matrix.Matrix
	Cell      matrix.Cell
	Recipe    *recipe.Recipe
	Tree      string // the source tree
	Version   string // its Doris(-style) version
	Series    *patch.Series
	Toolchain *toolchain.Toolchain
	Lock      *source.Lock
	// Profile is the digest of a PGO profile collected elsewhere (--pgo-profile);
	// when set, the plan uses it instead of training.
	Profile string
	// Packages, when set, limits the plan to these third-party packages and
	// what they depend on (no BE, no FE).
	Packages []string
	// Memo remembers what the tree's scripts answered (vars.sh) by content.
	Memo memo.Dir
	// SysrootWaiver is the user's reason for building without the target
	// OS's sysroot (the toolchain then has none).
	SysrootWaiver string
	// Slice, when set, builds the BE part way (the recipe's slice): no FE,
	// no PGO, no LTO.
	Slice *Slice
	// Base is a prebuilt third-party install every package and BE step
	// starts from (--thirdparty-base); nil for none.
	Base *BaseInputs
	// BuildTools are the recipe's build tools as found on the build
	// machine (ResolveBuildTools); a cross build's BE steps run them.
	BuildTools []BuildToolInfo
	// HostEnv are the recipe's host_env variables as found on the build
	// machine (ResolveHostEnv); the tree's steps read them.
	HostEnv []HostEnvInfo
	// AcceptLostTuning is the user's reason for building a BE whose tree
	// fixes an -march no selected patch replaces (--accept-lost-tuning).
	AcceptLostTuning string
	// Runtime is the C++ runtime the cell's builds use (Toolchain.Runtime)
	// and what it is made from; nil for none.
	Runtime *RuntimeInputs
}

// Placeholders the runner substitutes.
const (
	SRC        = "$SRC"
	OUT        = "$OUT"
	JOBS       = "$JOBS"
	PROFILE    = "$PROFILE"
	PROFILEDIR = "$PROFILE_DIR"
	LTOCACHE   = "$LTO_CACHE"
)

// Toolchain phases.
const (
	PhaseThirdparty = "thirdparty" // third-party packages: target flags, no PGO, no LTO
	PhaseRelease    = "release"    // the tree's own non-PGO builds
	PhaseInstrument = "instrument" // PGO training build
	PhasePGO        = "pgo"        // PGO-optimized build
	// PhaseSlice is a BE built part way (--be-configure-only, --be-targets):
	// target flags, no PGO, no LTO, so its objects are machine code that
	// readelf and the flag read-back read (LTO would leave bitcode, and a
	// slice never reaches the link where LTO generates code).
	PhaseSlice = "be-slice"
)

// ToolchainHome is the placeholder for a phase's generated compiler home.
func ToolchainHome(phase string) string { return ToolchainRoot + "/" + phase }

// ToolchainRoot is the placeholder for the cell's toolchain directory
// (the compiler homes, the C++ runtime), read-only to every step.
const ToolchainRoot = "$TOOLCHAIN"

// RuntimeHome is the placeholder for the cell's made C++ runtime.
const RuntimeHome = ToolchainRoot + "/" + toolchain.RuntimeDir

// Make builds the plan of one cell, section by section: the tree and its
// packages, the patches, the toolchain's phases, the package steps, the
// tree's own steps (BE, FE, PGO), collect and scan, then the setup steps
// and every step's key.
func Make(in Inputs) (*Plan, error) {
	m, err := newMaker(in)
	if err != nil {
		return nil, err
	}
	for _, section := range []func() error{
		m.source, m.packages, m.patches, m.phases, m.toolchainEnv,
		m.treeSetupSteps, m.packageSteps, m.treeSteps, m.collectAndScan,
	} {
		if err := section(); err != nil {
			return nil, err
		}
	}
	if err := m.p.addSetup(in.Toolchain, in.Runtime); err != nil {
		return nil, err
	}
	if err := m.p.computeKeys(); err != nil {
		return nil, err
	}
	sort.Strings(m.p.Warnings)
	return m.p, nil
}

// maker holds what the sections of Make share while one plan is made.
type maker struct {
	in Inputs
	p  *Plan
	// pkgs are the tree's packages for the cell's ISA; only, when set,
	// the entries this plan builds; pkgsOnly says it builds no BE or FE.
	pkgs     []source.Package
	only     map[string]bool
	pkgsOnly bool
	// skip are the packages a plan of the whole tree does not build: its
	// product does not use them on this machine (notUsed).
	skip map[string]bool
	// srcOnly are packages the plan does not build whose sources a package
	// it builds reads (the recipe's thirdparty.source_reads).
	srcOnly map[string]bool
	// byComponent are the selected patches of each component.
	byComponent map[string][]*patch.Patch
	pgo         bool
	ctx         recipe.Context
	// release are the release phase's flags (the steps' environment).
	release toolchain.Flags
	// treeNeeds and baseNeeds are what every later step waits for (the
	// tree's patches, the prebuilt base); allThirdparty every package's
	// build step; built what collect takes.
	treeNeeds, baseNeeds, allThirdparty, built []string
}

// newMaker checks the cell can build this version at all and starts its
// plan: the cell, the matrix, the recipe, the sysroot or its waiver.
func newMaker(in Inputs) (*maker, error) {
	c, r, tc := in.Cell, in.Recipe, in.Toolchain
	if !c.Target.Supports(mustVersion(in.Version)) {
		return nil, fmt.Errorf("target %s does not build Doris %s (targets.%s.doris is %q)", c.Target.Name, in.Version, c.Target.Name, c.Target.Doris)
	}
	p := &Plan{
		Schema: Schema, Cell: cellInfo(c, in.Version), Matrix: in.Matrix.Digest,
		Recipe: RecipeInfo{Name: r.Name, Digest: r.Digest}, Phases: map[string][]string{},
	}
	p.Cell.LTO = tc.LTOMode()
	p.Cell.March = tc.March()
	p.Cell.Sysroot = tc.Sysroot
	if tc.Sysroot == nil {
		if in.SysrootWaiver == "" {
			return nil, fmt.Errorf("target %s: no sysroot for %s (%s) and no waiver: builds link only against the target OS's libraries (oses.%s.sysroot in %s), or pass --waive-sysroot REASON",
				c.Target.Name, c.OS.ID, c.ISA.Name, c.OS.ID, in.Matrix.File)
		}
		p.Cell.SysrootWaiver = in.SysrootWaiver
		p.Warnings = append(p.Warnings, "no sysroot (waived: "+in.SysrootWaiver+"): the build links against this machine's libraries and the glibc gate is waived")
	}
	ctx := recipe.Context{Target: c.Target, CPU: c.CPU, OS: c.OS, ISA: c.ISA, Allowed: c.Allowed, March: tc.March(), Jobs: 0}
	return &maker{in: in, p: p, ctx: ctx}, nil
}

func (m *maker) warn(format string, args ...any) {
	m.p.Warnings = append(m.p.Warnings, fmt.Sprintf(format, args...))
}

// source digests the tree by content, and the third-party scripts apart
// (what the package steps read of it).
func (m *maker) source() error {
	r, p := m.in.Recipe, m.p
	tpDir := filepath.Dir(r.Thirdparty.Vars)
	ignore := append([]string{r.Thirdparty.SrcDir, r.Thirdparty.Install}, r.Ignore...)
	var err error
	if p.Source.Digest, err = source.TreeDigest(m.in.Tree, ignore); err != nil {
		return err
	}
	var tpIgnore []string
	for _, i := range []string{r.Thirdparty.SrcDir, r.Thirdparty.Install} {
		if rel, err := filepath.Rel(tpDir, i); err == nil && !strings.HasPrefix(rel, "..") {
			tpIgnore = append(tpIgnore, rel)
		}
	}
	if p.Source.Scripts, err = scriptsDigest(m.in.Tree, tpDir, tpIgnore, r.Thirdparty.Reads); err != nil {
		return err
	}
	p.Source.Version = m.in.Version
	return nil
}

// packages reads the tree's packages for the target machine, with the
// build function and the tree's own patches its scripts give each, and
// picks those this plan builds (--packages, a prebuilt base).
func (m *maker) packages() error {
	in, r, p := m.in, m.in.Recipe, m.p
	pkgs, err := source.ReadPackagesMemo(in.Tree, r, in.Cell.ISA.Name, in.Memo)
	if err != nil {
		return err
	}
	if err := treeFacts(in, pkgs); err != nil {
		return err
	}
	m.pkgs, p.Packages = pkgs, pkgs
	if len(in.Packages) > 0 {
		if m.only, err = SelectPackages(pkgs, r, in.Packages); err != nil {
			return err
		}
		m.srcOnly = SourcesRead(r, m.only)
		p.Packages = nil // the plan, and so the build record, lists what it builds (or reads the sources of)
		for _, pk := range pkgs {
			if m.only[pk.Entry] || m.srcOnly[pk.Entry] {
				p.Only = append(p.Only, pk.Entry)
				p.Packages = append(p.Packages, pk)
			}
		}
	}
	// --packages alone builds third-party packages, no BE or FE.
	m.pkgsOnly = m.only != nil && in.Slice == nil
	if in.Base != nil && m.only == nil {
		// The base holds the third-party install: build only what --packages names.
		m.only, p.Packages = map[string]bool{}, nil
	}
	if err := m.notUsed(); err != nil {
		return err
	}
	m.skipNotUsed()
	for _, pk := range pkgs {
		if pk.NoBuild != "" && !recipeMarked(r, pk.Entry) && m.builds(pk.Entry) {
			m.warn("%s has no build step: %s (its archive is still fetched and unpacked)", pk.Entry, pk.NoBuild)
		}
	}
	return nil
}

// builds says whether the plan builds package entry.
func (m *maker) builds(entry string) bool {
	return (m.only == nil || m.only[entry]) && !m.skip[entry]
}

// patches selects the series' patches for the cell: the tree is component
// "doris", each package answers to its names. A patch for none of the
// steps this plan runs is not applied, but still meets a target's
// requirement of it.
func (m *maker) patches() error {
	in, r, p, c := m.in, m.in.Recipe, m.p, m.in.Cell
	versions := map[string]string{TreeComponent: in.Version}
	for _, pk := range m.pkgs {
		for _, comp := range componentsOf(pk) {
			versions[comp] = pk.Version
		}
	}
	planSteps := map[string]bool{"thirdparty": true}
	switch {
	case in.Slice != nil:
		planSteps[r.Slice.Step] = true
	case !m.pkgsOnly:
		for _, n := range r.StepNames() {
			planSteps[n] = true
		}
	}
	names := map[string]bool{}
	var patchErr error
	selected := slices.DeleteFunc(in.Series.Select(in.Matrix, c, versions), func(pt *patch.Patch) bool {
		if err := m.checkPatchSteps(pt); err != nil && patchErr == nil {
			patchErr = err
		}
		if !pt.UsedBy(planSteps) {
			names[pt.Name] = true
			m.warn("patch %s is not applied: only the %s step uses what it changes (Steps), and this plan does not build it", pt.ID(), strings.Join(pt.Steps, "/"))
			return true
		}
		return pt.Component == TreeComponent && m.treeLacks(pt)
	})
	if patchErr != nil {
		return patchErr
	}
	m.byComponent = map[string][]*patch.Patch{}
	for _, pt := range selected {
		p.Patches = append(p.Patches, PatchRef{ID: pt.ID(), Component: pt.Component, SHA256: pt.SHA256, Why: pt.Summary()})
		m.byComponent[pt.Component] = append(m.byComponent[pt.Component], pt)
		names[pt.Name] = true
	}
	if err := guardMarch(p, in, selected, m.pkgsOnly); err != nil {
		return err
	}
	for _, req := range c.Target.Patches {
		if !names[req] {
			where := in.Series.Dir
			if where == "" {
				where = "recipe " + r.Name + "'s patches (it names no patch directory)"
			}
			return fmt.Errorf("target %s requires patch %q, but no patch of that name in %s applies to this cell (doris %s); add it, or widen its Applies-To/Targets, or drop it from targets.%s.patches in %s",
				c.Target.Name, req, where, in.Version, c.Target.Name, in.Matrix.File)
		}
	}
	return nil
}

// checkPatchSteps refuses a patch whose Steps names a step the recipe
// does not have.
func (m *maker) checkPatchSteps(pt *patch.Patch) error {
	r := m.in.Recipe
	for _, st := range pt.Steps {
		if _, ok := r.Steps[st]; !ok && st != "thirdparty" {
			return fmt.Errorf("patch %s: Steps names %q, which recipe %s has no step of (steps: thirdparty, %s)", pt.Path, st, r.Name, strings.Join(r.StepNames(), ", "))
		}
	}
	return nil
}

// treeLacks says (and warns) when the tree has not a path a tree patch
// needs (Needs-Path): the patch is then not applied.
func (m *maker) treeLacks(pt *patch.Patch) bool {
	miss, why := pt.Missing(m.in.Tree)
	switch {
	case miss != "" && why != "":
		m.warn("patch %s is not applied: the tree has no %s (Needs-Path; %s)", pt.ID(), miss, why)
	case miss != "":
		m.warn("patch %s is not applied: the tree has no %s (Needs-Path; a submodule not checked out?)", pt.ID(), miss)
	}
	return miss != ""
}

// phases gives each toolchain phase the plan uses its flags: release and
// third-party always, the slice's, and PGO's instrument and optimize
// phases when the target trains (or has a profile).
func (m *maker) phases() error {
	in, r, p, c, tc := m.in, m.in.Recipe, m.p, m.in.Cell, m.in.Toolchain
	flags := func(phase string, o toolchain.FlagOptions) (toolchain.Flags, error) {
		o.ToolHome, o.Sysroot, o.Runtime = ToolchainHome(phase), toolchain.SysrootPlaceholder, RuntimeHome
		return tc.Flags(o)
	}
	release, err := flags(PhaseRelease, toolchain.FlagOptions{Phase: toolchain.Release, LTOCache: LTOCACHE})
	if err != nil {
		return err
	}
	p.Phases[PhaseRelease] = flagList(release)
	m.release = release
	tp, err := flags(PhaseThirdparty, toolchain.FlagOptions{Phase: toolchain.Release, NoLTO: true})
	if err != nil {
		return err
	}
	p.Phases[PhaseThirdparty] = flagList(tp)
	m.pgo = c.Target.PGO && len(in.Packages) == 0 // --packages builds no BE, the only PGO step
	if in.Slice != nil {
		if r.Slice.Step == "" {
			return fmt.Errorf("recipe %s has no slice section: it cannot build its BE part way (--be-configure-only, --be-targets)", r.Name)
		}
		for _, t := range in.Slice.Targets {
			if t == "" || strings.HasPrefix(t, "-") || filepath.IsAbs(t) || strings.HasPrefix(filepath.Clean(t), "..") {
				return fmt.Errorf("--be-targets: %q is not a build target: give target names or object paths relative to %s", t, r.Slice.Dir)
			}
		}
		m.pgo = false // a slice is never trained or linked
		sl, err := flags(PhaseSlice, toolchain.FlagOptions{Phase: toolchain.Release, NoLTO: true})
		if err != nil {
			return err
		}
		p.Phases[PhaseSlice] = flagList(sl)
		p.Slice = &SliceInfo{Step: r.Slice.Step, Dir: r.Slice.Dir, ConfigureOnly: len(in.Slice.Targets) == 0, Targets: in.Slice.Targets}
	}
	if m.pgo && r.PGO.Step == "" {
		return fmt.Errorf("target %s uses PGO but recipe %s has no pgo section", c.Target.Name, r.Name)
	}
	if m.pgo && len(r.PGO.Train) == 0 && in.Profile == "" {
		// A first build for a CPU nobody has profiled yet: without PGO,
		// said plainly, rather than refused.
		m.pgo = false
		p.Cell.PGO, p.Cell.PGONone = false, PGONoProfile
		m.warn("PGO: none (no profile): target %s uses PGO, and recipe %s has no training workload; pass --pgo-profile FILE (a profile collected on %s hardware) to build with it", c.Target.Name, r.Name, c.CPU.Name)
	}
	if !m.pgo {
		return nil
	}
	inst, err := flags(PhaseInstrument, toolchain.FlagOptions{Phase: toolchain.Instrument, ProfileDir: PROFILEDIR})
	if err != nil {
		return err
	}
	opt, err := flags(PhasePGO, toolchain.FlagOptions{Phase: toolchain.Release, Profile: PROFILE, ProfileDir: PROFILEDIR, LTOCache: LTOCACHE})
	if err != nil {
		return err
	}
	if len(r.PGO.Train) > 0 && in.Profile == "" {
		p.Phases[PhaseInstrument] = flagList(inst)
	}
	p.Phases[PhasePGO] = flagList(opt)
	return nil
}

// toolchainEnv is what every compiling step's environment says of the
// compiler (placeholders for the phase's home) and the recipe's pinned
// CMake cache entries.
func (m *maker) toolchainEnv() error {
	r, p, tc := m.in.Recipe, m.p, m.in.Toolchain
	p.Toolchain = ToolchainInfo{Compiler: tc.Identity, Target: tc.TargetFlags(), Notes: tc.Notes, Emulator: tc.EmulatorWith(toolchain.SysrootRunPlaceholder)}
	p.Toolchain.Env = tc.Env(&toolchain.Wrappers{Home: "$TOOLCHAIN/$PHASE", CC: "$TOOLCHAIN/$PHASE/bin/" + driver(tc, false),
		CXX: "$TOOLCHAIN/$PHASE/bin/" + driver(tc, true), Tools: toolPlaceholders(tc)}, m.release)
	p.Toolchain.Env = append(p.Toolchain.Env, "CMAKE_TOOLCHAIN_FILE=$TOOLCHAIN/$PHASE/toolchain.cmake")
	if tc.Cross || tc.Sysroot != nil {
		// pkg-config searches installed/ only, never the build machine's
		// .pc files (/usr/lib/<triple>/pkgconfig: the host's zlib and
		// OpenSSL with -I/usr/include); Doris's PKG_CONFIG_PATH still comes first.
		inst := SRC + "/" + r.Thirdparty.Install
		p.Toolchain.Env = append(p.Toolchain.Env, "PKG_CONFIG_LIBDIR="+inst+"/lib64/pkgconfig:"+inst+"/lib/pkgconfig:"+inst+"/share/pkgconfig")
	}
	sort.Strings(p.Toolchain.Env)
	p.Warnings = append(p.Warnings, tc.Notes...)
	for k, v := range r.CMakeCache {
		e, err := recipe.Expand(v, m.ctx)
		if err != nil {
			return fmt.Errorf("recipe %s: cmake_cache.%s: %w", r.Name, k, err)
		}
		if e == "" {
			continue // the pin does not apply to this cell (e.g. ARM_MARCH on x86)
		}
		p.Toolchain.CMakeCache = append(p.Toolchain.CMakeCache, k+"="+e)
	}
	sort.Strings(p.Toolchain.CMakeCache)
	return nil
}

// expandWords expands a recipe command's templates for ctx ({{.Jobs}}
// stays the runner's placeholder).
func expandWords(words []string, ctx recipe.Context) ([]string, error) {
	out := make([]string, len(words))
	for i, w := range words {
		w = strings.ReplaceAll(w, "{{.Jobs}}", JOBS)
		e, err := recipe.Expand(w, ctx)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// expandEnv expands a recipe environment's templates for ctx, as
// NAME=value in name order.
func expandEnv(env map[string]string, ctx recipe.Context) ([]string, error) {
	m := map[string]string{}
	for k, v := range env {
		e, err := recipe.Expand(v, ctx)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
		m[k] = e
	}
	return sortedEnv(m), nil
}

// treeSetupSteps are dorisarm's patches on the tree itself and the
// prebuilt third-party install, which every package and BE step waits for.
func (m *maker) treeSetupSteps() error {
	r, p := m.in.Recipe, m.p
	if pts := m.byComponent[TreeComponent]; len(pts) > 0 {
		in := patchInputs(pts)
		in.Tree = p.Source.Digest // what it patches
		p.Steps = append(p.Steps, Step{ID: "patch:" + TreeComponent, Kind: KindPatchTree, Inputs: StepInputs{Patch: in}})
		m.treeNeeds = []string{"patch:" + TreeComponent}
	}
	if m.in.Base != nil {
		b := *m.in.Base
		b.Into = r.Thirdparty.Install
		p.Steps = append(p.Steps, Step{ID: BaseStep, Kind: KindBase, Inputs: StepInputs{Base: &b},
			Outputs: []string{SRC + "/" + r.Thirdparty.Install}})
		m.baseNeeds = []string{BaseStep}
	}
	return nil
}

// packageSteps fetch, unpack and patch each package the plan builds, and
// build it; then order them so each comes after what it needs.
func (m *maker) packageSteps() error {
	for _, pk := range m.pkgs {
		if !m.builds(pk.Entry) && !m.srcOnly[pk.Entry] {
			continue
		}
		if err := m.packageStepsOf(pk); err != nil {
			return err
		}
	}
	m.p.needPatchedSources()
	// Dependencies may be declared after their dependents in TP_ARCHIVES: order topologically.
	return m.p.orderSteps()
}

// packageStepsOf are one package's fetch, unpack, patch and build steps.
func (m *maker) packageStepsOf(pk source.Package) error {
	in, r, p := m.in, m.in.Recipe, m.p
	fin := &FetchInputs{Archive: pk.Name, MD5: pk.MD5, URL: pk.URL}
	if e, ok := in.Lock.Archives[pk.Name]; ok {
		fin.SHA256 = e.SHA256
	} else {
		where := "recipe " + r.Name + "'s lock (it names none: set lock: in the recipe)"
		if r.Lock != "" {
			where = r.Lock
		}
		m.warn("archive %s is not pinned in %s; only its MD5 from vars.sh will vouch for it (run dorisarm sources lock)", pk.Name, where)
	}
	p.Steps = append(p.Steps, Step{ID: "fetch:" + pk.Entry, Kind: KindFetch, Inputs: StepInputs{Fetch: fin},
		Outputs: []string{SRC + "/" + r.Thirdparty.SrcDir + "/" + pk.Name}})

	pctx := m.ctx
	pctx.Package, pctx.Build = pk.Entry, pk.Build
	unpack := Step{ID: "unpack:" + pk.Entry, Kind: KindUnpack, Needs: []string{"fetch:" + pk.Entry}}
	if r.Thirdparty.PatchesFrom != "" {
		// dorisarm unpacks, then applies the tree's own patches for the
		// package: it reads the archive and those patches, nothing else.
		unpack.Inputs.Unpack = unpackInputs(pk, r)
	} else {
		// The tree's own unpack command runs the tree's (patched) scripts.
		unpack.Needs = append(unpack.Needs, m.treeNeeds...)
		cmd, err := expandWords(r.Thirdparty.Unpack, pctx)
		if err != nil {
			return fmt.Errorf("recipe %s: thirdparty.unpack: %w", r.Name, err)
		}
		unpack.Command = cmd
		unpack.Inputs.Unpack = &UnpackInputs{Scripts: p.Source.Scripts}
	}
	p.Steps = append(p.Steps, unpack)
	last := "unpack:" + pk.Entry
	for _, comp := range componentsOf(pk) {
		if pts := m.byComponent[comp]; len(pts) > 0 && comp != TreeComponent {
			dir := pk.Source
			if dir == "" {
				dir = "."
			}
			p.Steps = append(p.Steps, Step{ID: "patch:" + comp, Kind: KindPatch, Needs: []string{last},
				Inputs: StepInputs{Patch: patchInputs(pts)}, Outputs: []string{SRC + "/" + r.Thirdparty.SrcDir + "/" + dir}})
			last = "patch:" + comp
		}
	}
	if pk.Build == "" || m.srcOnly[pk.Entry] {
		return nil
	}
	bcmd, err := expandWords(r.Thirdparty.Build, pctx)
	if err != nil {
		return fmt.Errorf("recipe %s: thirdparty.build: %w", r.Name, err)
	}
	env, err := expandEnv(r.Thirdparty.Env[pk.Entry], pctx)
	if err != nil {
		return fmt.Errorf("recipe %s: thirdparty.env.%s: %w", r.Name, pk.Entry, err)
	}
	needs := slices.Concat([]string{last}, m.treeNeeds, m.baseNeeds)
	for _, d := range r.Thirdparty.Deps[pk.Entry] {
		if dp, ok := findPackage(m.pkgs, d); ok && dp.Build != "" {
			needs = append(needs, "thirdparty:"+d)
		} else if ok {
			// Sources another package's build reads (RAGEL for HYPERSCAN),
			// patched: its last step, once all are made (needPatchedSources).
			needs = append(needs, "unpack:"+d)
		}
	}
	for _, d := range r.Thirdparty.SourceReads[pk.Entry] {
		if _, ok := findPackage(m.pkgs, d); ok {
			needs = append(needs, "unpack:"+d) // its sources alone, patched
		}
	}
	p.Steps = append(p.Steps, Step{ID: "thirdparty:" + pk.Entry, Kind: KindThirdparty, Phase: PhaseThirdparty,
		Command: bcmd, Env: env, Needs: needs, Inputs: StepInputs{Build: &BuildInputs{Scripts: p.Source.Scripts, InstallDirs: r.Thirdparty.InstallDirs}}})
	m.allThirdparty = append(m.allThirdparty, "thirdparty:"+pk.Entry)
	return nil
}

// needPatchedSources makes a package that reads another's sources wait
// for them patched: the source package's last step, not its unpack.
func (p *Plan) needPatchedSources() {
	lastOf := map[string]string{}
	for _, st := range p.Steps {
		switch st.Kind {
		case KindUnpack:
			lastOf[st.ID] = st.ID
		case KindPatch:
			if len(st.Needs) == 1 {
				for u, last := range lastOf {
					if last == st.Needs[0] {
						lastOf[u] = st.ID
					}
				}
			}
		}
	}
	for i := range p.Steps {
		if p.Steps[i].Kind != KindThirdparty {
			continue
		}
		for j, n := range p.Steps[i].Needs {
			if last, ok := lastOf[n]; ok && strings.HasPrefix(n, "unpack:") && last != n {
				p.Steps[i].Needs[j] = last
			}
		}
	}
}

// treeSteps are the tree's own steps (BE, FE; the PGO step in phases; a
// slice's BE part way). A cross build runs the build machine's code
// generators where the tree runs its own (the target's would run under
// emulation, if built at all).
func (m *maker) treeSteps() error {
	in, r, p, tc := m.in, m.in.Recipe, m.p, m.in.Toolchain
	var tools []BuildToolInfo
	if tc.Cross && len(in.BuildTools) > 0 && !m.pkgsOnly {
		tools = in.BuildTools
		p.Warnings = append(p.Warnings, buildToolWarnings(tools, r, m.pkgs)...)
	}
	compiles := !m.pkgsOnly && (in.Slice == nil || len(in.Slice.Targets) > 0)
	if why := checkLibstdcxx(in, compiles); why != "" {
		// The plan is shown; a build of it stops before its first step.
		p.Unbuildable = why
		p.Warnings = append(p.Warnings, why)
	}
	var hostEnv []HostEnvInfo
	if !m.pkgsOnly {
		hostEnv = in.HostEnv
		for _, h := range hostEnv {
			if h.Missing != "" {
				m.warn("%s: %s; the tree's build steps need it", h.Name, h.Missing)
			}
		}
	}
	steps := r.StepNames()
	switch {
	case in.Slice != nil:
		steps = []string{r.Slice.Step} // the BE, part way; no FE
	case m.pkgsOnly:
		steps = nil // third-party packages only: no BE, no FE
		m.built = m.allThirdparty
	}
	for _, name := range steps {
		if err := m.treeStep(name, tools, hostEnv); err != nil {
			return err
		}
	}
	return nil
}

// treeStep plans the recipe's step name: once, part way for a slice, or
// instrumented, trained and built again with its profile for PGO.
func (m *maker) treeStep(name string, tools []BuildToolInfo, hostEnv []HostEnvInfo) error {
	in, r, p := m.in, m.in.Recipe, m.p
	st := r.Steps[name]
	needs := slices.Concat(m.treeNeeds, m.baseNeeds)
	for _, n := range st.Needs {
		if n == "thirdparty" {
			needs = append(needs, m.allThirdparty...)
		} else {
			needs = append(needs, "build:"+n)
		}
	}
	cmd, err := expandWords(st.Command, m.ctx)
	if err != nil {
		return fmt.Errorf("recipe %s: step %s: %w", r.Name, name, err)
	}
	stEnv := st.Env
	if in.Slice != nil {
		stEnv = maps.Clone(st.Env)
		if stEnv == nil {
			stEnv = map[string]string{}
		}
		maps.Copy(stEnv, r.Slice.Env)
	}
	env, err := expandEnv(stEnv, m.ctx)
	if err != nil {
		return fmt.Errorf("recipe %s: step %s: %w", r.Name, name, err)
	}
	mk := func(id, phase string, needs []string, profile string) Step {
		return Step{ID: id, Kind: KindBuild, Phase: phase, Command: cmd, Env: env, Needs: needs,
			Inputs: StepInputs{Build: &BuildInputs{Tree: p.Source.Digest, Profile: profile, Tools: tools, HostEnv: hostEnv}}, Outputs: st.Outputs}
	}
	switch {
	case in.Slice != nil:
		return m.sliceSteps(mk("build:"+name, PhaseSlice, needs, ""), mk)
	case m.pgo && name == r.PGO.Step:
		return m.pgoSteps(name, needs, mk)
	}
	p.Steps = append(p.Steps, mk("build:"+name, PhaseRelease, needs, ""))
	m.built = append(m.built, "build:"+name)
	return nil
}

// sliceSteps configure the BE (s) and build the asked-for targets of its
// build directory. A slice makes none of the step's outputs: the collect
// step takes its build directory instead.
func (m *maker) sliceSteps(s Step, mk func(id, phase string, needs []string, profile string) Step) error {
	r, p, sl := m.in.Recipe, m.p, m.in.Slice
	s.Outputs = nil
	p.Steps = append(p.Steps, s)
	last := s.ID
	if len(sl.Targets) > 0 {
		bcmd, err := expandWords(r.Slice.Build, m.ctx)
		if err != nil {
			return fmt.Errorf("recipe %s: slice.build: %w", r.Name, err)
		}
		tg := mk(last+":targets", PhaseSlice, []string{last}, "")
		tg.Command, tg.Outputs = append(bcmd, sl.Targets...), nil
		p.Steps = append(p.Steps, tg)
		last = tg.ID
	}
	m.built = append(m.built, last)
	return nil
}

// pgoSteps build the PGO step with its profile: given (--pgo-profile), or
// made by an instrumented build, a training run under emulation on the
// target's CPU model, and a merge.
func (m *maker) pgoSteps(name string, needs []string, mk func(id, phase string, needs []string, profile string) Step) error {
	in, r, p, tc := m.in, m.in.Recipe, m.p, m.in.Toolchain
	optNeeds := slices.Clone(needs)
	if in.Profile == "" {
		p.Steps = append(p.Steps, mk("build:"+name+":instrument", PhaseInstrument, needs, ""))
		train, err := expandWords(r.PGO.Train, m.ctx)
		if err != nil {
			return fmt.Errorf("recipe %s: pgo.train: %w", r.Name, err)
		}
		p.Steps = append(p.Steps, Step{ID: "pgo:train", Kind: KindTrain, Command: append(slices.Clone(tc.EmulatorWith(toolchain.SysrootRunPlaceholder)), train...),
			Needs: []string{"build:" + name + ":instrument"}, Inputs: StepInputs{Train: &TrainInputs{QemuModel: in.Cell.Qemu.Name}}})
		// Clang's raw profiles are merged into one .profdata; GCC's .gcda
		// directory is the profile itself.
		merge := Step{ID: "pgo:merge", Kind: KindMerge, Needs: []string{"pgo:train"}, Outputs: []string{PROFILEDIR}}
		if tc.Compiler.Dialect == "clang" {
			merge.Command = []string{"llvm-profdata", "merge", "-o", PROFILE, PROFILEDIR + "/*.profraw"}
			merge.Outputs = []string{PROFILE}
		}
		p.Steps = append(p.Steps, merge)
		optNeeds = append(optNeeds, "pgo:merge")
	}
	p.Steps = append(p.Steps, mk("build:"+name, PhasePGO, optNeeds, in.Profile))
	m.built = append(m.built, "build:"+name)
	return nil
}

// collectAndScan take what the built steps made into the output (the
// recipe's outputs and collect rules; a slice's build directory; a
// third-party-only build's install) and scan it for the target.
func (m *maker) collectAndScan() error {
	r, p := m.in.Recipe, m.p
	collectIn := &CollectInputs{Outputs: r.Outputs}
	switch {
	case m.in.Slice != nil:
		collectIn = &CollectInputs{Slice: r.Slice.Dir}
	case m.pkgsOnly:
		collectIn = &CollectInputs{Thirdparty: r.Thirdparty.Install}
	}
	for i, rule := range r.Collect {
		if m.pkgsOnly || m.in.Slice != nil {
			break
		}
		when, err := recipe.Expand(rule.When, m.ctx)
		if err != nil {
			return fmt.Errorf("recipe %s: collect[%d].when: %w", r.Name, i, err)
		}
		if rule.When == "" || strings.TrimSpace(when) == "true" {
			collectIn.Extra = append(collectIn.Extra, CollectExtra{From: rule.From, To: rule.To})
		}
	}
	p.Steps = append(p.Steps, Step{ID: "collect", Kind: KindCollect, Needs: m.built, Inputs: StepInputs{Collect: collectIn}, Outputs: []string{OUT}})
	scanStep := Step{ID: "scan", Kind: KindScan, Needs: []string{"collect"}, Command: []string{"dorisarm", "scan", "--target", m.in.Cell.Target.Name}}
	if collectIn.Thirdparty != "" && len(r.Ships.Thirdparty) > 0 {
		// A third-party-only build ships what the BE takes from the install:
		// its build tools, archives and the libraries the BE does not take
		// are judged for foreign code and the CPU's instructions alone.
		scanStep.Inputs.Scan = &ScanInputs{Ships: slices.Clone(r.Ships.Thirdparty)}
		for _, g := range r.Ships.Thirdparty {
			scanStep.Command = append(scanStep.Command, "--ship", g)
		}
	}
	scanStep.Command = append(scanStep.Command, OUT)
	p.Steps = append(p.Steps, scanStep)
	return nil
}

// addSetup puts the steps that make what compiling needs first: the
// target OS's sysroot (unless waived) and the compiler's check against it,
// which also lays out the compiler wrappers. Every step that runs the
// compiler or a target program needs them; fetching, unpacking and
// patching do not, keep keys free of the target, and run beside them.
func (p *Plan) addSetup(tc *toolchain.Toolchain, rt *RuntimeInputs) error {
	var setup []Step
	var needs []string
	if sr := tc.Sysroot; sr != nil {
		id := "sysroot:" + sr.Name
		setup = append(setup, Step{ID: id, Kind: KindSysroot, Inputs: StepInputs{Sysroot: &SysrootInputs{Name: sr.Name, Key: sr.Key}}})
		needs = []string{id}
	}
	if rt != nil && tc.Runtime != nil {
		// The runtime first: the compiler's check links against it, and
		// its key is in every compiling step's (through the toolchain's).
		id := runtimeStepID(rt.Name)
		setup = append(setup, Step{ID: id, Kind: KindRuntime, Inputs: StepInputs{Runtime: rt},
			Outputs: []string{ToolchainRoot + "/" + toolchain.RuntimeDir}})
		needs = append(needs, id)
	}
	in := &ToolchainInputs{Compiler: tc.Identity.Name, Digest: tc.Identity.Digest, Parts: tc.Identity.Parts}
	if tc.Sysroot != nil {
		var err error
		if in.Probe, err = tc.ProbeKey(); err != nil {
			return err
		}
	}
	tcID := "toolchain:" + tc.Identity.Name
	setup = append(setup, Step{ID: tcID, Kind: KindToolchain, Needs: needs, Inputs: StepInputs{Toolchain: in}})
	for i := range p.Steps {
		s := &p.Steps[i]
		switch s.Kind {
		case KindFetch, KindUnpack, KindPatch, KindPatchTree, KindBase:
			// Target-free: shared by every cell whose tree and archives are
			// the same (an unpack command is the tree's own script, not a
			// compile).
			continue
		}
		s.Needs = append([]string{tcID}, s.Needs...)
	}
	p.Steps = append(setup, p.Steps...)
	return nil
}

// checkLibstdcxx says why a plan that compiles the tree's own code against
// a sysroot whose C++ library is older than the recipe needs cannot build:
// it would fail at its first unit that uses the newer library, long after
// it started.
func checkLibstdcxx(in Inputs, compiles bool) string {
	r, sr := in.Recipe, in.Toolchain.Sysroot
	if !compiles || r.LibstdcxxMin == "" || sr == nil {
		return ""
	}
	if rt := in.Toolchain.Runtime; rt != nil && in.Runtime != nil && !olderGCC(rt.Libstdcxx, r.LibstdcxxMin) {
		return ""
	}
	ms, ok := in.Matrix.Sysroots[sr.Name]
	if !ok || ms.Libstdcxx == "" {
		return ""
	}
	have, err1 := goversion.NewVersion(ms.Libstdcxx)
	need, err2 := goversion.NewVersion(r.LibstdcxxMin)
	if err1 != nil || err2 != nil || !have.LessThan(need) {
		return ""
	}
	return fmt.Sprintf("recipe %s compiles against libstdc++ of GCC %s or newer (libstdcxx_min), and sysroot %s holds GCC %s's (sysroots.%s.libstdcxx in %s) and no C++ runtime new enough (sysroots.%s.runtime): name a runtime of GCC %s or newer built for glibc %s or older (runtimes in %s, as Doris's ldb_toolchain ships), or, for a BE slice that links nothing, pass --waive-sysroot REASON",
		r.Name, r.LibstdcxxMin, sr.Name, ms.Libstdcxx, sr.Name, in.Matrix.File, sr.Name, r.LibstdcxxMin, in.Cell.OS.Glibc, in.Matrix.File)
}

func findPackage(pkgs []source.Package, entry string) (source.Package, bool) {
	for _, p := range pkgs {
		if p.Entry == entry {
			return p, true
		}
	}
	return source.Package{}, false
}

// patchInputs lists patches in series order (component, number): the
// order they apply in.
func patchInputs(pts []*patch.Patch) *PatchInputs {
	sorted := slices.Clone(pts)
	slices.SortStableFunc(sorted, func(a, b *patch.Patch) int {
		return cmp.Or(strings.Compare(a.Component, b.Component), cmp.Compare(a.Number, b.Number))
	})
	in := &PatchInputs{}
	for _, pt := range sorted {
		in.Patches = append(in.Patches, PatchInput{ID: pt.ID(), SHA256: pt.SHA256})
	}
	return in
}

func flagList(f toolchain.Flags) []string {
	out := f.Compile()
	for _, l := range f.LinkFor(false) {
		out = append(out, "link:"+l)
	}
	for _, l := range f.CXXRuntime {
		out = append(out, "link-c++:"+l)
	}
	for _, l := range f.CXXInclude {
		out = append(out, "c++:"+l)
	}
	return out
}

func driver(tc *toolchain.Toolchain, cxx bool) string {
	switch {
	case tc.Compiler.Dialect == "clang" && cxx:
		return "clang++"
	case tc.Compiler.Dialect == "clang":
		return "clang"
	case cxx:
		return "g++"
	}
	return "gcc"
}

func toolPlaceholders(tc *toolchain.Toolchain) map[string]string {
	m := map[string]string{}
	for role := range tc.Tools {
		m[role] = "$TOOLCHAIN/$PHASE/bin/" + role
	}
	return m
}

// orderSteps sorts steps so every step comes after what it needs, keeping the
// written order otherwise.
func (p *Plan) orderSteps() error {
	byID := map[string]int{}
	for i, s := range p.Steps {
		byID[s.ID] = i
	}
	state := map[string]int{}
	var out []Step
	var visit func(string) error
	visit = func(id string) error {
		switch state[id] {
		case 1:
			return fmt.Errorf("steps form a cycle at %s (check thirdparty.deps in the recipe)", id)
		case 2:
			return nil
		}
		i, ok := byID[id]
		if !ok {
			return fmt.Errorf("a step needs %s, which is not planned", id)
		}
		state[id] = 1
		for _, n := range p.Steps[i].Needs {
			if err := visit(n); err != nil {
				return err
			}
		}
		state[id] = 2
		out = append(out, p.Steps[i])
		return nil
	}
	for _, s := range p.Steps {
		if err := visit(s.ID); err != nil {
			return err
		}
	}
	p.Steps = out
	return nil
}

func mustVersion(v string) *goversion.Version {
	ver, err := goversion.NewVersion(v)
	if err != nil {
		ver, _ = goversion.NewVersion("0")
	}
	return ver
}
