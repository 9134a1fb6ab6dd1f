package build

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/plan"
)

// pkgsDir holds the package steps' own trees in a cell's work directory.
const pkgsDir = "pkgs"

// Step states in runSteps.
const (
	pending = iota
	running
	finished
	dropped // failed, or blocked by a failed package (--keep-going)
)

// runSteps runs a cell's plan. The sysroot and toolchain steps run outside
// the tree, beside the fetch, unpack and patch steps. Package builds (thirdparty steps) run at
// once, as many as the --jobs budget, each in a tree of its own that holds
// the tree's third-party scripts, its sources and the installs of exactly
// the packages it needs (packageStep). Every other step runs in the cell's
// tree, one at a time and in the plan's order: fetch, unpack and patch
// steps as soon as the steps before them in that order are done, the
// steps after the packages (BE, FE, collect, scan) once every step before
// them is. It returns how many package builds succeeded.
func (r *runner) runSteps(parent context.Context, pe *PackagesError) (built int, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	sc := &scheduler{r: r, p: r.in.Plan, ctx: ctx, parent: parent, cancel: cancel, pe: pe,
		results: make(chan stepResult), state: make([]int, len(r.in.Plan.Steps)), index: r.shared.index,
		blocked: map[string]string{}, atOnce: r.opts.Jobs, model: r.etaModel()}
	if r.opts.PackagesAtOnce > 0 {
		sc.atOnce = r.opts.PackagesAtOnce
	}
	sc.prio = sc.model.priorities(sc.p)
	defer r.saveTimes()
	for {
		if sc.first == nil && ctx.Err() == nil {
			sc.start()
		}
		if sc.nRunning == 0 {
			break
		}
		sc.ended(<-sc.results)
	}
	if sc.first != nil {
		return sc.built, sc.first
	}
	if err := parent.Err(); err != nil {
		return sc.built, err
	}
	if err := sc.stuck(); err != nil {
		return sc.built, err
	}
	slices.SortStableFunc(pe.Failed, func(a, b PackageFailure) int { return sc.index[a.Step] - sc.index[b.Step] })
	return sc.built, nil
}

// stepResult is how step i ended.
type stepResult struct {
	i   int
	err error
}

// scheduler is one cell's run of its plan: each step's state and what
// runs now.
type scheduler struct {
	r           *runner
	p           *plan.Plan
	ctx, parent context.Context
	cancel      context.CancelFunc
	pe          *PackagesError
	results     chan stepResult
	state       []int
	index       map[string]int
	blocked     map[string]string // step → the failed package it waits for
	first       error
	// nRunning steps run now, nPackages of them package builds (at most
	// atOnce); treeBusy: a step holds the cell's tree; setupBusy: a
	// sysroot or toolchain step runs.
	nRunning, nPackages, atOnce int
	treeBusy, setupBusy         bool
	model                       *etaModel
	prio                        []float64
	built                       int
}

func (sc *scheduler) needsDone(s plan.Step) bool {
	for _, n := range s.Needs {
		if j, ok := sc.index[n]; ok && sc.state[j] != finished {
			return false
		}
	}
	return true
}

// launch starts step i.
func (sc *scheduler) launch(i int, run func(context.Context, int, plan.Step) error) {
	s := sc.p.Steps[i]
	sc.state[i] = running
	sc.nRunning++
	go func() { sc.results <- stepResult{i, run(sc.ctx, i, s)} }()
}

