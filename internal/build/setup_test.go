package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/sample"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// sysrootInput is fastInput with a sysroot, so the plan starts with the
// sysroot and toolchain steps: make counts the sysroot step's calls and
// makes a sysroot keyed key (an empty directory; the fake exec compiles
// nothing against it).
func sysrootInput(t *testing.T, target string, made *atomic.Int32, key string, fail error) (Input, string) {
	t.Helper()
	in := sample.Load(t, repo, "", "")
	cell, tc := in.NoCompilerToolchain(t, target, "gcc")
	tc.Sysroot = &toolchain.Sysroot{Name: "test-sysroot", Key: "sha256:" + strings.Repeat("a", 64)}
	bi := planned(t, in, cell, tc, plan.Inputs{})
	p := bi.Plan
	if p.Steps[0].Kind != plan.KindSysroot || p.Steps[1].Kind != plan.KindToolchain {
		t.Fatalf("the plan starts %s, %s: want the sysroot and toolchain steps", p.Steps[0].ID, p.Steps[1].ID)
	}
	dir := t.TempDir()
	if key == "" {
		key = tc.Sysroot.Key
	}
	probes := t.TempDir()
	bi.ProbeCache = probes
	bi.MakeSysroot = func(ctx context.Context) (*toolchain.Sysroot, error) {
		n := made.Add(1)
		if fail != nil {
			return nil, fail
		}
		return &toolchain.Sysroot{Name: "test-sysroot", Key: key, Path: dir, RunPath: dir, Digest: "sha256:" + strings.Repeat("b", 64), Cached: n > 1}, nil
	}
	return bi, probes
}

// verdict plants the toolchain step's remembered verdict for in's compiler.
func verdict(t *testing.T, in Input, probes, suffix, why string) {
	t.Helper()
	k, err := in.TC.ProbeKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(probes, k+suffix), []byte(why), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSetupSteps: the sysroot step makes the sysroot through the plan's
// maker and the toolchain step finds its remembered verdict; both are in
// the record, ahead of every step that compiles. A remembered "no" makes
// the cell a rejected outcome naming the compiler before any package runs;
// a sysroot that fails to be made, or comes out keyed other than planned,
// fails its step and nothing after it runs.
func TestSetupSteps(t *testing.T) {
	t.Parallel()
	const target = "graviton3"

	t.Run("made and checked", func(t *testing.T) {
		var made atomic.Int32
		in, probes := sysrootInput(t, target, &made, "", nil)
		verdict(t, in, probes, ".ok", "")
		out, cache := t.TempDir(), t.TempDir()
		fx := &fakeExec{}
		outs, err := RunAll(context.Background(), []Input{in}, Options{Out: out, Cache: cache, Jobs: 1, Exec: fx.exec}, nil)
		if err != nil || len(outs) != 1 || outs[0].State != "built" {
			t.Fatalf("build: %v %+v", err, outs)
		}
		if made.Load() != 1 {
			t.Errorf("the sysroot was made %d times, want once", made.Load())
		}
		rec, err := Verify(Dir(out, sample.Version, target))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range rec.Steps {
			ids = append(ids, s.ID)
		}
		if len(ids) < 3 || ids[0] != "sysroot:test-sysroot" || ids[1] != "toolchain:gcc" {
			t.Errorf("record steps start %v: want the sysroot and toolchain steps first", ids[:min(3, len(ids))])
		}
		if !rec.Steps[1].Cached {
			t.Error("the toolchain step ran with its verdict remembered")
		}
		if slices.Contains(rec.Cache.Hits, "toolchain:gcc") || slices.Contains(rec.Cache.Misses, "sysroot:test-sysroot") {
			t.Errorf("setup steps counted as step-cache hits or misses: %+v", rec.Cache)
		}
		if w, _ := filepath.Glob(filepath.Join(cache, "work", "*", "toolchain", "*", "bin")); len(w) == 0 {
			t.Error("the toolchain step laid out no compiler wrappers")
		}
	})

	t.Run("rejected", func(t *testing.T) {
		var made atomic.Int32
		in, probes := sysrootInput(t, target, &made, "", nil)
		verdict(t, in, probes, ".fail", "gcc links against a newer glibc (planted)")
		fx := &fakeExec{}
		outs, _ := RunAll(context.Background(), []Input{in}, Options{Out: t.TempDir(), Cache: t.TempDir(), Jobs: 1, Exec: fx.exec}, nil)
		if len(outs) != 1 || outs[0].State != "failed" || outs[0].Rejected != "gcc" || !strings.Contains(outs[0].Error, "(planted)") {
			t.Fatalf("outcomes %+v: want gcc rejected with its reason", outs)
		}
		for _, s := range fx.ran {
			if strings.HasPrefix(s, "thirdparty:") || strings.HasPrefix(s, "build:") {
				t.Errorf("%s ran with the compiler rejected", s)
			}
		}
	})

	// A rejected cell is planned again and built at once, in its slot,
	// while the other cells go on: the other target's package step waits
	// here until the replan has happened (it would wait for ever if the
	// replan came only after every cell had ended, as it did before).
	t.Run("rejected, replanned at once", func(t *testing.T) {
		var made atomic.Int32
		in, probes := sysrootInput(t, target, &made, "", nil)
		verdict(t, in, probes, ".fail", "gcc links against a newer glibc (planted)")
		other := fastInput(t, "kunpeng920", "")
		replanned := make(chan struct{})
		var tried []string
		fx := &fakeExec{}
		exec := func(ctx context.Context, c Command) error {
			if strings.HasPrefix(c.Step, "thirdparty:") && strings.Contains(c.Outside(c.Dir), "kunpeng920") {
				select {
				case <-replanned:
				case <-time.After(20 * time.Second):
					return errors.New("the rejected target was not planned again while this one built")
				}
			}
			return fx.exec(ctx, c)
		}
		opts := Options{Out: t.TempDir(), Cache: t.TempDir(), Jobs: 2, Exec: exec}
		opts.Replan = func(_ context.Context, o Outcome, tr []string) (*Input, error) {
			tried = tr
			close(replanned)
			next := fastInput(t, target, "")
			return &next, nil
		}
		outs, err := RunAll(context.Background(), []Input{in, other}, opts, nil)
		if err != nil || len(outs) != 2 || outs[0].State != "built" || outs[1].State != "built" {
			t.Fatalf("outcomes %+v, %v: want both built", outs, err)
		}
		if len(tried) != 1 || tried[0] != "gcc" {
			t.Errorf("Replan was told %v, want [gcc]", tried)
		}
		// The record of the build that fell back names what it fell back from, and why.
		rec, err := Verify(outs[0].Dir)
		if err != nil {
			t.Fatal(err)
		}
		if r := rec.RejectedCompilers; len(r) != 1 || r[0].Compiler != "gcc" || !strings.Contains(r[0].Why, "planted") {
			t.Errorf("the record's rejected compilers: %+v, want gcc with its reason", r)
		}
	})

	for _, tc := range []struct {
		name, key string
		fail      error
		want      string
	}{
		{"not made", "", errors.New("debootstrap: mirror unreachable"), "mirror unreachable"},
		{"keyed otherwise", "sha256:" + strings.Repeat("c", 64), nil, "plan again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var made atomic.Int32
			in, _ := sysrootInput(t, target, &made, tc.key, tc.fail)
			fx := &fakeExec{}
			out := t.TempDir()
			outs, _ := RunAll(context.Background(), []Input{in}, Options{Out: out, Cache: t.TempDir(), Jobs: 1, Exec: fx.exec}, nil)
			if len(outs) != 1 || outs[0].State != "failed" || outs[0].Rejected != "" ||
				!strings.Contains(outs[0].Error, "sysroot:test-sysroot") || !strings.Contains(outs[0].Error, tc.want) {
				t.Fatalf("outcomes %+v: want the sysroot step failed with %q", outs, tc.want)
			}
			for _, s := range fx.ran {
				if !strings.HasPrefix(s, "unpack:") && !strings.HasPrefix(s, "fetch:") && !strings.HasPrefix(s, "patch") {
					t.Errorf("%s ran after the sysroot step failed", s)
				}
			}
			if _, err := os.Stat(Dir(out, sample.Version, target)); err == nil {
				t.Error("a build whose sysroot failed was published")
			}
		})
	}
}

