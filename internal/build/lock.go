package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockWork takes an exclusive lock on path, creating it: builds of the same
// cell with the same cache share a work directory, so the second one waits
// (saying so once through wait) until the first is done or ctx ends. The
// kernel drops the lock if the process dies; unlock releases it.
func lockWork(ctx context.Context, path string, wait func()) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	return lockFile(ctx, f, wait)
}

// lockFile takes an exclusive lock on the open file (or directory) f,
// closing f when unlocked or on failure.
func lockFile(ctx context.Context, f *os.File, wait func()) (unlock func(), err error) {
	path := f.Name()
	waited := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !waited && wait != nil {
			wait()
			waited = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// CheckDirs refuses an --out or --cache inside the source tree (or equal
// to it): the build copies the tree, so a cache inside it would copy
// itself without end, and earlier outputs would become part of the source.
func CheckDirs(tree, out, cache string) error {
	t, err := resolve(tree)
	if err != nil {
		return err
	}
	for _, d := range []struct{ flag, path string }{{"--out", out}, {"--cache", cache}} {
		p, err := resolve(d.path)
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(t, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s %s is inside the source tree %s, which every build copies; put it outside the tree", d.flag, d.path, tree)
		}
	}
	return nil
}

// resolve makes p absolute with the links of its existing part resolved
// (the rest may not exist yet).
func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest), nil
		}
		if dir == filepath.Dir(dir) {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}