// start starts every step that can: setup and runtime steps beside the
// rest, fetch, unpack and patch steps one at a time in the tree, package
// builds up to the budget, the steps after the packages in the plan's
// order once every step before them is done.
func (sc *scheduler) start() {
	allBefore := true // no earlier step is still to come
	lateOrder := true // no earlier step after the packages is
	var ready []int   // package steps that can start
	var early []int   // fetch, unpack and patch steps that can start
	for i, s := range sc.p.Steps {
		if sc.state[i] == running {
			allBefore = false
		}
		if sc.state[i] != pending {
			continue
		}
		if sc.drop(i, s) {
			continue
		}
		switch s.Kind {
		case plan.KindSysroot, plan.KindToolchain:
			// Outside the tree: beside fetch, unpack and patch steps.
			if !sc.setupBusy && sc.needsDone(s) {
				sc.setupBusy = true
				sc.launch(i, sc.r.setupStep)
			}
		case plan.KindRuntime:
			// In a tree of its own, beside everything else: the
			// toolchain step (and so every compile) waits for it.
			if sc.needsDone(s) {
				sc.launch(i, sc.r.runtimeStep)
			}
		case plan.KindThirdparty:
			if sc.needsDone(s) {
				ready = append(ready, i)
			}
		case plan.KindFetch, plan.KindUnpack, plan.KindPatch, plan.KindPatchTree, plan.KindBase:
			// Each touches its own part of the tree: any order that
			// keeps their needs will do.
			if sc.needsDone(s) {
				early = append(early, i)
			}
		default:
			// BE, FE, PGO, collect, scan: in the plan's order, once
			// every step before them is done.
			if lateOrder && allBefore && !sc.treeBusy && sc.needsDone(s) {
				sc.treeBusy = true
				sc.launch(i, sc.r.treeStep)
			}
			lateOrder = false
		}
		allBefore = false
	}
	sc.startEarly(early)
	sc.startPackages(ready)
}

// drop drops a step that waits for a failed package (--keep-going).
func (sc *scheduler) drop(i int, s plan.Step) bool {
	why := blockedBy(s, sc.blocked)
	if why == "" {
		return false
	}
	sc.blocked[s.ID] = why
	sc.state[i] = dropped
	if s.Kind == plan.KindThirdparty {
		sc.pe.Skipped = append(sc.pe.Skipped, strings.TrimPrefix(s.ID, "thirdparty:")+" (needs "+why+")")
	}
	return true
}

// startEarly starts, when the tree is free, the fetch, unpack or patch
// step whose package is on the longest chain.
func (sc *scheduler) startEarly(early []int) {
	if sc.treeBusy || len(early) == 0 {
		return
	}
	i := slices.MaxFunc(early, func(a, b int) int { return cmp.Or(cmp.Compare(sc.prio[a], sc.prio[b]), cmp.Compare(b, a)) })
	sc.treeBusy = true
	sc.launch(i, sc.r.treeStep)
}

// startPackages starts package builds up to the budget, those on the
// longest chain first: a package others wait for starts before one
// nothing waits for.
func (sc *scheduler) startPackages(ready []int) {
	slices.SortStableFunc(ready, func(a, b int) int { return cmp.Compare(sc.prio[b], sc.prio[a]) })
	for _, i := range ready {
		if sc.nPackages >= sc.atOnce {
			break
		}
		sc.nPackages++
		// Each package may use the whole budget (make -j): while one
		// configures or links on one core, another compiles.
		sc.launch(i, func(ctx context.Context, i int, s plan.Step) error {
			return sc.r.packageStep(ctx, i, s, sc.r.opts.Jobs)
		})
	}
}

// ended takes a step's end: finished, a package failed under
// --keep-going (what needs it is dropped), or the cell's first error
// (the steps running now stop).
func (sc *scheduler) ended(res stepResult) {
	sc.nRunning--
	s := sc.p.Steps[res.i]
	switch s.Kind {
	case plan.KindThirdparty:
		sc.nPackages--
	case plan.KindSysroot, plan.KindToolchain:
		sc.setupBusy = false
	case plan.KindRuntime:
	default:
		sc.treeBusy = false
	}
	switch {
	case res.err == nil:
		sc.state[res.i] = finished
		if s.Kind == plan.KindThirdparty {
			sc.built++
		}
	case sc.r.opts.KeepGoing && sc.parent.Err() == nil && isPackageStep(s):
		pkg := s.ID[strings.Index(s.ID, ":")+1:]
		sc.pe.Failed = append(sc.pe.Failed, PackageFailure{Package: pkg, Step: s.ID, Err: res.err})
		sc.blocked[s.ID] = pkg
		sc.state[res.i] = dropped
	default:
		sc.state[res.i] = dropped
		if sc.first == nil {
			sc.first = res.err
			sc.cancel() // the steps running now stop; their errors are not the cause
		}
	}
	secs, unknown, borrowed := sc.model.eta(func(id string) bool {
		j, ok := sc.index[id]
		return ok && (sc.state[j] == finished || sc.state[j] == dropped)
	})
	sc.r.opts.Progress.ETA(sc.p.Cell.Target, secs, unknown, borrowed)
}

