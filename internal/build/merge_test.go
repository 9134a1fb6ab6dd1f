package build

// What one package's result may do to the cell's tree when it is merged
// (several of these were found by an adversarial review of the merge).

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dorisarm/dorisarm/internal/sample"
)

// twoPackages builds MINILZ and BITSHUFFLE (unrelated) one at a time,
// BITSHUFFLE first (vars.sh's order; checked), with each package's extra
// files written by its stand-in before the usual library.
func twoPackages(t *testing.T, keepGoing bool, extra map[string]func(dir string) error) (cache string, err error) {
	t.Helper()
	in := depsInput(t, "kunpeng920", nil, "minilz", "bitshuffle")
	fx := &fakeExec{}
	var mu sync.Mutex
	var order []string
	exec := func(ctx context.Context, c Command) error {
		if strings.HasPrefix(c.Step, "thirdparty:") {
			mu.Lock()
			order = append(order, c.Step)
			mu.Unlock()
			if f := extra[c.Step]; f != nil {
				if err := f(c.Outside(c.Dir)); err != nil {
					return err
				}
			}
		}
		return fx.exec(ctx, c)
	}
	cache = t.TempDir()
	_, err = Run(context.Background(), in, Options{Out: t.TempDir(), Cache: cache, Jobs: 1, PackagesAtOnce: 1, KeepGoing: keepGoing, Exec: exec})
	if len(order) == 0 || order[0] != "thirdparty:BITSHUFFLE" {
		t.Fatalf("BITSHUFFLE did not build first (%v)", order)
	}
	return cache, err
}

func writes(rel, content string) func(string) error {
	return func(dir string) error {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(content), 0o644)
	}
}

func links(rel, target string) func(string) error {
	return func(dir string) error {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.Symlink(target, p)
	}
}

func wantConflict(t *testing.T, err error, path string) {
	t.Helper()
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Path != path || ce.Packages != [2]string{"BITSHUFFLE", "MINILZ"} {
		t.Errorf("got %v, want a conflict of BITSHUFFLE and MINILZ at %s", err, path)
	}
}

// TestMergeRefusesLinkedParent: BITSHUFFLE installs lib as a link (into
// the tree); MINILZ, which does not need it, installs lib/libminilz.a.txt
// into a real lib directory of its own tree. Moved into the cell's tree it
// would go through BITSHUFFLE's link: a conflict.
func TestMergeRefusesLinkedParent(t *testing.T) {
	t.Parallel()
	_, err := twoPackages(t, false, map[string]func(string) error{
		"thirdparty:BITSHUFFLE": func(dir string) error {
			if err := os.MkdirAll(filepath.Join(dir, "thirdparty/installed/include"), 0o755); err != nil {
				return err
			}
			return links("thirdparty/installed/lib", "include")(dir)
		},
	})
	wantConflict(t, err, "thirdparty/installed/lib")
}

// TestMergeRefusesLinksOut: a package that installs a link leaving the
// tree (here to a directory of the build machine) fails, naming it, and
// nothing reaches the directory the link names.
func TestMergeRefusesLinksOut(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	_, err := twoPackages(t, false, map[string]func(string) error{
		"thirdparty:BITSHUFFLE": links("thirdparty/installed/share", outside),
	})
	if err == nil || !strings.Contains(err.Error(), "package BITSHUFFLE installed the link thirdparty/installed/share -> "+outside) {
		t.Errorf("got %v, want BITSHUFFLE's link out of the tree refused", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) > 0 {
		t.Errorf("%s was written outside the work directory", ents[0].Name())
	}
}

// TestMergeKeepsOthersDirectories: BITSHUFFLE installs lib/x/y, MINILZ
// lib/x as a file: replacing the directory would delete BITSHUFFLE's file.
func TestMergeKeepsOthersDirectories(t *testing.T) {
	t.Parallel()
	_, err := twoPackages(t, false, map[string]func(string) error{
		"thirdparty:BITSHUFFLE": writes("thirdparty/installed/lib/x/y", "bitshuffle's\n"),
		"thirdparty:MINILZ":     writes("thirdparty/installed/lib/x", "minilz's\n"),
	})
	wantConflict(t, err, "thirdparty/installed/lib/x/y")
}

// TestFailedMergeMovesNothing: the reverse (BITSHUFFLE's file lib/x,
// MINILZ's lib/x/y and include/a.h): a conflict found after a path that
// would have moved fine leaves nothing of MINILZ in the cell's tree, which
// a --keep-going build publishes as a partial build.
func TestFailedMergeMovesNothing(t *testing.T) {
	t.Parallel()
	cache, err := twoPackages(t, true, map[string]func(string) error{
		"thirdparty:BITSHUFFLE": writes("thirdparty/installed/lib/x", "bitshuffle's\n"),
		"thirdparty:MINILZ": func(dir string) error {
			if err := writes("thirdparty/installed/include/a.h", "minilz's\n")(dir); err != nil {
				return err
			}
			return writes("thirdparty/installed/lib/x/y", "minilz's\n")(dir)
		},
	})
	var pe *PackagesError
	if !errors.As(err, &pe) || len(pe.Failed) != 1 {
		t.Fatalf("got %v, want MINILZ to fail alone", err)
	}
	wantConflict(t, pe.Failed[0].Err, "thirdparty/installed/lib/x")
	left := filepath.Join(cache, "work", "kunpeng920-"+sample.Version, "src/thirdparty/installed/include/a.h")
	if _, err := os.Stat(left); err == nil {
		t.Errorf("the failed MINILZ left %s in the cell's tree", left)
	}
}

// TestPackageWritesOnlySourcesAndInstalls: a package that leaves a file in
// the third-party scripts' directory (which every later package's tree is
// copied from, and which no key covers) fails, naming it; with
// --keep-going the next package builds without seeing it.
func TestPackageWritesOnlySourcesAndInstalls(t *testing.T) {
	t.Parallel()
	var saw bool
	_, err := twoPackages(t, true, map[string]func(string) error{
		"thirdparty:BITSHUFFLE": writes("thirdparty/bitshuffle-build.stamp", "x"),
		"thirdparty:MINILZ": func(dir string) error {
			_, err := os.Stat(filepath.Join(dir, "thirdparty", "bitshuffle-build.stamp"))
			saw = err == nil
			return nil
		},
	})
	var pe *PackagesError
	if !errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Failed[0].Package != "BITSHUFFLE" ||
		!strings.Contains(pe.Failed[0].Err.Error(), "changed files outside thirdparty/src and thirdparty/installed") ||
		!strings.Contains(pe.Failed[0].Err.Error(), "thirdparty/bitshuffle-build.stamp") {
		t.Fatalf("got %v, want BITSHUFFLE to fail naming thirdparty/bitshuffle-build.stamp", err)
	}
	if saw {
		t.Error("MINILZ's tree holds the file BITSHUFFLE left in the scripts' directory")
	}
}
