package build

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/scan"
)

// Dir is where a build of a Doris version for a target is published.
func Dir(out, doris, target string) string { return filepath.Join(out, doris, target) }

// staging is this build's own staging directory in --out: builds that
// share --out (with other caches) never share one.
func (r *runner) staging() string { return r.stage }

// stagingName is a staging directory name no other build uses.
func stagingName(out string, c plan.CellInfo) string {
	var b [8]byte
	rand.Read(b[:])
	// The pid first, as fsutil.MkdirTempOwned names: RemoveStale can tell
	// what a killed build left.
	return filepath.Join(out, fmt.Sprintf(".staging-%d-%s-%s-%s", os.Getpid(), c.Doris, c.Target, hex.EncodeToString(b[:])))
}

// lockOut serialises publishing into out (the up-to-date check and the
// renames that replace a published build) with a lock on the directory
// itself, so that out holds nothing but builds.
func lockOut(ctx context.Context, out string, wait func()) (func(), error) {
	f, err := os.Open(out)
	if err != nil {
		return nil, err
	}
	return lockFile(ctx, f, wait)
}

// collect copies the steps' outputs (output/be → be) and the recipe's extra
// files into a staging directory next to the final one.
func (r *runner) collect(s plan.Step, log io.Writer) error {
	stage := r.staging()
	fsutil.RemoveStale(filepath.Dir(stage), ".staging-") // what a killed build left
	if err := os.RemoveAll(stage); err != nil {
		return err
	}
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	// The tree is what the steps wrote: read through an os.Root of it.
	root, err := os.OpenRoot(r.src)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := r.collectInto(root, s, stage, log); err != nil {
		return err
	}
	return checkStageLinks(stage)
}

// collectInto copies the build's outputs from the tree under root into
// stage.
func (r *runner) collectInto(root *os.Root, s plan.Step, stage string, log io.Writer) error {
	if dir := s.Inputs.Collect.Slice; dir != "" {
		return r.collectSlice(root, dir, stage, log)
	}
	if inst := s.Inputs.Collect.Thirdparty; inst != "" {
		// --packages: the third-party install tree is the build's output.
		if _, err := root.Lstat(filepath.FromSlash(inst)); err != nil {
			return fmt.Errorf("no package installed anything into %s", inst)
		}
		if err := copyOut(root, inst, filepath.Join(stage, "thirdparty", "installed")); err != nil {
			return err
		}
		fmt.Fprintf(log, "collected %s -> thirdparty/installed\n", inst)
		return nil
	}
	for _, name := range r.in.Recipe.StepNames() {
		for _, o := range r.in.Recipe.Steps[name].Outputs {
			dst := filepath.Join(stage, strings.TrimPrefix(filepath.ToSlash(o), "output/"))
			if _, err := root.Stat(filepath.FromSlash(o)); err != nil {
				return fmt.Errorf("step %s did not produce %s", name, o)
			}
			if err := copyOut(root, o, dst); err != nil {
				return err
			}
			fmt.Fprintf(log, "collected %s\n", o)
		}
	}
	ctx := recipe.Context{Target: r.in.TC.Cell.Target, CPU: r.in.TC.Cell.CPU, OS: r.in.TC.Cell.OS, ISA: r.in.TC.Cell.ISA, Allowed: r.in.TC.Cell.Allowed}
	for _, c := range r.in.Recipe.Collect {
		if c.When != "" {
			when, err := recipe.Expand(c.When, ctx)
			if err != nil || strings.TrimSpace(when) != "true" {
				continue
			}
		}
		matches, _ := fs.Glob(root.FS(), c.From)
		if len(matches) == 0 {
			return fmt.Errorf("collect rule %s matched nothing in the tree", c.From)
		}
		for _, m := range matches {
			dst := filepath.Join(stage, filepath.FromSlash(c.To), path.Base(m))
			if err := copyOut(root, m, dst); err != nil {
				return err
			}
			fmt.Fprintf(log, "collected %s -> %s\n", m, c.To)
		}
	}
	for _, o := range r.in.Recipe.Outputs {
		rel := strings.TrimPrefix(o, "output/")
		if _, err := os.Stat(filepath.Join(stage, filepath.FromSlash(rel))); err != nil {
			return fmt.Errorf("the build did not produce %s (recipe outputs)", o)
		}
	}
	return nil
}

