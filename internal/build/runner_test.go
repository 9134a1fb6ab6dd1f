package build

// Fast tests of the runner: real plans of the sample, the real cache,
// publishing and scan gate, with an Exec that stands in for the compiler
// and the emulator (fakeExec). They run under -short.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/sample"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// fakeExec stands in for the programs a build runs. A step's command
// writes what the sample's real step would (a library into the install
// tree, doris_be, the FE jar) as text, so the scan gate passes them; smoke
// runs succeed. The tree's own unpack script (bash, tar, md5sum, patch: no
// compiler) runs for real, and so does sh for a command told to fail.
type fakeExec struct {
	mu   sync.Mutex
	ran  []string          // steps whose command ran, in order ("smoke" for smoke runs)
	fail map[string]string // step → what its command prints before it fails
	// block is a step whose command waits until the build is cancelled;
	// started is closed when it starts.
	block   string
	started chan struct{}
	// absLink makes each package also install an absolute link to its
	// library, as bzip2's install does (bzcmp -> $PREFIX/bin/bzdiff).
	absLink bool
	// sees makes a package's library list the install tree's files it
	// saw when it started (what a configure that probes would find).
	sees bool
	// needs are files (relative to the tree) a package step reads: it
	// fails, as a compiler would, when one is not there.
	needs map[string]string
	// common makes every package also install include/common.h: with its
	// own content ("own"), or the same in all ("same").
	common string
}

func (f *fakeExec) exec(ctx context.Context, c Command) error {
	if strings.HasPrefix(c.Step, "unpack:") {
		return RunProcess(ctx, c)
	}
	f.mu.Lock()
	f.ran = append(f.ran, c.Step)
	msg, fail := f.fail[c.Step]
	f.mu.Unlock()
	if fail {
		// A program that prints msg and exits 3: a real *exec.ExitError.
		return RunProcess(ctx, Command{Path: "sh", Args: []string{"-c", `echo "$0"; exit 3`, msg}, Stdout: c.Stdout, Stderr: c.Stderr})
	}
	if c.Step == f.block {
		close(f.started)
		<-ctx.Done()
		return ctx.Err()
	}
	// A package step's command sees its own tree at c.Dir (a bind mount
	// under RunProcess): its files are at c.Outside(c.Dir) here.
	write := func(rel, content string) error {
		p := filepath.Join(c.Outside(c.Dir), filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(content), 0o755)
	}
	// What the command was given is what its output is made of: another
	// command or environment gives another output.
	made := fmt.Sprintf("%s made by %q\n", c.Step, c.Args)
	switch {
	case c.Step == "smoke":
		fmt.Fprintln(c.Stdout, "self-test ok kernel=scalar")
		return nil
	case strings.HasPrefix(c.Step, "thirdparty:"):
		pkg := strings.ToLower(strings.TrimPrefix(c.Step, "thirdparty:"))
		inst := filepath.Join(c.Outside(c.Dir), "thirdparty", "installed")
		if need, ok := f.needs[c.Step]; ok {
			if _, err := os.Stat(filepath.Join(c.Outside(c.Dir), filepath.FromSlash(need))); err != nil {
				fmt.Fprintf(c.Stderr, "src/%s.c:1:10: fatal error: %s: No such file or directory\n", pkg, path.Base(need))
				return errors.New("exit status 1")
			}
		}
		if f.sees {
			var seen []string
			filepath.WalkDir(inst, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(inst, p)
					seen = append(seen, rel)
				}
				return nil
			})
			// What it saw is its output (not the -j it was given).
			made = fmt.Sprintf("%s saw %q\n", c.Step, seen)
		}
		switch f.common {
		case "own":
			if err := write("thirdparty/installed/include/common.h", "by "+pkg+"\n"); err != nil {
				return err
			}
		case "same":
			if err := write("thirdparty/installed/include/common.h", "shared\n"); err != nil {
				return err
			}
		}
		lib := "thirdparty/installed/lib/lib" + pkg + ".a.txt"
		if err := write(lib, made); err != nil || !f.absLink {
			return err
		}
		return os.Symlink(filepath.Join(c.Dir, lib), filepath.Join(c.Outside(c.Dir), "thirdparty/installed/lib/lib"+pkg+"-abs.a.txt"))
	case c.Step == "build:be:instrument":
		return write("be/build/doris_be", made)
	case c.Step == "build:be":
		return write("output/be/lib/doris_be", made)
	case c.Step == "build:fe":
		return write("output/fe/lib/doris-fe.jar", made)
	case c.Step == "pgo:train":
		return nil
	}
	return fmt.Errorf("fakeExec: no stand-in for step %s (%s)", c.Step, c.Path)
}