// stuck says which step never started, and what it waited for: a bug
// in the plan's order.
func (sc *scheduler) stuck() error {
	for i, st := range sc.state {
		if st != pending {
			continue
		}
		var waits []string
		for _, n := range sc.p.Steps[i].Needs {
			if j, ok := sc.index[n]; ok && sc.state[j] != finished {
				waits = append(waits, n)
			}
		}
		return fmt.Errorf("%s: step %s could not start: it waits for %v, which did not finish (a bug in the plan's order: report it)", sc.p.Cell.Target, sc.p.Steps[i].ID, waits)
	}
	return nil
}

// treeStep runs a step in the cell's tree, holding it, and keeps the
// paths its result has for the package steps that need it.
func (r *runner) treeStep(ctx context.Context, i int, s plan.Step) error {
	r.shared.treeMu.Lock()
	defer r.shared.treeMu.Unlock()
	sr := *r
	sr.cpu, sr.changed, sr.deleted = 0, nil, nil
	if err := sr.step(ctx, i, s); err != nil {
		return err
	}
	r.shared.mu.Lock()
	r.shared.files[s.ID] = sr.changed
	r.shared.mu.Unlock()
	return nil
}

// inTree is a copy of the runner whose step runs in a fresh, empty tree
// of its own, pkgs/<name> (a package's, the C++ runtime's), with no
// result yet.
func (r *runner) inTree(name string) (*runner, error) {
	pr := *r
	pr.cpu, pr.changed, pr.deleted = 0, nil, nil
	pr.tree = filepath.Join(r.work, pkgsDir, name)
	if err := os.RemoveAll(pr.tree); err != nil {
		return nil, err
	}
	return &pr, os.MkdirAll(pr.tree, 0o755)
}

// packageStep builds one package in its own tree, pkgs/<PACKAGE>, seen by
// its programs at the cell tree's path: its cached result comes back into
// that tree, or the tree is laid out with exactly what the step's key
// covers (layOut) and the package built in it. The result is then merged
// into the cell's tree, where a path another package installed with other
// bytes is a conflict naming both.
func (r *runner) packageStep(ctx context.Context, i int, s plan.Step, jobs int) error {
	pkg := strings.TrimPrefix(s.ID, "thirdparty:")
	pr, err := r.inTree(pkg)
	if err != nil {
		return err
	}
	pr.opts.Jobs = jobs
	pr.layout = func() error { return r.layOut(pr.tree, s) }
	if err := pr.step(ctx, i, s); err != nil {
		// The tree stays for a look at what failed (the next build of the
		// package starts it afresh).
		var se *StepError
		if errors.As(err, &se) {
			se.Missing = r.undeclared(s, append(slices.Clone(se.First), se.Tail))
			se.Tree = pr.tree
		}
		return err
	}
	defer os.RemoveAll(pr.tree)
	return r.merge(s, pr.tree, pr.changed, pr.deleted)
}

// undeclared names the files a failed package step's log mentions that a
// package it does not need installed in this build: the likely missing
// deps entries, as "libz.a: ZLIB installs it".
func (r *runner) undeclared(s plan.Step, lines []string) []string {
	_, installs := r.inputsOf(s)
	declared := map[string]bool{strings.TrimPrefix(s.ID, "thirdparty:"): true}
	for _, id := range installs {
		declared[strings.TrimPrefix(id, "thirdparty:")] = true
	}
	text := strings.Join(lines, "\n")
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for rel, pkg := range r.shared.owner {
		base := path.Base(rel)
		if declared[pkg] || len(base) < 3 || !mentions(text, base) {
			continue
		}
		hint := fmt.Sprintf("%s: %s installs it", base, pkg)
		if !seen[hint] {
			seen[hint] = true
			out = append(out, hint)
		}
	}
	sort.Strings(out)
	return out
}

// mentions reports whether text has name as a whole word (not inside a
// longer file name).
func mentions(text, name string) bool {
	word := func(c byte) bool {
		return c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		at, end := i+j, i+j+len(name)
		if (at == 0 || !word(text[at-1])) && (end == len(text) || !word(text[end]) || text[end] == '.' && (end+1 == len(text) || !word(text[end+1]))) {
			return true
		}
		i = at + 1
	}
}