// TestInstallDirsInEveryPackageTree: the recipe's thirdparty.install_dirs
// are in the install tree of every package's own tree when its build
// starts (Doris's build_libdivide copies into installed/include without
// making it), and they are part of the package steps' keys.
func TestInstallDirsInEveryPackageTree(t *testing.T) {
	t.Parallel()
	const target = "graviton3"
	planWith := func(dirs []string) Input {
		in := sample.Load(t, repo, "", "")
		in.Recipe.Thirdparty.InstallDirs = dirs
		cell, tc := in.NoCompilerToolchain(t, target, "gcc")
		return planned(t, in, cell, tc, plan.Inputs{SysrootWaiver: "install dirs test"})
	}
	without, with := planWith(nil), planWith([]string{"include", "share/doc"})
	pkgs := 0
	for _, s := range with.Plan.Steps {
		if s.Kind != plan.KindThirdparty {
			continue
		}
		pkgs++
		if o := without.Plan.Step(s.ID); o == nil || o.Key == s.Key {
			t.Errorf("%s: the install dirs do not change its key", s.ID)
		}
	}
	if pkgs < 2 {
		t.Fatalf("%d package steps: nothing to check", pkgs)
	}
	fx := &fakeExec{}
	var seen atomic.Int32
	exec := func(ctx context.Context, c Command) error {
		if strings.HasPrefix(c.Step, "thirdparty:") {
			if c.Sandbox == nil || c.Outside(c.Dir) == c.Dir {
				t.Errorf("%s ran without a tree of its own", c.Step)
			} else {
				seen.Add(1)
				for _, d := range []string{"include", "share/doc"} {
					if st, err := os.Stat(filepath.Join(c.Outside(c.Dir), "thirdparty", "installed", d)); err != nil || !st.IsDir() {
						t.Errorf("%s: installed/%s is not in its tree: %v", c.Step, d, err)
					}
				}
			}
		}
		return fx.exec(ctx, c)
	}
	outs, err := RunAll(context.Background(), []Input{with}, Options{Out: t.TempDir(), Cache: t.TempDir(), Jobs: 2, Exec: exec}, nil)
	if err != nil || outs[0].State != "built" {
		t.Fatalf("build: %v %+v", err, outs)
	}
	if int(seen.Load()) != pkgs {
		t.Errorf("%d of %d package steps checked", seen.Load(), pkgs)
	}
}
