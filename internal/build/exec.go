package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
}

// Exec runs a command to its end. A program that ran and failed returns an
// *exec.ExitError (the runner reads SIGILL from it); a cancelled ctx stops
// the command and everything it started.
type Exec func(ctx context.Context, c Command) error

// RunProcess is the Exec builds use unless Options.Exec says otherwise: the
// command runs with no network, in a network namespace of its own (see
// Isolation), and it and all it starts form one process group, which a
// cancelled ctx stops with SIGTERM (SIGKILL 10 s later). Where no network
// namespace can be had the command does not run: the error says why.
// A command that fails names the URLs its log shows it tried to download.
func RunProcess(ctx context.Context, c Command) error {
	iso, err := Isolation()
	if err != nil {
		return fmt.Errorf("step %s: %w", c.Step, err)
	}
	return runProcess(ctx, c, iso)
}

// RunProcessWithNetwork is RunProcess with the build machine's network: for
// a build that must download during its steps (a user's explicit choice,
// to be recorded as such).
func RunProcessWithNetwork(ctx context.Context, c Command) error {
	return runProcess(ctx, c, nil)
}

func runProcess(ctx context.Context, c Command, iso *syscall.SysProcAttr) error {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Dir, cmd.Env, cmd.Stdin = c.Dir, c.Env, c.Stdin
	attr := &syscall.SysProcAttr{Setpgid: true}
	var watch *downloadWatch
	if iso != nil {
		attr.Cloneflags = iso.Cloneflags
		attr.UidMappings, attr.GidMappings = iso.UidMappings, iso.GidMappings
		attr.GidMappingsEnableSetgroups = iso.GidMappingsEnableSetgroups
		watch = &downloadWatch{}
		cmd.Stdout = teeWatch(c.Stdout, watch)
		cmd.Stderr = cmd.Stdout
		if !sameWriter(c.Stdout, c.Stderr) {
			cmd.Stderr = teeWatch(c.Stderr, watch)
		}
	} else {
		cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	}
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if c.CPU != nil && cmd.ProcessState != nil {
		*c.CPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil && iso != nil && cmd.Process == nil {
		// Start failed: the namespace could not be made here.
		return fmt.Errorf("step %s: %w: %v", c.Step, errNoIsolation, err)
	}
	if err != nil && watch != nil {
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

var errNoIsolation = errors.New("cannot run a build step without network")

// Isolation is how this process runs build steps with no network: a new
// network namespace (only a loopback interface, down), made directly as
// root (CLONE_NEWNET needs CAP_SYS_ADMIN) and inside a new user namespace
// that maps the user to itself otherwise. An error, naming the reason,
// where neither works (a kernel without unprivileged user namespaces, a
// container without CAP_SYS_ADMIN): builds do not fall back to the network.
func Isolation() (*syscall.SysProcAttr, error) {
	isolationOnce.Do(func() { isolation, isolationErr = probeIsolation() })
	return isolation, isolationErr
}

func probeIsolation() (*syscall.SysProcAttr, error) {
	var tries []string
	for _, attr := range isolationCandidates() {
		cmd := exec.Command("/bin/sh", "-c", "exit 0")
		cmd.SysProcAttr = attr
		if err := cmd.Run(); err != nil {
			tries = append(tries, fmt.Sprintf("%s: %v", describeIsolation(attr), err))
			continue
		}
		return attr, nil
	}
	return nil, fmt.Errorf("%w: no network namespace can be made here (%s); run dorisarm as root or with CAP_SYS_ADMIN (a Dagger exec: InsecureRootCapabilities), or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)",
		errNoIsolation, joinTries(tries))
}

func isolationCandidates() []*syscall.SysProcAttr {
	var out []*syscall.SysProcAttr
	if os.Geteuid() == 0 {
		out = append(out, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET})
	}
	uid, gid := os.Getuid(), os.Getgid()
	out = append(out, &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
	})
	return out
}

func describeIsolation(a *syscall.SysProcAttr) string {
	if a.Cloneflags&syscall.CLONE_NEWUSER != 0 {
		return "a user and network namespace"
	}
	return "a network namespace"
}

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

func joinTries(t []string) string {
	s := ""
	for i, x := range t {
		if i > 0 {
			s += "; "
		}
		s += x
	}
	return s
}
