package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/source"
	"github.com/dorisarm/dorisarm/internal/unpack"
)

// PackageFailure is one third-party package that did not build.
type PackageFailure struct {
	Package, Step string
	Err           error
}

// PackagesError is a --keep-going build in which some packages failed.
type PackagesError struct {
	Target  string
	Failed  []PackageFailure
	Skipped []string // packages not built because one they need failed
	// Partial is where the packages that built were published (a
	// third-party-only build), "" if nowhere; PartialErr why not.
	Partial    string
	PartialErr error
}

func (e *PackagesError) Error() string {
	var b strings.Builder
	switch {
	case e.Partial != "":
		fmt.Fprintf(&b, "%s: %d package(s) failed; the packages that built are published as a partial build in %s", e.Target, len(e.Failed), e.Partial)
	case e.PartialErr != nil:
		fmt.Fprintf(&b, "%s: %d package(s) failed; the packages that built were not published: %v", e.Target, len(e.Failed), e.PartialErr)
	default:
		fmt.Fprintf(&b, "%s: %d package(s) failed; nothing was published", e.Target, len(e.Failed))
	}
	for _, f := range e.Failed {
		err, log := f.Err, ""
		var se *StepError
		if errors.As(err, &se) {
			err, log = se.Err, " (log: "+se.Log+")"
		}
		fmt.Fprintf(&b, "\n  %s, step %s%s:\n    %s", f.Package, f.Step, log, strings.ReplaceAll(err.Error(), "\n", "\n    "))
		if se != nil && len(se.First) > 0 {
			// The cause, not make's "exit status 2".
			fmt.Fprintf(&b, "\n    %s", strings.Join(se.First, "\n    "))
		}
	}
	if len(e.Skipped) > 0 {
		fmt.Fprintf(&b, "\n  not built: %s", strings.Join(e.Skipped, ", "))
	}
	return b.String()
}

// PartialSuffix names a partial build's directory: <out>/<doris>/<target>.partial.
const PartialSuffix = ".partial"

// Partial says which packages a partial build lacks.
type Partial struct {
	Failed  []string `json:"failed"`
	Skipped []string `json:"skipped,omitempty"`
	// Errors say why each failed package failed: the step and the first
	// lines of its log that name an error (not make's "exit status 2").
	Errors []PackageError `json:"errors,omitempty"`
}

// PackageError is one failed package's cause, as its step's log gives it.
type PackageError struct {
	Package string   `json:"package"`
	Step    string   `json:"step"`
	Error   string   `json:"error"`
	First   []string `json:"first_errors,omitempty"`
}

// publishPartial collects, scans and publishes what a third-party-only
// build's packages that built installed, to the target's directory with
// PartialSuffix; its record says which packages are missing.
func (r *runner) publishPartial(ctx context.Context, pe *PackagesError) (string, error) {
	r.partial = true
	part := &Partial{Skipped: pe.Skipped}
	for _, f := range pe.Failed {
		part.Failed = append(part.Failed, f.Package)
		e := PackageError{Package: f.Package, Step: f.Step, Error: f.Err.Error()}
		var se *StepError
		if errors.As(f.Err, &se) {
			// The step's own error, without the log tail and the build
			// machine's log path.
			e.Error, e.First = se.Err.Error(), se.First
			if _, failed := exitCodeOf(se.Err); len(e.First) == 0 && failed {
				// The command failed and no line reads as an error:
				// the log's last one says more than its exit status.
				if last := lastLine(se.Tail); last != "" {
					e.First = []string{"last line: " + last}
				}
			}
		}
		part.Errors = append(part.Errors, e)
	}
	r.rec.Partial = part
	for i, s := range r.in.Plan.Steps {
		if s.Kind != plan.KindCollect && s.Kind != plan.KindScan {
			continue
		}
		if err := r.step(ctx, i, s); err != nil {
			return "", err
		}
	}
	return Dir(r.opts.Out, r.in.Plan.Cell.Doris, r.in.Plan.Cell.Target) + PartialSuffix, nil
}