func (f *fakeExec) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ran)
}

func (f *fakeExec) reset() {
	f.mu.Lock()
	f.ran = nil
	f.mu.Unlock()
}

// fastInput plans the sample for target with a toolchain that has no
// compiler behind it, patches from patchDir ("" for the sample's).
func fastInput(t *testing.T, target, patchDir string) Input {
	t.Helper()
	for _, tool := range []string{"bash", "sh", "tar", "md5sum", "patch"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: the sample's unpack script needs it", tool)
		}
	}
	in := sample.Load(t, repo, patchDir, "")
	cell, tc := in.NoCompilerToolchain(t, target, "gcc")
	return planned(t, in, cell, tc, plan.Inputs{SysrootWaiver: "fast runner test"})
}

// commandSteps are the plan's steps that run a command through Exec.
func commandSteps(p *plan.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		if len(s.Command) > 0 && s.Kind != plan.KindUnpack && s.Kind != plan.KindScan {
			out = append(out, s.ID)
		}
	}
	return out
}

func cacheable(p *plan.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		if s.Kind.Cacheable() {
			out = append(out, s.ID)
		}
	}
	return out
}

func stagingLeft(t *testing.T, out string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(out, ".staging-*"))
	return m
}

// TestRunnerCache: a cold build runs every step; the same build again is
// up to date and runs nothing; a published file edited by hand is restored
// from the cache without running a step; a corrupt cache entry is
// discarded and only its step runs; one changed patch reruns exactly the
// steps downstream of it.
func TestRunnerCache(t *testing.T) {
	t.Parallel()
	const target = "kunpeng920" // PGO (instrument, train, merge) and three patched components
	out, cache := t.TempDir(), t.TempDir()
	fx := &fakeExec{}
	opts := Options{Out: out, Cache: cache, Jobs: 1, Exec: fx.exec}
	in := fastInput(t, target, "")
	dir := Dir(out, sample.Version, target)
	be := filepath.Join(dir, "be", "lib", "doris_be")
	var orig []byte

	type stage struct {
		name   string
		before func(t *testing.T) Input // prepares the run, returns its input
		// want: steps missed (run), commands run through Exec, up to date
		misses, commands []string
		upToDate         bool
		check            func(t *testing.T, rec *Record)
	}
	bitshuffleDeps := []string{"patch:bitshuffle", "thirdparty:BITSHUFFLE", "build:be:instrument", "pgo:train", "pgo:merge", "build:be"}
	stages := []stage{
		{name: "cold", before: func(*testing.T) Input { return in },
			misses: cacheable(in.Plan), commands: append(commandSteps(in.Plan), "smoke"),
			check: func(t *testing.T, rec *Record) {
				back, err := Verify(dir)
				if err != nil {
					t.Fatalf("published build does not verify: %v", err)
				}
				if back.Scan == nil || !back.Scan.Clean || len(back.Smoke) != 1 || len(back.Steps) != len(in.Plan.Steps) {
					t.Errorf("published record: scan %+v, smoke %+v, %d steps", back.Scan, back.Smoke, len(back.Steps))
				}
				orig, _ = os.ReadFile(be)
				if !bytes.Contains(orig, []byte("build:be made by")) {
					t.Errorf("published doris_be is not build:be's: %q", orig)
				}
			}},
		{name: "nothing changed", before: func(*testing.T) Input { return in }, upToDate: true},
		{name: "published file edited", before: func(*testing.T) Input {
			os.WriteFile(be, []byte("tampered"), 0o755)
			return in
		}, commands: []string{"smoke"}, check: func(t *testing.T, rec *Record) {
			if now, _ := os.ReadFile(be); !bytes.Equal(now, orig) {
				t.Errorf("the edited doris_be was not restored: %q", now)
			}
			if len(rec.Cache.Hits) != len(cacheable(in.Plan)) {
				t.Errorf("hits %v, want every cacheable step", rec.Cache.Hits)
			}
		}},
		{name: "corrupt entry", before: func(t *testing.T) Input {
			flipCached(t, cache, "build:be")
			os.WriteFile(be, []byte("tampered"), 0o755)
			return in
		}, misses: []string{"build:be"}, commands: []string{"build:be", "smoke"}, check: func(t *testing.T, rec *Record) {
			if !strings.Contains(strings.Join(rec.Warnings, "\n"), "is corrupt") {
				t.Errorf("no warning about the corrupt entry: %q", rec.Warnings)
			}
			if now, _ := os.ReadFile(be); !bytes.Equal(now, orig) {
				t.Errorf("published doris_be after a corrupt entry: %q", now)
			}
		}},
		{name: "one patch changed", before: func(t *testing.T) Input {
			return fastInput(t, target, editedPatches(t))
		}, misses: bitshuffleDeps, commands: []string{"thirdparty:BITSHUFFLE", "build:be:instrument", "pgo:train", "build:be", "smoke"}},
	}
	for _, st := range stages {
		if !t.Run(st.name, func(t *testing.T) {
			input := st.before(t)
			fx.reset()
			rec, err := Run(context.Background(), input, opts)
			if err != nil {
				t.Fatal(err)
			}
			if rec.UpToDate != st.upToDate {
				t.Errorf("up to date %v, want %v", rec.UpToDate, st.upToDate)
			}
			if got := fx.commands(); !slices.Equal(got, st.commands) {
				t.Errorf("commands run:\n got %v\nwant %v", got, st.commands)
			}
			if !st.upToDate && !slices.Equal(rec.Cache.Misses, st.misses) {
				t.Errorf("cache misses:\n got %v\nwant %v", rec.Cache.Misses, st.misses)
			}
			if left := stagingLeft(t, out); len(left) > 0 {
				t.Errorf("staging left behind: %v", left)
			}
			if st.check != nil {
				st.check(t, rec)
			}
		}) {
			t.FailNow() // later stages build on this one
		}
	}
}