// inputsOf are the steps whose results a package step's tree holds:
// sources (its own fetch, unpack and patch steps, and those of sources it
// reads, RAGEL for HYPERSCAN) whole, and installs (the packages it needs,
// transitively, and a prebuilt base) for their install tree only.
func (r *runner) inputsOf(s plan.Step) (sources, installs []string) {
	p := r.in.Plan
	seen := map[string]bool{}
	var visit func(id string, viaPackage bool)
	visit = func(id string, viaPackage bool) {
		key := fmt.Sprint(id, viaPackage)
		if seen[key] {
			return
		}
		seen[key] = true
		st := p.Step(id)
		if st == nil {
			return
		}
		switch st.Kind {
		case plan.KindThirdparty:
			if id != s.ID {
				installs = append(installs, id)
			}
			viaPackage = id != s.ID
		case plan.KindBase:
			installs = append(installs, id)
		case plan.KindFetch, plan.KindUnpack, plan.KindPatch:
			if viaPackage {
				return // another package's sources: not this one's input
			}
			sources = append(sources, id)
		default:
			return // the tree's own patches: in the scripts copied
		}
		for _, n := range st.Needs {
			visit(n, viaPackage)
		}
	}
	visit(s.ID, false)
	slices.Sort(sources)
	slices.Sort(installs)
	return slices.Compact(sources), slices.Compact(installs)
}

// layOut makes a package step's tree: the tree's third-party scripts and
// the files outside them its scripts read (the recipe's reads), all of
// them part of the step's key, and inputsOf's results as the cell's tree
// has them.
func (r *runner) layOut(tree string, s plan.Step) error {
	r.shared.treeMu.RLock()
	defer r.shared.treeMu.RUnlock()
	tp := r.in.Recipe.Thirdparty
	tpDir := path.Dir(tp.Vars)
	var ignore []string
	for _, d := range []string{tp.SrcDir, tp.Install} {
		if rel, ok := strings.CutPrefix(d, tpDir+"/"); ok {
			ignore = append(ignore, rel)
		}
	}
	if err := copyTree(filepath.Join(r.src, filepath.FromSlash(tpDir)), filepath.Join(tree, "src", filepath.FromSlash(tpDir)), ignore); err != nil {
		return err
	}
	for _, rd := range tp.Reads {
		from := filepath.Join(r.src, filepath.FromSlash(rd))
		if _, err := os.Lstat(from); errors.Is(err, fs.ErrNotExist) {
			continue // absent is what the key says
		}
		if err := copyPaths(r.src, filepath.Join(tree, "src"), []string{rd}); err != nil {
			return err
		}
	}
	sources, installs := r.inputsOf(s)
	install := "src/" + tp.Install
	r.shared.mu.Lock()
	var paths []string
	for _, id := range sources {
		paths = append(paths, r.shared.files[id]...)
	}
	for _, id := range installs {
		for _, f := range r.shared.files[id] {
			if f == install || strings.HasPrefix(f, install+"/") {
				paths = append(paths, f)
			}
		}
	}
	r.shared.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(tree, filepath.FromSlash(install)), 0o755); err != nil {
		return err
	}
	if err := copyPaths(r.work, tree, paths); err != nil {
		return err
	}
	if b := s.Inputs.Build; b != nil {
		for _, d := range b.InstallDirs {
			dir := filepath.Join(tree, filepath.FromSlash(install), filepath.FromSlash(d))
			if !strings.HasPrefix(dir, filepath.Join(tree, filepath.FromSlash(install))+string(filepath.Separator)) {
				return fmt.Errorf("install dir %q is outside the install tree", d)
			}
			// Links in the install tree stay in it (merge checks every
			// package's result), so MkdirAll cannot leave it.
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("making %s of the install tree: %w", d, err)
			}
		}
	}
	return nil
}