// gate smoke-runs and scans the staged build, writes its record and, when
// both pass, publishes it by renaming the staging directory into place.
func (r *runner) gate(ctx context.Context, log io.Writer) error {
	gateStart := time.Now()
	stage := r.staging()
	smoke := r.in.Recipe.Smoke
	if len(r.in.Plan.Only) > 0 || r.in.Plan.Slice != nil {
		smoke = nil // third-party packages alone or a BE slice: nothing to run
	}
	for _, cmd := range smoke {
		res, err := r.smoke(ctx, stage, cmd)
		r.rec.Smoke = append(r.rec.Smoke, res)
		fmt.Fprintf(log, "smoke %v under %s: exit %d %s\n%s\n", cmd, res.Model, res.Exit, res.Signal, res.Output)
		if err != nil {
			os.RemoveAll(stage)
			return err
		}
	}
	r.loadFlags()
	r.rec.Slice = r.in.Plan.Slice
	if r.opts.NoScan {
		r.rec.ScanSkip = "--no-scan"
	} else if err := r.scanStage(ctx, stage, log); err != nil {
		return err
	}
	outs, err := DigestTree(stage)
	if err != nil {
		return err
	}
	r.rec.Outputs = outs
	r.rec.Seconds = time.Since(r.start).Seconds()
	// The record lists every step of the plan, this one too (as far as
	// it got: what is left is publishing).
	for _, s := range r.in.Plan.Steps {
		if s.Kind == plan.KindScan {
			r.addStep(StepRecord{ID: s.ID, Key: s.Key, Seconds: time.Since(gateStart).Seconds(), Needs: s.Needs}, false)
		}
	}
	if err := r.rec.write(filepath.Join(stage, RecordFile)); err != nil {
		return err
	}
	return r.publish(ctx, stage)
}

// scanStage scans the staged build for the target (with the user's, the
// waivers' and the recipe's exceptions); a scan that is not clean removes
// the stage and fails the gate.
func (r *runner) scanStage(ctx context.Context, stage string, log io.Writer) error {
	target := r.in.Plan.Cell.Target
	allow := append([]scan.Exception{}, r.opts.Allow...)
	allow = append(allow, WaiverExceptions(r.in.Plan.Cell)...)
	if r.in.Recipe.ScanAllow != "" {
		exc, err := scan.LoadAllow(r.in.Recipe.Path(r.in.Recipe.ScanAllow))
		if err != nil {
			return err
		}
		allow = append(allow, exc...)
	}
	pol := r.in.Policy
	if st := r.in.Plan.Step("scan"); st != nil && st.Inputs.Scan != nil && pol != nil {
		// A third-party-only build: the deployment checks judge what it ships.
		var err error
		if pol, err = pol.WithShips(st.Inputs.Scan.Ships); err != nil {
			return fmt.Errorf("the plan's scan step: %w", err)
		}
	}
	// Each record is the tree's own build's or a package's: lost
	// tuning in the tree's own objects fails the gate unless accepted.
	origins, unknown := r.origins()
	opts := scan.Options{Allow: allow, RequireTargetFlags: r.opts.RequireTargetFlags, Origins: origins}
	rep, err := scan.Scan(ctx, []string{stage}, pol, opts)
	if err != nil {
		return err
	}
	if len(unknown) > 0 && len(treeLost(rep)) > 0 {
		// Some third-party objects' records were not kept: the
		// install tells whether these are theirs.
		read, n, err := r.installOrigins(ctx, origins, unknown, pol)
		if err != nil {
			return err
		}
		if read {
			unknown = nil
		}
		if n > 0 {
			fmt.Fprintf(log, "the flag records of %d third-party object(s) were not kept: read them from the third-party install, scanning again\n", n)
			if rep, err = scan.Scan(ctx, []string{stage}, pol, opts); err != nil {
				return err
			}
		}
	}
	scan.Write(log, rep, "table")
	r.rec.Scan = &rep.Summary
	if !rep.Summary.Clean {
		var b strings.Builder
		scan.Write(&b, rep, "table")
		os.RemoveAll(stage)
		why := ""
		if lost := treeLost(rep); len(lost) > 0 {
			why = r.lostTuningError(rep, lost, unknown) + "\n"
		}
		return fmt.Errorf("%w: %s: %sthe scan found %d violation(s); nothing was published:\n%s", ErrGate, target, why, rep.Summary.Violations, b.String())
	}
	if fl := rep.Summary.Flags; origins != nil && origins.Accepted != "" && fl != nil && fl.LostBy[scan.OriginTree] > 0 {
		r.warn(fmt.Sprintf("%d object(s) compiled by the tree's own build are below the target's -march=%s: lost tuning accepted (%s)", fl.LostBy[scan.OriginTree], fl.Requested, origins.Accepted))
	}
	return nil
}