// TestRunnerStepFailure: a step that fails stops the build with an error
// naming the target, the step and its log (whose tail it shows), caches
// nothing for it, keeps what finished before it, publishes nothing and
// leaves the published build and no staging directory behind.
func TestRunnerStepFailure(t *testing.T) {
	t.Parallel()
	const target = "kunpeng920"
	in := fastInput(t, target, "")
	// The failing builds are of another plan (one patch changed): the same
	// plan as the published build would be up to date and run nothing.
	pdir := editedPatches(t)
	changed := fastInput(t, target, pdir)
	cases := []struct {
		step string
		gate bool // a failed smoke run is the gate's verdict, not a step error
	}{
		{step: "thirdparty:MINILZ"},
		{step: "pgo:train"},
		{step: "build:fe"},
		{step: "smoke", gate: true},
	}
	// A published build from before, which the failed ones must leave as it is.
	out := t.TempDir()
	if _, err := Run(context.Background(), in, Options{Out: out, Cache: t.TempDir(), Exec: (&fakeExec{}).exec}); err != nil {
		t.Fatal(err)
	}
	published := filepath.Join(Dir(out, sample.Version, target), RecordFile)
	stamp, _ := os.ReadFile(published)
	for _, c := range cases {
		// One at a time: they share the published build's --out, and one
		// case's staging directory, there while it builds, is not another's
		// leftover.
		t.Run(c.step, func(t *testing.T) {
			// Into the published build's --out, then into an empty one with
			// the same cache (the failed step runs again: it was not cached).
			cache, fresh := t.TempDir(), t.TempDir()
			msg := "error: " + c.step + " broke here"
			fx := &fakeExec{fail: map[string]string{c.step: msg}}
			for _, o := range []string{out, fresh} {
				rec, err := Run(context.Background(), changed, Options{Out: o, Cache: cache, Exec: fx.exec})
				if err == nil || rec != nil {
					t.Fatalf("out %s: a failing %s gave a record (%v) and error %v", o, c.step, rec != nil, err)
				}
				if !strings.Contains(err.Error(), target) {
					t.Errorf("error does not name the target: %v", err)
				}
				if c.gate {
					if !errors.Is(err, ErrGate) || !strings.Contains(err.Error(), msg) {
						t.Errorf("failed smoke run: %v, want ErrGate with the output", err)
					}
				} else {
					var se *StepError
					if !errors.As(err, &se) || se.Step != c.step || se.Target != target {
						t.Fatalf("error %v (%T), want a StepError of %s", err, err, c.step)
					}
					log, _ := os.ReadFile(se.Log)
					if !strings.Contains(string(log), msg) || !strings.Contains(se.Tail, msg) {
						t.Errorf("log %s / tail %q lacks the step's output", se.Log, se.Tail)
					}
					if !strings.Contains(err.Error(), "step "+c.step) || !strings.Contains(err.Error(), se.Log) {
						t.Errorf("message does not name the step and its log: %v", err)
					}
				}
				if left := stagingLeft(t, o); len(left) > 0 {
					t.Errorf("staging left behind: %v", left)
				}
			}
			if n := strings.Count(strings.Join(fx.commands(), " "), c.step); n != 2 {
				t.Errorf("the failed %s ran %d times in two builds, want 2 (%v)", c.step, n, fx.commands())
			}
			if now, _ := os.ReadFile(published); !bytes.Equal(now, stamp) {
				t.Error("a failed build changed the published one")
			}
			if ents, _ := os.ReadDir(fresh); len(ents) != 0 {
				t.Errorf("a failed build published into an empty --out: %v", ents)
			}
			// Nothing cached for the failed step nor for what needs it;
			// what it needs ran before it and is. (Steps beside it, which
			// neither need it nor are needed by it, may have run or not:
			// package steps run at once.)
			c2 := &Cache{Dir: cache}
			needs, users := closure(changed.Plan, c.step)
			for _, s := range changed.Plan.Steps {
				if !s.Kind.Cacheable() {
					continue
				}
				_, ok := c2.Get(s.Key)
				if (s.ID == c.step || users[s.ID]) && ok {
					t.Errorf("%s (the failed step, or one that needs it) was cached", s.ID)
				}
				if needs[s.ID] && !ok {
					t.Errorf("%s (which the failed step needs) was not cached", s.ID)
				}
			}
		})
	}
}