// copyPaths copies the listed paths (relative, slash-separated; a
// directory stands for itself only) from one root to another, parents
// first, keeping modes, times and links as they are.
func copyPaths(from, to string, rels []string) error {
	rels = slices.Clone(rels)
	sort.Strings(rels)
	for _, rel := range slices.Compact(rels) {
		src := filepath.Join(from, filepath.FromSlash(rel))
		dst := filepath.Join(to, filepath.FromSlash(rel))
		st, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a later step's result
		}
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		switch {
		case st.IsDir():
			if err := os.MkdirAll(dst, st.Mode().Perm()|0o700); err != nil {
				return err
			}
		case st.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(src)
			if err != nil {
				return err
			}
			os.Remove(dst)
			if err := os.Symlink(link, dst); err != nil {
				return err
			}
		case st.Mode().IsRegular():
			in, err := os.Open(src)
			if err != nil {
				return err
			}
			err = writeFile(dst, in, st.Mode().Perm(), st.ModTime())
			in.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// ConflictError is two packages installing one path with different bytes.
type ConflictError struct {
	Target, Path string
	Packages     [2]string // the one installed first, the one after
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: packages %s and %s both install %s, with different contents: one of them must not (a recipe env or patch that turns it off), or they must be one package",
		e.Target, e.Packages[0], e.Packages[1], e.Path)
}

// merge moves a package step's result from its tree into the cell's. It
// checks the whole result first and moves nothing when anything is wrong:
//   - a package may change only the tree's source directory, the install
//     tree and its own flag read-back (the rest of the tree is what other
//     packages' trees are made from, and their keys do not cover it);
//   - a path another package of this build installed, with other bytes
//     (or another link target), or a directory holding another package's
//     files that the result would replace, is a *ConflictError naming both;
//   - every directory a moved path goes through must be a real directory
//     in the cell's tree (never a link another package made, or a file);
//   - a link must stay in the tree.
func (r *runner) merge(s plan.Step, tree string, changed, deleted []string) error {
	tp := r.in.Recipe.Thirdparty
	r.shared.treeMu.Lock()
	defer r.shared.treeMu.Unlock()
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	m := &merger{r: r, pkg: strings.TrimPrefix(s.ID, "thirdparty:"), tree: tree, install: "src/" + tp.Install, owner: r.shared.owner}
	if err := m.inside(changed, deleted); err != nil {
		return err
	}
	if err := m.check(changed, deleted); err != nil {
		return err
	}
	if err := m.move(changed, deleted); err != nil {
		return err
	}
	r.shared.files[s.ID] = changed
	return nil
}

// merger moves one package's result into the cell's tree.
type merger struct {
	r         *runner
	pkg, tree string
	install   string
	// owner says which package installed each path of the install tree.
	owner map[string]string
}

// inside refuses a result that changed the tree outside the source
// directory, the install tree and the package's flag read-back.
func (m *merger) inside(changed, deleted []string) error {
	tp := m.r.in.Recipe.Thirdparty
	var outside []string
	for _, rel := range slices.Concat(changed, deleted) {
		if !under(rel, "src/"+tp.SrcDir) && !under(rel, m.install) && !under(rel, flagsDir) {
			outside = append(outside, strings.TrimPrefix(rel, "src/"))
		}
	}
	if len(outside) == 0 {
		return nil
	}
	sort.Strings(outside)
	if len(outside) > 10 {
		outside = append(outside[:10], fmt.Sprintf("… and %d more", len(outside)-10))
	}
	return fmt.Errorf("%s: package %s changed files outside %s and %s, which every package's tree is made from (and no key covers what a package leaves there):\n  %s",
		m.r.in.Plan.Cell.Target, m.pkg, tp.SrcDir, tp.Install, strings.Join(outside, "\n  "))
}

func (m *merger) conflict(rel, other string) error {
	if other == "" {
		other = "(the tree itself)"
	}
	return &ConflictError{Target: m.r.in.Plan.Cell.Target, Path: strings.TrimPrefix(rel, "src/"), Packages: [2]string{other, m.pkg}}
}

// ownedUnder is a path at or below rel that another package installed.
func (m *merger) ownedUnder(rel string) (string, bool) {
	for p, o := range m.owner {
		if o != m.pkg && under(p, rel) {
			return p, true
		}
	}
	return "", false
}

// realParents checks that every directory above rel in the cell's tree is
// a directory or not there yet.
func (m *merger) realParents(rel string) error {
	parts := strings.Split(rel, "/")
	for n := 1; n < len(parts); n++ {
		p := strings.Join(parts[:n], "/")
		st, err := os.Lstat(filepath.Join(m.r.work, filepath.FromSlash(p)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return m.conflict(p, m.owner[p])
		}
	}
	return nil
}

// check checks the whole result before anything moves: real parent
// directories, links that stay in the tree, and no conflict with what
// another package installed.
func (m *merger) check(changed, deleted []string) error {
	for _, d := range deleted {
		if err := m.realParents(d); err != nil {
			return err
		}
		if p, ok := m.ownedUnder(d); ok {
			return m.conflict(p, m.owner[p])
		}
	}
	for _, rel := range changed {
		if err := m.checkChanged(rel); err != nil {
			return err
		}
	}
	return nil
}

func (m *merger) checkChanged(rel string) error {
	if err := m.realParents(rel); err != nil {
		return err
	}
	src := filepath.Join(m.tree, filepath.FromSlash(rel))
	dst := filepath.Join(m.r.work, filepath.FromSlash(rel))
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := checkLink(rel, target); err != nil {
			return fmt.Errorf("%s: package %s installed the link %s -> %s, which %v", m.r.in.Plan.Cell.Target, m.pkg, strings.TrimPrefix(rel, "src/"), target, err)
		}
	}
	dt, err := os.Lstat(dst)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if o, ok := m.owner[rel]; ok && o != m.pkg {
		same, err := sameEntry(src, dst)
		if err != nil {
			return err
		}
		if !same {
			return m.conflict(rel, o)
		}
	}
	if dt.IsDir() && !st.IsDir() {
		// The result replaces a directory: not one with another's files.
		if p, ok := m.ownedUnder(rel); ok {
			return m.conflict(p, m.owner[p])
		}
	}
	return nil
}

// move deletes what the package deleted and moves what it changed, in
// path order, each installed path owned by the first package to install
// it; directory times last (moving files into them changed them).
func (m *merger) move(changed, deleted []string) error {
	for _, d := range deleted {
		if err := os.RemoveAll(filepath.Join(m.r.work, filepath.FromSlash(d))); err != nil {
			return err
		}
	}
	sorted := slices.Clone(changed)
	sort.Strings(sorted)
	for _, rel := range sorted {
		if err := m.moveOne(rel); err != nil {
			return err
		}
		if under(rel, m.install) {
			if _, ok := m.owner[rel]; !ok {
				m.owner[rel] = m.pkg
			}
		}
	}
	for i := len(sorted) - 1; i >= 0; i-- {
		rel := sorted[i]
		if st, err := os.Lstat(filepath.Join(m.tree, filepath.FromSlash(rel))); err == nil && st.IsDir() {
			os.Chtimes(filepath.Join(m.r.work, filepath.FromSlash(rel)), st.ModTime(), st.ModTime())
		}
	}
	return nil
}

// moveOne moves one changed path: a directory is made (over a file), a
// file or link renamed into place (over a directory).
func (m *merger) moveOne(rel string) error {
	src := filepath.Join(m.tree, filepath.FromSlash(rel))
	dst := filepath.Join(m.r.work, filepath.FromSlash(rel))
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	dt, dstErr := os.Lstat(dst)
	if st.IsDir() {
		if dstErr == nil && !dt.IsDir() {
			if err := os.Remove(dst); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(dst, st.Mode().Perm()|0o700); err != nil {
			return err
		}
		return os.Chmod(dst, st.Mode().Perm())
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if dstErr == nil && dt.IsDir() {
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
	}
	return os.Rename(src, dst)
}

// sameEntry reports whether two paths hold the same file: the same bytes,
// or links with the same target, or both directories.
func sameEntry(a, b string) (bool, error) {
	sa, err := os.Lstat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Lstat(b)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch {
	case sa.IsDir() || sb.IsDir():
		return sa.IsDir() && sb.IsDir(), nil
	case sa.Mode()&fs.ModeSymlink != 0 || sb.Mode()&fs.ModeSymlink != 0:
		la, ea := os.Readlink(a)
		lb, eb := os.Readlink(b)
		return ea == nil && eb == nil && la == lb, nil
	case sa.Size() != sb.Size():
		return false, nil
	}
	return sameBytes(a, b)
}

func sameBytes(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if ea == io.EOF || ea == io.ErrUnexpectedEOF {
			return eb == io.EOF || eb == io.ErrUnexpectedEOF, nil
		}
		if ea != nil {
			return false, ea
		}
		if eb != nil {
			return false, eb
		}
	}
}