// dropInstalled removes from the install tree what a failed package step
// added to it (what was there before is kept; a file the step changed in
// place stays changed, and the log says so).
func (r *runner) dropInstalled(before snapshot, log io.Writer) {
	after, err := takeSnapshot(r.hostInstallDir(), nil)
	if err != nil {
		return
	}
	changed, _ := diff(before, after)
	var removed, kept int
	for i := len(changed) - 1; i >= 0; i-- {
		c := changed[i]
		if _, existed := before[c]; existed {
			kept++
			continue
		}
		if os.Remove(filepath.Join(r.hostInstallDir(), filepath.FromSlash(c))) == nil {
			removed++
		}
	}
	fmt.Fprintf(log, "the step failed: removed the %d file(s) it installed", removed)
	if kept > 0 {
		fmt.Fprintf(log, "; %d file(s) that were there before it stay as it changed them", kept)
	}
	fmt.Fprintln(log)
}

// lastLine is the last non-blank line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, " \t\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// isPackageStep reports whether a step belongs to one third-party package.
func isPackageStep(s plan.Step) bool {
	switch s.Kind {
	case plan.KindFetch, plan.KindUnpack, plan.KindPatch, plan.KindThirdparty:
		return true
	}
	return false
}

// blockedBy names the failed package a step waits for, or "".
func blockedBy(s plan.Step, blocked map[string]string) string {
	for _, n := range s.Needs {
		if why, ok := blocked[n]; ok {
			return why
		}
	}
	return ""
}

// installDir is the install tree as steps see it (in the cell's tree).
func (r *runner) installDir() string {
	return filepath.Join(r.src, filepath.FromSlash(r.in.Recipe.Thirdparty.Install))
}

// hostInstallDir is where the step's install tree is on this machine: in
// its own tree for a package step.
func (r *runner) hostInstallDir() string {
	return filepath.Join(r.srcDir(), filepath.FromSlash(r.in.Recipe.Thirdparty.Install))
}

// unpack is dorisarm's own unpack of one package: the verified archive into
// the tree's source directory, then the tree's own patches for it, applied
// with GNU patch as its download script does, and its patched_mark.
func (r *runner) unpack(ctx context.Context, s plan.Step, log io.Writer) error {
	in := s.Inputs.Unpack
	if len(in.Unsupported) > 0 && len(in.InArchive) == 0 {
		return fmt.Errorf("%s's download script also runs, for this package:\n  %s\ndorisarm runs only its patch commands and never the network; put what these fetch into the mirror and add a patch or recipe step instead",
			r.in.Recipe.Thirdparty.PatchesFrom, strings.Join(in.Unsupported, "\n  "))
	}
	srcDir := filepath.Join(r.src, filepath.FromSlash(r.in.Recipe.Thirdparty.SrcDir))
	archive := filepath.Join(srcDir, in.Archive)
	source := in.Source
	if source == "" {
		fmt.Fprintf(log, "%s is used as it is (no <PKG>_SOURCE to unpack to)\n", in.Archive)
		return nil
	}
	dest := filepath.Join(srcDir, source)
	if !strings.HasPrefix(dest, srcDir+string(filepath.Separator)) {
		return fmt.Errorf("source directory %q is outside %s", source, srcDir)
	}
	if err := os.RemoveAll(dest); err != nil {
		return err
	}
	if !unpack.Supported(archive) {
		return fmt.Errorf("%s: not an archive dorisarm unpacks (.tar.gz, .tgz, .tar.xz, .tar.bz2, .tar, .zip)", in.Archive)
	}
	tops, err := unpack.Archive(archive, srcDir, unpack.DefaultLimits)
	if err != nil {
		return err
	}
	sort.Strings(tops)
	fmt.Fprintf(log, "unpacked %s: %s\n", in.Archive, strings.Join(tops, " "))
	if st, err := os.Stat(dest); err != nil || !st.IsDir() {
		return fmt.Errorf("%s unpacked to %s, not to %s as vars.sh says", in.Archive, strings.Join(tops, ", "), source)
	}
	if len(in.Unsupported) > 0 {
		// The recipe says the archive holds what the download script fetches.
		for _, p := range in.InArchive {
			if _, err := os.Stat(filepath.Join(dest, filepath.FromSlash(p))); err != nil {
				return fmt.Errorf("%s: the recipe's thirdparty.in_archive says %s holds what %s fetches for it, and it has no %s", in.Archive, source, r.in.Recipe.Thirdparty.PatchesFrom, p)
			}
		}
		fmt.Fprintf(log, "not run (the archive holds %s): %s\n", strings.Join(in.InArchive, ", "), strings.Join(in.Unsupported, "; "))
	}
	for _, tp := range in.TreePatches {
		args := strings.Fields(tp.Args)
		fh, err := os.Open(filepath.Join(r.src, filepath.FromSlash(tp.File)))
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "$ patch %s < %s\n", strings.Join(args, " "), tp.File)
		err = r.opts.Exec(ctx, Command{Step: s.ID, Path: "patch", Args: append([]string{"--batch", "--forward"}, args...), Dir: dest, Stdin: fh, Stdout: log, Stderr: log, CPU: &r.cpu})
		fh.Close()
		if err != nil {
			return fmt.Errorf("the tree's own %s does not apply to %s: %w (see the log)", tp.File, source, err)
		}
	}
	if err := r.checkVersion(in, dest, log); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dest, "patched_mark"), nil, 0o644)
}