// TestRunnerKeepGoing: with KeepGoing, a failed package does not stop the
// other packages; the error lists it and nothing is published.
func TestRunnerKeepGoing(t *testing.T) {
	t.Parallel()
	in := fastInput(t, "kunpeng920", "")
	out, cache := t.TempDir(), t.TempDir()
	fx := &fakeExec{fail: map[string]string{"thirdparty:BITSHUFFLE": "bitshuffle broke"}}
	_, err := Run(context.Background(), in, Options{Out: out, Cache: cache, KeepGoing: true, Exec: fx.exec})
	var pe *PackagesError
	var se *StepError
	if !errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Failed[0].Package != "BITSHUFFLE" || !errors.As(pe.Failed[0].Err, &se) {
		t.Fatalf("keep going: %v", err)
	}
	if log, _ := os.ReadFile(se.Log); !strings.Contains(err.Error(), se.Log) || !strings.Contains(string(log), "bitshuffle broke") {
		t.Errorf("the error does not name the log with the failure: %v", err)
	}
	ran := fx.commands()
	for _, s := range []string{"thirdparty:OPENSSL", "thirdparty:SIMDPROBE", "thirdparty:MINILZ"} {
		if !slices.Contains(ran, s) {
			t.Errorf("%s was not built after BITSHUFFLE failed (ran %v)", s, ran)
		}
	}
	if slices.Contains(ran, "build:be") || slices.Contains(ran, "smoke") {
		t.Errorf("steps that need the failed package ran: %v", ran)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("published %v", ents)
	}
}

