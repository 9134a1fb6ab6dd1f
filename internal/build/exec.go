package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// Command is one program a build runs: a step's command, the tree's own
// patch tool during an unpack, or a smoke run of the staged build.
type Command struct {
	Step   string // the plan step it runs for, or "smoke"
	Path   string // the program (a name is looked up in PATH)
	Args   []string
	Env    []string // the whole environment; nil: dorisarm's own
	Dir    string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// CPU, when set, has the program's user and system time added to it
	// (its own children's included, as far as it waited for them).
	CPU *time.Duration
	// Sandbox is what the command sees of this machine besides its system
	// directories: its tree, written at another path where a package step
	// builds in a tree of its own, and its declared inputs. nil: only its
	// working directory, writable.
	Sandbox *Sandbox
}

// Exec runs a command to its end. A program that ran and failed returns an
// *ExitError or *exec.ExitError (signalOf reads SIGILL from either); a cancelled ctx stops
// the command and everything it started.
type Exec func(ctx context.Context, c Command) error

// RunProcess is the Exec builds use unless Options.Exec says otherwise:
// the command runs in a sandbox (bubblewrap; see Sandbox): an unprivileged
// user with no capability and no_new_privs, in PID, network, IPC and mount
// namespaces of its own, so it reaches no network, nothing it starts
// outlives it, and it sees only the system directories, its declared
// inputs (read-only) and its own tree. A cancelled ctx stops it (SIGTERM,
// SIGKILL 10 s later; the namespace dies with its first process). Where
// no sandbox can be made the command does not run: the error says why.
// A command that fails names the URLs its log shows it tried to download.
func RunProcess(ctx context.Context, c Command) error {
	sb, err := sandbox()
	if err != nil {
		return fmt.Errorf("step %s: %w", c.Step, err)
	}
	if c.Sandbox == nil && c.Dir != "" {
		c.Sandbox = &Sandbox{Writable: []Mount{{From: c.Dir}}}
	}
	cmd, undo, err := sb.command(c)
	if err != nil {
		return err
	}
	defer undo()
	watch := &downloadWatch{}
	cmd.Stdout = teeWatch(c.Stdout, watch)
	cmd.Stderr = cmd.Stdout
	if !sameWriter(c.Stdout, c.Stderr) {
		cmd.Stderr = teeWatch(c.Stderr, watch)
	}
	becomeSubreaper()
	run, err := startSandbox(cmd)
	if err != nil {
		return fmt.Errorf("step %s: %w: %v", c.Step, errNoSandbox, err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		case <-done:
		}
	}()
	err = cmd.Wait()
	close(done)
	inside, gerr := run.waitGone(30 * time.Second)
	if gerr != nil {
		return fmt.Errorf("step %s: %w", c.Step, gerr)
	}
	if c.CPU != nil && cmd.ProcessState != nil {
		*c.CPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime() + inside
	}
	if ctx.Err() != nil && err != nil {
		return ctx.Err()
	}
	if err != nil {
		err = exitOf(err)
		if urls := watch.urls(c.Dir); len(urls) > 0 {
			d := &DownloadError{Step: c.Step, URLs: urls, Err: err}
			if c.Stderr != nil {
				fmt.Fprintf(c.Stderr, "dorisarm: %s\n", d.Error())
			}
			return d
		}
	}
	return err
}

// ExitError is a sandboxed program that ended with a non-zero status or
// died of a signal (bubblewrap passes a death by signal N on as status
// 128+N, as a shell does).
type ExitError struct {
	Code   int
	Signal syscall.Signal // 0 when it exited
	err    *exec.ExitError
}

func (e *ExitError) Error() string {
	if e.Signal != 0 {
		return "signal: " + e.Signal.String()
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

func (e *ExitError) Unwrap() error { return e.err }

// ExitCode is the program's exit status (128+N for a signal N).
func (e *ExitError) ExitCode() int { return e.Code }

// signalOf is the signal a failed program died of, or 0.
func signalOf(err error) syscall.Signal {
	var se *ExitError
	if errors.As(err, &se) {
		return se.Signal
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return 0
}

// exitCodeOf is a failed program's exit status, and whether err is one.
func exitCodeOf(err error) (int, bool) {
	var se *ExitError
	if errors.As(err, &se) {
		return se.Code, true
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), true
	}
	return 0, false
}

func exitOf(err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	out := &ExitError{Code: ee.ExitCode(), err: ee}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		out.Signal, out.Code = ws.Signal(), 128+int(ws.Signal())
	} else if out.Code > 128 && out.Code < 128+65 {
		out.Signal = syscall.Signal(out.Code - 128)
	}
	return out
}

// DownloadError is a step that failed, run with no network, after trying
// to download: the URLs are what its log shows it reaching for.
type DownloadError struct {
	Step string
	URLs []string
	Err  error // the command's own failure (an *exec.ExitError)
}

func (e *DownloadError) Error() string {
	s := fmt.Sprintf("step %s runs with no network and tried to download", e.Step)
	for i, u := range e.URLs {
		if i > 0 {
			s += ","
		}
		s += " " + u
	}
	return s + " (give the package what it fetches as data: an archive on the mirror, or a recipe pin that turns the download off)"
}

func (e *DownloadError) Unwrap() error { return e.Err }

// sameWriter reports whether a and b are one writer (exec.Cmd then lets
// one goroutine at a time write to it; two tees of it would not).
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false // uncomparable dynamic types
		}
	}()
	return a == b
}
