package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/sample"
)

// depsInput plans the sample's packages for target with the recipe's
// deps replaced.
func depsInput(t *testing.T, target string, deps map[string][]string, packages ...string) Input {
	t.Helper()
	in := sample.Load(t, repo, "", "")
	in.Recipe.Thirdparty.Deps = deps
	cell, tc := in.NoCompilerToolchain(t, target, "gcc")
	return planned(t, in, cell, tc, plan.Inputs{SysrootWaiver: "fast runner test", Packages: packages})
}

// installed reads the published build's install tree: path → content.
func installed(t *testing.T, out, target string) map[string]string {
	t.Helper()
	m := map[string]string{}
	dir := Dir(out, sample.Version, target)
	root := filepath.Join(dir, "thirdparty", "installed")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		m[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPackagesSeeOnlyTheirDeps: each package builds in a tree that holds
// the installs of exactly the packages it declares (transitively), so what
// it makes does not depend on which packages the build also has, in which
// order they run, or how many run at once. The stand-in package step
// records the install files it saw, as a configure that probes for
// headers would: in a shared tree BITSHUFFLE would see OPENSSL's library
// when OPENSSL happened to build first.
func TestPackagesSeeOnlyTheirDeps(t *testing.T) {
	t.Parallel()
	const target = "kunpeng920"
	deps := map[string][]string{"BITSHUFFLE": {"MINILZ"}}
	runs := []struct {
		name     string
		packages []string
		atOnce   int
	}{
		{"all, one at a time", []string{"openssl", "simdprobe", "minilz", "bitshuffle"}, 1},
		{"all, two at a time", []string{"bitshuffle", "minilz", "simdprobe", "openssl"}, 2},
		{"bitshuffle alone (pulls minilz)", []string{"bitshuffle"}, 2},
	}
	var want map[string]string
	for _, run := range runs {
		in := depsInput(t, target, deps, run.packages...)
		out := t.TempDir()
		fx := &fakeExec{sees: true}
		var mu sync.Mutex
		active, most := 0, 0
		// Two packages at a time: the first two package steps wait for
		// each other (so they must overlap); one at a time: none waits.
		rv := &rendezvous{n: run.atOnce, arrived: map[string]bool{}, all: make(chan struct{})}
		exec := func(ctx context.Context, c Command) error {
			if !strings.HasPrefix(c.Step, "thirdparty:") {
				return fx.exec(ctx, c)
			}
			mu.Lock()
			active++
			most = max(most, active)
			mu.Unlock()
			defer func() { mu.Lock(); active--; mu.Unlock() }()
			if run.atOnce > 1 && len(run.packages) > 1 {
				rv.wait(c.Step)
			}
			return fx.exec(ctx, c)
		}
		if _, err := Run(context.Background(), in, Options{Out: out, Cache: t.TempDir(), Jobs: 2, PackagesAtOnce: run.atOnce, Exec: exec}); err != nil {
			t.Fatalf("%s: %v", run.name, err)
		}
		if len(run.packages) > 1 && most != run.atOnce {
			t.Errorf("%s: at most %d package steps ran at once, want %d", run.name, most, run.atOnce)
		}
		got := installed(t, out, target)
		lib := got["lib/libbitshuffle.a.txt"]
		if !strings.Contains(lib, `saw ["lib/libminilz.a.txt"]`) {
			t.Errorf("%s: bitshuffle saw other than exactly minilz's install: %q", run.name, lib)
		}
		if want == nil {
			want = got
			continue
		}
		for _, f := range []string{"lib/libbitshuffle.a.txt", "lib/libminilz.a.txt"} {
			if got[f] != want[f] {
				t.Errorf("%s: %s differs from the first build's:\n got %q\nwant %q", run.name, f, got[f], want[f])
			}
		}
	}
}

// TestUndeclaredDependencyFails: a package that reads another package's
// file without declaring it fails (its tree does not have it), even when
// that package is in the same build and built before it (one package at
// a time, in vars.sh's order: BITSHUFFLE, then MINILZ); the error says
// which package installs the file its log names. Declared, it builds.
func TestUndeclaredDependencyFails(t *testing.T) {
	t.Parallel()
	const target = "kunpeng920"
	fx := &fakeExec{needs: map[string]string{"thirdparty:MINILZ": "thirdparty/installed/lib/libbitshuffle.a.txt"}}
	in := depsInput(t, target, nil, "minilz", "bitshuffle")
	_, err := Run(context.Background(), in, Options{Out: t.TempDir(), Cache: t.TempDir(), Jobs: 1, Exec: fx.exec})
	var se *StepError
	if !errors.As(err, &se) || se.Step != "thirdparty:MINILZ" {
		t.Fatalf("an undeclared dependency: %v, want thirdparty:MINILZ to fail", err)
	}
	if !slices.Equal(se.Missing, []string{"libbitshuffle.a.txt: BITSHUFFLE installs it"}) || !strings.Contains(err.Error(), "add them to the recipe's thirdparty.deps") {
		t.Errorf("the error does not name the package that has the file (%q):\n%v", se.Missing, err)
	}
	in = depsInput(t, target, map[string][]string{"MINILZ": {"BITSHUFFLE"}}, "minilz")
	if _, err := Run(context.Background(), in, Options{Out: t.TempDir(), Cache: t.TempDir(), Jobs: 1, Exec: fx.exec}); err != nil {
		t.Errorf("declared: %v", err)
	}
}

// TestInstallConflict: two packages that install one path with different
// bytes fail the build with an error naming both and the path; with the
// same bytes they build.
func TestInstallConflict(t *testing.T) {
	t.Parallel()
	const target = "kunpeng920"
	in := depsInput(t, target, nil, "minilz", "bitshuffle")
	_, err := Run(context.Background(), in, Options{Out: t.TempDir(), Cache: t.TempDir(), Jobs: 2, Exec: (&fakeExec{common: "own"}).exec})
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("two packages installing one path with different bytes: %v", err)
	}
	pair := []string{ce.Packages[0], ce.Packages[1]}
	slices.Sort(pair)
	if !slices.Equal(pair, []string{"BITSHUFFLE", "MINILZ"}) || ce.Path != "thirdparty/installed/include/common.h" {
		t.Errorf("conflict names %v and %s", ce.Packages, ce.Path)
	}
	if !strings.Contains(err.Error(), "BITSHUFFLE") || !strings.Contains(err.Error(), "MINILZ") {
		t.Errorf("error: %v", err)
	}
	if _, err := Run(context.Background(), in, Options{Out: t.TempDir(), Cache: t.TempDir(), Jobs: 2, Exec: (&fakeExec{common: "same"}).exec}); err != nil {
		t.Errorf("the same bytes from two packages: %v", err)
	}
}
