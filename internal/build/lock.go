package build

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	waited := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %v", path, err)
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