// TestRunnerCancel: cancelling a build while a step runs stops it, caches
// nothing for it, publishes nothing; the next run resumes after the steps
// finished before.
func TestRunnerCancel(t *testing.T) {
	t.Parallel()
	in := fastInput(t, "kunpeng920", "")
	out, cache := t.TempDir(), t.TempDir()
	fx := &fakeExec{block: "build:be", started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, in, Options{Out: out, Cache: cache, Exec: fx.exec})
		done <- err
	}()
	<-fx.started
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "build:be interrupted") {
		t.Fatalf("cancelled build returned %v", err)
	}
	if _, ok := (&Cache{Dir: cache}).Get(in.Plan.Step("build:be").Key); ok {
		t.Error("the interrupted step was cached")
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("an interrupted build left %v in --out", ents)
	}
	fx2 := &fakeExec{}
	rec, err := Run(context.Background(), in, Options{Out: out, Cache: cache, Exec: fx2.exec})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"build:be", "build:fe", "smoke"}; !slices.Equal(fx2.commands(), want) {
		t.Errorf("the resumed build ran %v, want %v", fx2.commands(), want)
	}
	if !slices.Equal(rec.Cache.Misses, []string{"build:be", "build:fe"}) {
		t.Errorf("resumed build misses %v", rec.Cache.Misses)
	}
}

// TestRunnerRefusesMalformedPlan: a step without the inputs its kind reads
// (a plan written by hand or by another dorisarm) is refused before any
// step runs, naming the step.
func TestRunnerRefusesMalformedPlan(t *testing.T) {
	t.Parallel()
	in := fastInput(t, "graviton3", "")
	cp := *in.Plan
	cp.Steps = slices.Clone(in.Plan.Steps)
	for i := range cp.Steps {
		if cp.Steps[i].Kind == plan.KindFetch {
			cp.Steps[i].Inputs.Fetch = nil
			break
		}
	}
	in.Plan = &cp
	fx := &fakeExec{}
	out := t.TempDir()
	_, err := Run(context.Background(), in, Options{Out: out, Cache: t.TempDir(), Exec: fx.exec})
	if err == nil || !strings.Contains(err.Error(), "step fetch:") || !strings.Contains(err.Error(), "plan again") {
		t.Fatalf("malformed plan: %v", err)
	}
	if len(fx.commands()) != 0 {
		t.Errorf("steps ran for a malformed plan: %v", fx.commands())
	}
}

// packagesInput plans the sample's given third-party packages alone (nil:
// the whole sample) for target, with a toolchain that has no compiler
// behind it and the target's scan policy.
func packagesInput(t *testing.T, target string, packages ...string) Input {
	t.Helper()
	in := sample.Load(t, repo, "", "")
	cell, tc := in.NoCompilerToolchain(t, target, "gcc")
	return planned(t, in, cell, tc, plan.Inputs{SysrootWaiver: "fast runner test", Packages: packages})
}

