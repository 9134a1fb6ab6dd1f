package build

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/testproc"
)

// TestFullDiskIsTheMachine: a cell that the disk failed (here --out on a
// tmpfs filled up, so publishing cannot write) fails the run as the
// machine's failure, not the build's: the summary says which targets
// failed, and its cause is still a full disk, with its path, while a cell
// whose build failed stays a failed gate.
func TestFullDiskIsTheMachine(t *testing.T) {
	full := testproc.FullDisk(t)
	out := filepath.Join(full, "out")
	var said []Outcome
	outs, err := RunAll(context.Background(), []Input{fastInput(t, "kunpeng920", "")},
		Options{Out: out, Cache: t.TempDir(), Jobs: 2, Exec: (&fakeExec{}).exec}, func(o Outcome) { said = append(said, o) })
	if len(outs) != 1 || outs[0].State != "failed" || err == nil {
		t.Fatalf("a build publishing to a full disk: %+v, %v", outs, err)
	}
	if err.Error() != "build failed for kunpeng920" || !errors.Is(err, fault.ErrGate) {
		t.Errorf("the summary: %v", err)
	}
	if !fault.IsEnv(err) || !errors.Is(err, syscall.ENOSPC) || !strings.HasPrefix(fault.Path(err), out) {
		t.Errorf("the summary lost the full disk (env %v, path %q): %v; the cell said %q", fault.IsEnv(err), fault.Path(err), err, said[0].Error)
	}
	if !strings.Contains(said[0].Error, "no space left on device") {
		t.Errorf("the cell's error: %q", said[0].Error)
	}
	t.Logf("the cell's error: %s", said[0].Error)

	// A build that failed on its own is a failed gate, not the machine.
	fx := &fakeExec{fail: map[string]string{"thirdparty:BITSHUFFLE": "bitshuffle.c:1: error: oops"}}
	_, err = RunAll(context.Background(), []Input{fastInput(t, "kunpeng920", "")},
		Options{Out: t.TempDir(), Cache: t.TempDir(), Jobs: 2, Exec: fx.exec}, nil)
	if err == nil || !errors.Is(err, fault.ErrGate) || fault.IsEnv(err) {
		t.Errorf("a failed build step: %v (env %v)", err, fault.IsEnv(err))
	}
}