// versionsDir holds, in the work tree, what each unpack found its source
// declares when that is not the version the tree names: part of the unpack
// step's cached result, so a cache hit still says it.
const versionsDir = "version-check"

// checkVersion compares the version the unpacked source declares with the
// one vars.sh (or the recipe) names: an archive substituted for the pinned
// release (openssl 1.1.1w under 1.1.1s's name) is a warning in the record,
// an error with --strict-versions.
func (r *runner) checkVersion(in *plan.UnpackInputs, dest string, log io.Writer) error {
	named := in.Version
	if in.Package == "" || !strings.Contains(named, ".") {
		return nil // a commit or a date names no release to compare with
	}
	got, file := source.DeclaredVersion(dest, in.VersionFrom)
	note := filepath.Join(r.work, versionsDir, in.Package)
	os.Remove(note)
	switch {
	case got == "":
		fmt.Fprintf(log, "version: %s declares none dorisarm reads; %s names %s\n", in.Source, r.in.Recipe.Thirdparty.Vars, named)
		return nil
	case source.SameVersion(got, named):
		fmt.Fprintf(log, "version: %s declares %s (%s), as named\n", in.Source, got, file)
		return nil
	}
	msg := fmt.Sprintf("%s: the unpacked source declares version %s (%s), but %s is named %s (%s or the recipe's thirdparty.versions): the archive is not the release the tree pins",
		in.Package, got, path.Join(in.Source, file), in.Archive, named, r.in.Recipe.Thirdparty.Vars)
	fmt.Fprintln(log, msg)
	if r.opts.StrictVersions {
		return errors.New(msg + " (--strict-versions)")
	}
	if err := os.MkdirAll(filepath.Dir(note), 0o755); err != nil {
		return err
	}
	return os.WriteFile(note, []byte(msg), 0o644)
}

// versionWarnings reads what the plan's unpacks found (checkVersion): a
// warning each, or with --strict-versions the build's error.
func (r *runner) versionWarnings() error {
	for _, s := range r.in.Plan.Steps {
		in := s.Inputs.Unpack
		if s.Kind != plan.KindUnpack || in == nil || in.Package == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(r.work, versionsDir, in.Package))
		if err != nil {
			continue
		}
		if r.opts.StrictVersions {
			return fmt.Errorf("%s (--strict-versions)", b)
		}
		r.warn(string(b))
	}
	return nil
}

