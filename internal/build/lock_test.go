package build

import (
	"context"
	"errors"
	"path/filepath"
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
