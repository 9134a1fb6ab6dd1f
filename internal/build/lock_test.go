package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLockWorkWaitsForTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cell.lock")
	unlock, err := lockWork(context.Background(), path, func() { t.Error("the first build waited") })
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	got := make(chan error)
	go func() {
		u, err := lockWork(context.Background(), path, func() { close(waiting) })
		if err == nil {
			u()
		}
		got <- err
	}()
	<-waiting // the second build says it waits ...
	select {
	case err := <-got:
		t.Fatalf("the second build took the lock while the first held it: %v", err)
	default:
	}
	unlock() // ... and gets the lock once the first is done
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestLockWorkStopsOnCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cell.lock")
	unlock, err := lockWork(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := lockWork(ctx, path, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a held lock after cancel: %v", err)
	}
}

// TestCheckDirs: --out or --cache inside the source tree (or equal to it,
// or reached through a link into it) is refused; beside it is fine.
func TestCheckDirs(t *testing.T) {
	base := t.TempDir()
	tree := filepath.Join(base, "doris")
	os.MkdirAll(filepath.Join(tree, "be"), 0o755)
	os.Symlink(filepath.Join(tree, "be"), filepath.Join(base, "link"))
	for _, c := range []struct {
		out, cache string
		bad        string
	}{
		{filepath.Join(base, "out"), filepath.Join(base, "cache"), ""},
		{filepath.Join(base, "doris-out"), filepath.Join(base, "cache"), ""},
		{filepath.Join(tree, "out"), filepath.Join(base, "cache"), "--out"},
		{filepath.Join(base, "out"), filepath.Join(tree, ".cache", "dorisarm"), "--cache"},
		{filepath.Join(base, "out"), tree, "--cache"},
		{filepath.Join(base, "link", "new", "out"), filepath.Join(base, "cache"), "--out"},
	} {
		err := CheckDirs(tree, c.out, c.cache)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("out %s cache %s: %v", c.out, c.cache, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad+" ") || !strings.Contains(err.Error(), "outside the tree")):
			t.Errorf("out %s cache %s: %v, want %s refused", c.out, c.cache, err, c.bad)
		}
	}
}