// publish renames the staging directory into place: the build before it,
// if any, is kept aside until the new one is there, and put back if the
// rename fails.
func (r *runner) publish(ctx context.Context, stage string) error {
	target := r.in.Plan.Cell.Target
	if err := os.MkdirAll(r.opts.Out, 0o755); err != nil {
		return err
	}
	unlock, err := lockOut(ctx, r.opts.Out, func() {
		r.warn(fmt.Sprintf("waiting for another build to finish publishing into %s", r.opts.Out))
	})
	if err != nil {
		return err
	}
	defer unlock()
	final := Dir(r.opts.Out, r.in.Plan.Cell.Doris, target)
	if r.partial {
		final += PartialSuffix
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	old := final + ".old"
	os.RemoveAll(old)
	moved := false
	if _, err := os.Stat(final); err == nil {
		if err := os.Rename(final, old); err != nil {
			return err
		}
		moved = true
	}
	if err := os.Rename(stage, final); err != nil {
		if moved {
			if rerr := os.Rename(old, final); rerr != nil {
				// err is the cause callers may test; rerr is only told (%v).
				return fmt.Errorf("%w; the previous build is at %s (putting it back failed: %v)", err, old, rerr)
			}
		}
		return err
	}
	os.RemoveAll(old)
	return nil
}

// WaiverExceptions are the scan exceptions a cell's recorded waivers imply:
// built without the target OS's sysroot (--waive-sysroot), by the user's
// decision, its glibc and libstdc++ needs are waived with the reason. The
// gate and every later scan of the build (its attestation) use them.
func WaiverExceptions(c plan.CellInfo) []scan.Exception {
	if c.SysrootWaiver == "" {
		return nil
	}
	var out []scan.Exception
	for _, kind := range []string{scan.KindGlibc, scan.KindGlibcxx} {
		out = append(out, scan.Exception{Path: "**", Kind: kind, Reason: "sysroot waived (--waive-sysroot): " + c.SysrootWaiver})
	}
	return out
}

// smoke runs one command of the staged build under the target's CPU model.
func (r *runner) smoke(ctx context.Context, dir string, argv []string) (SmokeResult, error) {
	res := SmokeResult{Command: argv}
	target := r.in.Plan.Cell.Target
	if len(argv) == 0 {
		return res, fmt.Errorf("empty smoke command in recipe %s", r.in.Recipe.Name)
	}
	full := append(append([]string{}, r.in.TC.Emulator()...), filepath.Join(dir, filepath.FromSlash(argv[0])))
	full = append(full, argv[1:]...)
	if len(r.in.TC.Emulator()) > 0 {
		res.Model = r.in.TC.Cell.Qemu.Name
	}
	var out bytes.Buffer
	// The staged build and the sysroot, read-only: a smoke run cannot
	// change what the scan gate then reads and the build publishes.
	sb := &Sandbox{ReadOnly: readOnlyMounts([]string{dir, r.sysrootPath(), r.sysrootRunPath()})}
	err := r.opts.Exec(ctx, Command{Step: "smoke", Path: full[0], Args: full[1:], Dir: dir, Stdout: &out, Stderr: &out, Sandbox: sb})
	res.Output = strings.TrimSpace(out.String())
	if len(res.Output) > 4000 {
		res.Output = res.Output[len(res.Output)-4000:]
	}
	code, failed := exitCodeOf(err)
	switch {
	case err == nil:
		return res, nil
	case failed:
		res.Exit = code
		if sig := signalOf(err); sig != 0 {
			res.Signal = sig.String()
			if sig == syscall.SIGILL {
				return res, fmt.Errorf("%w: %s: %s died with SIGILL under qemu -cpu %s: it uses an instruction the %s CPU does not have (run dorisarm scan --target %s on it to see which)",
					ErrGate, target, argv[0], res.Model, r.in.TC.Cell.CPU.Name, target)
			}
		}
		return res, fmt.Errorf("%w: %s: smoke run %v failed (exit %d %s):\n%s", ErrGate, target, argv, res.Exit, res.Signal, res.Output)
	}
	return res, fmt.Errorf("%s: smoke run %v: %w", target, argv, err)
}

// copyTree copies a file or directory tree (symlinks as symlinks), leaving
// out paths (relative to src) listed in ignore.
func copyTree(src, dst string, ignore []string) error {
	return copyTreeLinks(src, dst, ignore, nil)
}

// copyTreeLinks is copyTree with each symlink's target given by link(rel,
// target) (rel slash-separated, relative to src); nil keeps every target.
func copyTreeLinks(src, dst string, ignore []string, link func(rel, target string) (string, error)) error {
	skip := map[string]bool{}
	for _, i := range ignore {
		skip[filepath.ToSlash(filepath.Clean(i))] = true
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if skip[filepath.ToSlash(rel)] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case info.Mode()&fs.ModeSymlink != 0:
			to, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if link != nil {
				if to, err = link(filepath.ToSlash(rel), to); err != nil {
					return err
				}
			}
			os.Remove(target)
			return os.Symlink(to, target)
		case info.Mode().IsRegular():
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			return writeFile(target, in, info.Mode().Perm(), info.ModTime())
		}
		return nil
	})
}

