package build

import (
	"context"
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
}

// Exec runs a command to its end. A program that ran and failed returns an
// *exec.ExitError (the runner reads SIGILL from it); a cancelled ctx stops
// the command and everything it started.
type Exec func(ctx context.Context, c Command) error

// RunProcess is the Exec builds use unless Options.Exec says otherwise: the
// command and all it starts form one process group, which a cancelled ctx
// stops with SIGTERM (SIGKILL 10 s later).
func RunProcess(ctx context.Context, c Command) error {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Dir, cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Dir, c.Env, c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd.Run()
}
