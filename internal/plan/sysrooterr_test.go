package plan

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sysroot"
	"github.com/dorisarm/dorisarm/internal/testproc"
)

// A sysroot the machine failed to make (a full disk, in apt's output or in
// a write of dorisarm's own; a mirror it cannot reach) is said as that: no
// change to the matrix and no --waive-sysroot mends it. A sysroot the
// matrix gets wrong still points at the matrix and the waiver.
func TestSysrootErrNamesTheMachine(t *testing.T) {
	f := load(t, "")
	cell, err := f.Matrix.Cell("2.1", "kunpeng920")
	if err != nil {
		t.Fatal(err)
	}
	apt := &sysroot.AptError{Op: "update", Suite: "bullseye", Mirror: "http://deb.debian.org/debian", Where: "matrix.yaml oses.debian-11.sysroot",
		DiskFull: true, Dir: "/cache/sysroots/.work", Output: "E: Write error - write (28: No space left on device)", Err: errors.New("exit status 100")}
	for _, c := range []struct {
		name      string
		err       error
		env       bool
		want, not string
	}{
		{"apt's full disk", apt, true, "the disk is full: apt could not write under /cache/sysroots/.work", "--waive-sysroot"},
		{"a write's full disk", &fs.PathError{Op: "open", Path: "/cache/sysroots/.work/etc/sources.list", Err: syscall.ENOSPC}, true, "no space left on device", "--waive-sysroot"},
		{"the mirror", &sysroot.AptError{Op: "update", Unreachable: true, Err: errors.New("exit status 100")}, true, "the mirror cannot be reached", "--waive-sysroot"},
		{"the matrix", &sysroot.AptError{Op: "download", Packages: []string{"nope:arm64"}, Err: errors.New("exit status 100")}, false, "--waive-sysroot REASON", "the disk is full"},
	} {
		err := sysrootErr(f.Matrix, cell, "debian-11", "cannot make sysroot", c.err)
		if fault.IsEnv(err) != c.env || fault.IsInput(err) == c.env {
			t.Errorf("%s: env %v, input %v: %v", c.name, fault.IsEnv(err), fault.IsInput(err), err)
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
			t.Errorf("%s: %v\nwant %q, not %q", c.name, err, c.want, c.not)
		}
	}

	// The sysroot cache on a real full disk (a tmpfs filled): the error is
	// the disk, with its path, not the sysroot.
	full := testproc.FullDisk(t)
	_, err = Sysroot(context.Background(), f.Matrix, cell, filepath.Join(full, "cache"), "", registry.Options{})
	if !errors.Is(err, syscall.ENOSPC) || !fault.IsEnv(err) || !strings.Contains(err.Error(), full) || strings.Contains(err.Error(), "--waive-sysroot") {
		t.Errorf("a sysroot cache on a full disk: %v", err)
	}
	t.Logf("a sysroot cache on a full disk: %v", err)
}