// SliceDir is where a BE slice's output goes in a build's output directory.
const SliceDir = "be-slice"

// collectSlice collects a BE built part way: CMake's compile_commands.json
// and every object and archive under its build directory, at their paths
// relative to it, in be-slice/.
func (r *runner) collectSlice(root *os.Root, dir, stage string, log io.Writer) error {
	if st, err := root.Lstat(filepath.FromSlash(path.Join(dir, "compile_commands.json"))); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("the BE configure wrote no %s/compile_commands.json (is CMAKE_EXPORT_COMPILE_COMMANDS on?)", dir)
	}
	dst := filepath.Join(stage, SliceDir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := copyOut(root, path.Join(dir, "compile_commands.json"), filepath.Join(dst, "compile_commands.json")); err != nil {
		return err
	}
	n := 0
	err := fs.WalkDir(root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || (!strings.HasSuffix(p, ".o") && !strings.HasSuffix(p, ".a")) {
			return nil
		}
		rel := strings.TrimPrefix(p, dir+"/")
		n++
		info, err := d.Info()
		if err != nil {
			return err
		}
		return copyOutOne(root, p, filepath.Join(dst, filepath.FromSlash(rel)), info)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "collected %s/compile_commands.json and %d object(s) and archive(s) -> %s\n", dir, n, SliceDir)
	return nil
}