// editedPatches is a copy of the sample's patches with the bitshuffle
// patch's header changed (it still applies).
func editedPatches(t *testing.T) string {
	t.Helper()
	pdir := t.TempDir()
	if err := copyTree(filepath.Join(repo, "examples/minidoris/patches"), pdir, nil); err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(pdir, "bitshuffle", "0001-scalar-bitshuffle.patch")
	data, _ := os.ReadFile(pf)
	edited := bytes.Replace(data, []byte("Last-Update: 2026-11-29"), []byte("Last-Update: 2026-12-01"), 1)
	if bytes.Equal(edited, data) {
		t.Fatal("the bitshuffle patch has no Last-Update line to change")
	}
	if err := os.WriteFile(pf, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	return pdir
}

// A --keep-going third-party-only build in which one package fails
// publishes the packages that built, as <target>.partial, never under the
// target's own name; its record says what is missing, and the error says
// where the partial build is.
func TestRunnerKeepGoingPublishesPartial(t *testing.T) {
	t.Parallel()
	const target = "kunpeng920"
	input := packagesInput(t, target, "bitshuffle", "minilz")
	out := t.TempDir()
	fx := &fakeExec{fail: map[string]string{"thirdparty:BITSHUFFLE": "bitshuffle broke"}}
	_, err := Run(context.Background(), input, Options{Out: out, Cache: t.TempDir(), KeepGoing: true, Exec: fx.exec})
	var pe *PackagesError
	if !errors.As(err, &pe) || len(pe.Failed) != 1 {
		t.Fatalf("keep going: %v", err)
	}
	full := Dir(out, sample.Version, target)
	if _, err := os.Stat(full); !os.IsNotExist(err) {
		t.Errorf("a partial build was published under the full build's name %s (%v)", full, err)
	}
	if pe.Partial != full+PartialSuffix || !strings.Contains(err.Error(), "published as a partial build in "+full+PartialSuffix) {
		t.Fatalf("partial: %q (%v); error: %v", pe.Partial, pe.PartialErr, err)
	}
	b, err := os.ReadFile(filepath.Join(pe.Partial, RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Partial == nil || !slices.Equal(rec.Partial.Failed, []string{"BITSHUFFLE"}) {
		t.Fatalf("record's partial: %+v", rec.Partial)
	}
	// Why it failed, without the build machine's log path.
	if es := rec.Partial.Errors; len(es) != 1 || es[0].Package != "BITSHUFFLE" || es[0].Step != "thirdparty:BITSHUFFLE" ||
		!strings.Contains(es[0].Error+strings.Join(es[0].First, " "), "bitshuffle broke") || strings.Contains(string(b), out) {
		t.Errorf("record's failure causes: %+v", es)
	}
	if ps := rec.PackageScans["MINILZ"]; ps == nil || ps.Files == 0 {
		t.Errorf("record's scan of minilz's install: %+v", ps)
	}
	var outs []string
	for _, o := range rec.Outputs {
		outs = append(outs, o.Path)
	}
	if !slices.ContainsFunc(outs, func(p string) bool { return strings.Contains(p, "minilz") }) || slices.ContainsFunc(outs, func(p string) bool { return strings.Contains(p, "bitshuffle") }) {
		t.Errorf("partial outputs %v: want minilz's and not bitshuffle's", outs)
	}
}

// A package that installs an absolute link into the tree (bzip2's bzcmp)
// gets it made relative: its step is cached and restored like any other,
// and the published tree names no path of the machine that built it.
func TestRunnerRelativizesAbsoluteLinks(t *testing.T) {
	t.Parallel()
	const target = "kunpeng920"
	input := packagesInput(t, target, "minilz")
	cache := t.TempDir()
	for i, out := range []string{t.TempDir(), t.TempDir()} {
		fx := &fakeExec{absLink: true}
		rec, err := Run(context.Background(), input, Options{Out: out, Cache: cache, Exec: fx.exec})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		link := filepath.Join(Dir(out, sample.Version, target), "thirdparty", "installed", "lib", "libminilz-abs.a.txt")
		dest, err := os.Readlink(link)
		if err != nil || dest != "libminilz.a.txt" {
			t.Errorf("run %d: published link -> %q (%v), want the relative libminilz.a.txt", i, dest, err)
		}
		if b, err := os.ReadFile(link); err != nil || !bytes.Contains(b, []byte("made by")) {
			t.Errorf("run %d: the link does not resolve to the library: %q %v", i, b, err)
		}
		if i == 1 && (slices.Contains(fx.commands(), "thirdparty:MINILZ") || !slices.Contains(rec.Cache.Hits, "thirdparty:MINILZ")) {
			t.Errorf("the second build ran minilz again (commands %v, hits %v): its step was not cached", fx.commands(), rec.Cache.Hits)
		}
		// A restored step says how long it took when it ran.
		for _, st := range rec.Steps {
			if st.ID == "thirdparty:MINILZ" && st.Cached != (i == 1) || st.ID == "thirdparty:MINILZ" && i == 1 && st.RanSeconds <= 0 {
				t.Errorf("run %d: step record %+v", i, st)
			}
		}
	}
}

// A build record names no path of the machine that made it: two builds of
// one plan in different cache and out directories record the same flags,
// and neither record holds its cache's path.
func TestRecordHoldsNoMachinePaths(t *testing.T) {
	t.Parallel()
	const target = "graviton3"
	in := fastInput(t, target, "")
	plan0 := *in.Plan
	var recs [][]byte
	for i := 0; i < 2; i++ {
		out, cache := t.TempDir(), t.TempDir()
		// The sysroot where each machine's cache keeps it.
		tc := *in.TC
		sr := filepath.Join(cache, "sysroots", "sha256-0123")
		tc.Sysroot = &toolchain.Sysroot{Name: "test", Path: sr, RunPath: sr + "-run", Digest: "sha256:0123"}
		in.TC = &tc
		// A compiler skipped for a verdict remembered in this machine's cache.
		pl := plan0
		pl.Warnings = append(slices.Clone(pl.Warnings), "preferred compiler skipped: gcc links C++ against sysroot test but the result needs arc4random@GLIBC_2.36\n(remembered in "+
			filepath.Join(cache, "sysroots", ".probes", "0123.fail")+": plans skip gcc for this target while that file is there; remove it to check again)")
		in.Plan = &pl
		fx := &fakeExec{}
		if _, err := Run(context.Background(), in, Options{Out: out, Cache: cache, Exec: fx.exec}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(Dir(out, sample.Version, target), RecordFile))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, b)
		if bytes.Contains(b, []byte(cache)) || bytes.Contains(b, []byte(out)) {
			t.Errorf("build %d's record holds its machine's paths:\n%s", i, b)
		}
	}
	var a, b Record
	json.Unmarshal(recs[0], &a)
	json.Unmarshal(recs[1], &b)
	if fa, fb := fmt.Sprint(a.Flags), fmt.Sprint(b.Flags); fa != fb {
		t.Errorf("the records' flags differ:\n%s\n%s", fa, fb)
	}
	if wa, wb := strings.Join(a.Warnings, "\n"), strings.Join(b.Warnings, "\n"); wa != wb || !strings.Contains(wa, "remembered in $CACHE/sysroots/.probes/0123.fail") {
		t.Errorf("the records' warnings differ, or name no placeholder:\n%s\n%s", wa, wb)
	}
}

// A --keep-going build in which every package with a build of its own
// fails publishes nothing and says so, even when the plan also unpacks an
// archive only for another package (RAGEL for HYPERSCAN): an empty
// partial build is no build, and its scan would find nothing to check.
func TestRunnerKeepGoingNothingBuilt(t *testing.T) {
	t.Parallel()
	const target = "kunpeng920"
	in := sample.Load(t, repo, "", "")
	in.Recipe.Thirdparty.BuildNames = map[string][]string{"SIMDPROBE": {}} // unpacked for MINILZ, not built
	in.Recipe.Thirdparty.Deps = map[string][]string{"MINILZ": {"SIMDPROBE"}}
	cell, tc := in.NoCompilerToolchain(t, target, "gcc")
	bi := planned(t, in, cell, tc, plan.Inputs{SysrootWaiver: "fast runner test", Packages: []string{"minilz"}})
	p := bi.Plan
	if len(p.Only) != 2 {
		t.Fatalf("plan only %v: want MINILZ and the source it needs", p.Only)
	}
	out := t.TempDir()
	fx := &fakeExec{fail: map[string]string{"thirdparty:MINILZ": "minilz broke"}}
	_, err := Run(context.Background(), bi, Options{Out: out, Cache: t.TempDir(), KeepGoing: true, Exec: fx.exec})
	var pe *PackagesError
	if !errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Partial != "" || pe.PartialErr != nil || !strings.Contains(err.Error(), "nothing was published") {
		t.Fatalf("every built package failed: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(out, sample.Version))
	if len(entries) != 0 {
		t.Errorf("published %v for a build in which nothing built", entries)
	}
}

// closure is what step needs, transitively, and what needs it. A step the
// plan does not have (the smoke run) is taken as the plan's end: it needs
// every step, and nothing needs it.
func closure(p *plan.Plan, step string) (needs, users map[string]bool) {
	needs, users = map[string]bool{}, map[string]bool{}
	if p.Step(step) == nil {
		for _, s := range p.Steps {
			if s.Kind != plan.KindScan {
				needs[s.ID] = true
			}
		}
		return needs, users
	}
	var up func(string)
	up = func(id string) {
		for _, n := range p.Step(id).Needs {
			if !needs[n] {
				needs[n] = true
				up(n)
			}
		}
	}
	up(step)
	for changed := true; changed; {
		changed = false
		for _, s := range p.Steps {
			if users[s.ID] {
				continue
			}
			for _, n := range s.Needs {
				if n == step || users[n] {
					users[s.ID] = true
					changed = true
				}
			}
		}
	}
	return needs, users
}

// A cache entry records the content of the sysroot its step compiled
// against: keys name the sysroot by its spec, and an entry built against
// other content under the same spec (another machine's apt, a suite that
// moved) is not restored; the step runs again and the build says why.
func TestEntryBuiltAgainstOtherSysrootIsAMiss(t *testing.T) {
	t.Parallel()
	cache, dir := t.TempDir(), t.TempDir()
	build := func(digest string) (*fakeExec, *Record) {
		t.Helper()
		in := fastInput(t, "kunpeng920", "")
		in.TC.Sysroot = &toolchain.Sysroot{Name: "test", Key: "sha256:spec", Path: dir, RunPath: dir, Digest: digest}
		fx := &fakeExec{}
		rec, err := Run(context.Background(), in, Options{Out: t.TempDir(), Cache: cache, Exec: fx.exec})
		if err != nil {
			t.Fatal(err)
		}
		return fx, rec
	}
	build("sha256:aaaa")
	fx, rec := build("sha256:bbbb")
	if !slices.Contains(fx.ran, "thirdparty:BITSHUFFLE") || !strings.Contains(strings.Join(rec.Warnings, "\n"), "was built against sysroot sha256:aaaa") {
		t.Errorf("an entry built against another sysroot was restored: ran %v, warnings %v", fx.ran, rec.Warnings)
	}
	if slices.Contains(rec.Cache.Hits, "thirdparty:BITSHUFFLE") || !slices.Contains(rec.Cache.Hits, "unpack:BITSHUFFLE") {
		t.Errorf("hits %v: want the unpack (no sysroot) restored, the package built again", rec.Cache.Hits)
	}
	fx, _ = build("sha256:bbbb")
	if slices.Contains(fx.ran, "thirdparty:BITSHUFFLE") {
		t.Errorf("the entry rebuilt against this sysroot was not restored: ran %v", fx.ran)
	}
}