// checkInstalled fails a third-party step that installed an object for
// another machine: a package that fell back to a host tool (a Makefile's
// CC=gcc, an unprefixed ld) is caught where it happened, naming it.
func (r *runner) checkInstalled(s plan.Step, before snapshot, log io.Writer) error {
	after, err := takeSnapshot(r.hostInstallDir(), nil)
	if errors.Is(err, fs.ErrNotExist) {
		return r.saveFlags(s, &scan.Report{}, log) // it installed nothing
	}
	if err != nil {
		return err
	}
	changed, _ := diff(before, after)
	var paths []string
	for _, c := range changed {
		p := filepath.Join(r.hostInstallDir(), filepath.FromSlash(c))
		st, err := os.Lstat(p)
		if err == nil && st.Mode()&fs.ModeSymlink != 0 {
			if err := r.relink(p, c, log); err != nil {
				return err
			}
		}
		switch {
		case err != nil:
		case st.Mode().IsRegular():
			paths = append(paths, p)
		case st.Mode()&fs.ModeSymlink != 0 && loops(p):
			// build-thirdparty.sh's `ln -sf lib64 lib`, run again where lib
			// already links to lib64, makes lib64/lib64 -> lib64: Doris runs
			// the script once, dorisarm once per package.
			target, _ := os.Readlink(p)
			if err := os.Remove(p); err != nil {
				return err
			}
			fmt.Fprintf(log, "removed %s -> %s: a link that resolves to itself or a directory it is in\n", c, target)
		}
	}
	if len(paths) == 0 {
		// Nothing to scan: say so in the record, as a scan of no file.
		return r.saveFlags(s, &scan.Report{}, log)
	}
	// Judged as the build's scan gate will judge them: the deployment
	// checks apply to what the build ships (the scan step's globs).
	pol := r.in.Policy
	if sc := r.in.Plan.Step("scan"); sc != nil && sc.Inputs.Scan != nil && pol != nil {
		if pol, err = pol.WithShipsUnder(r.srcDir(), sc.Inputs.Scan.Ships); err != nil {
			return err
		}
	}
	rep, err := scan.Scan(context.Background(), paths, pol, scan.Options{Digests: true})
	if err != nil {
		return err
	}
	if err := r.saveFlags(s, rep, log); err != nil {
		return err
	}
	var foreign []string
	for _, f := range rep.Findings {
		if f.Kind == scan.KindForeignArch {
			rel, _ := filepath.Rel(r.srcDir(), f.Path)
			if rel == "" || strings.HasPrefix(rel, "..") {
				rel = f.Path
			}
			foreign = append(foreign, rel+": "+f.Detail)
		}
	}
	fmt.Fprintf(log, "checked %d installed file(s) for foreign objects: %d found\n", len(paths), len(foreign))
	if len(foreign) > 0 {
		sort.Strings(foreign)
		if len(foreign) > 20 {
			foreign = append(foreign[:20], fmt.Sprintf("… and %d more", len(foreign)-20))
		}
		return fmt.Errorf("package %s installed objects for another machine (it used a host tool instead of the target's):\n  %s",
			strings.TrimPrefix(s.ID, "thirdparty:"), strings.Join(foreign, "\n  "))
	}
	return nil
}

// relink makes an absolute link into the work tree (bzip2's install links
// bzcmp to $PREFIX/bin/bzdiff) relative, so that the step's result can be
// cached and the published tree holds no path of the machine that built it.
// Other links are left as they are.
func (r *runner) relink(p, name string, log io.Writer) error {
	target, err := os.Readlink(p)
	if err != nil || !filepath.IsAbs(target) {
		return nil
	}
	// The tree as the step saw it (its namespace shows it at a fixed path).
	src := r.seen(r.src)
	root := filepath.Clean(src) + string(filepath.Separator)
	if !strings.HasPrefix(filepath.Clean(target), root) {
		return nil
	}
	// The link as the step saw it: in the cell's tree.
	seen := p
	if rest, ok := strings.CutPrefix(p, r.srcDir()+string(filepath.Separator)); ok {
		seen = filepath.Join(src, rest)
	}
	rel, err := filepath.Rel(filepath.Dir(seen), filepath.Clean(target))
	if err != nil {
		return nil
	}
	if err := os.Remove(p); err != nil {
		return err
	}
	if err := os.Symlink(rel, p); err != nil {
		return err
	}
	fmt.Fprintf(log, "made %s -> %s relative: -> %s\n", name, target, rel)
	return nil
}

