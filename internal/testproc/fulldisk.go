package testproc

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// FullDisk mounts a small tmpfs for the test, fills it and returns its
// directory: a real disk with no space left, whose writes fail with
// ENOSPC as a full disk's do (directories can still be made: a tmpfs's
// directories take no blocks). It is unmounted when the test ends. Where
// no tmpfs can be mounted (not root; a container without CAP_SYS_ADMIN)
// the test is skipped, saying so.
func FullDisk(t testing.TB) string {
	t.Helper()
	dir := t.TempDir() // removed after the unmount below (cleanups run last first)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=64k,mode=0777"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v): the full-disk cases need root with CAP_SYS_ADMIN; fault's tests cover the classification of a wrapped syscall.ENOSPC", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting the full disk %s: %v", dir, err)
		}
	})
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return dir
		}
	}
}