// loops reports whether the link at p resolves to itself (ELOOP) or to a
// directory it is in.
func loops(p string) bool {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		// Go says "too many links" for a cycle; a dangling link is no loop.
		return !errors.Is(err, fs.ErrNotExist)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	return err == nil && (dir == real || strings.HasPrefix(dir, real+string(filepath.Separator)))
}

// flagsDir holds each package's flag read-back in the work tree, so that it
// is part of the package step's cached result and comes back with it.
const flagsDir = "flag-readback"

// saveFlags keeps what the package's installed objects record they were
// compiled with, and what the scan found in them, for the build record.
// They belong in the step's work tree (its cached result): a runner
// without one is an error, not a write under the working directory.
func (r *runner) saveFlags(s plan.Step, rep *scan.Report, log io.Writer) error {
	pkg := strings.TrimPrefix(s.ID, "thirdparty:")
	if r.root() == "" {
		return fmt.Errorf("%s: no work tree to keep the flag read-back of %s in", s.ID, pkg)
	}
	dir := filepath.Join(r.root(), flagsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ps := packageScan(&rep.Summary)
	b, err := json.Marshal(ps)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, pkg+scanSuffix), b, 0o644); err != nil {
		return err
	}
	sum := rep.Summary.Flags
	if sum == nil {
		return nil
	}
	fmt.Fprintf(log, "flag read-back of %d installed object(s): %.0f%% at -march=%s (%v)\n", sum.Objects, 100*sum.AtTarget, sum.Requested, sum.Verdicts)
	if b, err = json.Marshal(sum); err != nil {
		return err
	}
	// The records themselves, by digest: the scan gate tells by them the
	// package's records in what the tree's own build links from the ones
	// the tree compiled.
	if err := saveRecords(dir, pkg, rep.Digests); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, pkg+".json"), b, 0o644)
}

// scanSuffix names a package's scan facts in flagsDir.
const scanSuffix = ".scan.json"

// packageScan is what the record keeps of one package's install scan.
func packageScan(sum *scan.Summary) *PackageScan {
	return &PackageScan{Files: sum.Files, ELF: sum.ELF, Machines: sum.Machines, Features: sum.Features,
		Guarded: sum.Guarded, Violations: sum.Violations, ByKind: sum.ByKind}
}

// loadFlags reads the flag read-backs of this plan's packages into the
// record. The work tree outlives a build, so it may hold other packages'
// from earlier builds of the cell: only the plan's are read.
func (r *runner) loadFlags() {
	for _, s := range r.in.Plan.Steps {
		if s.Kind != plan.KindThirdparty {
			continue
		}
		pkg := strings.TrimPrefix(s.ID, "thirdparty:")
		if b, err := os.ReadFile(filepath.Join(r.work, flagsDir, pkg+scanSuffix)); err == nil {
			var ps PackageScan
			if json.Unmarshal(b, &ps) != nil {
				r.warn(fmt.Sprintf("the install scan of %s could not be read; it is left out of the record", pkg))
			} else {
				if r.rec.PackageScans == nil {
					r.rec.PackageScans = map[string]*PackageScan{}
				}
				r.rec.PackageScans[pkg] = &ps
			}
		}
		b, err := os.ReadFile(filepath.Join(r.work, flagsDir, pkg+".json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // it installed no object of the target's machine
		}
		var sum scan.FlagSummary
		if err != nil || json.Unmarshal(b, &sum) != nil {
			r.warn(fmt.Sprintf("the flag read-back of %s could not be read; it is left out of the record", pkg))
			continue
		}
		if r.rec.PackageFlags == nil {
			r.rec.PackageFlags = map[string]*scan.FlagSummary{}
		}
		r.rec.PackageFlags[pkg] = &sum
	}
}
