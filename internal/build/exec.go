package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	// Bind, when set, is a directory the program sees at another path: a
	// package step's own tree, seen where the cell's tree is, so that the
	// paths it records (prefixes in .pc, .la and CMake files) are the
	// cell's.
	Bind *Bind
}

// Bind shows the directory From at the path To (a bind mount in a mount
// namespace of the command's own), and an empty directory at Hide, when
// set (the other packages' trees, beside From).
type Bind struct{ From, To, Hide string }

// Outside is where path p, as the command sees it, is on this machine.
func (c Command) Outside(p string) string {
	if c.Bind == nil {
		return p
	}
	if p == c.Bind.To {
		return c.Bind.From
	}
	if rest, ok := strings.CutPrefix(p, c.Bind.To+string(filepath.Separator)); ok {
		return filepath.Join(c.Bind.From, rest)
	}
	return p
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
	if c.Bind != nil {
		ns, err := MountIsolation()
		if err != nil {
			return fmt.Errorf("step %s: %w", c.Step, err)
		}
		return runProcess(ctx, ns.wrap(c), ns.attr)
	}
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
	if c.Bind != nil {
		return fmt.Errorf("step %s: a package tree is shown at the cell's path only with build isolation (RunProcess)", c.Step)
	}
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

// mountNS is how a command is shown a tree at another path: a mount
// namespace (with the network namespace Isolation gives), in which a
// small shell makes every mount private, binds the tree and then runs the
// command.
type mountNS struct {
	attr        *syscall.SysProcAttr
	sh, mount   string
	description string
}

var (
	mountOnce sync.Once
	mountIso  *mountNS
	mountErr  error
)

// mountScript makes the namespace's mounts private (nothing reaches the
// build machine's), binds $1 at $2, enters $3 and runs the rest.
const mountScript = `"$0" --make-rprivate / && "$0" --bind -- "$1" "$2" || { echo "dorisarm: cannot show $1 at $2 in the step's mount namespace" >&2; exit 126; }
if [ -n "$4" ]; then "$0" -t tmpfs -o size=64k,mode=0555 dorisarm-hidden "$4" || { echo "dorisarm: cannot hide $4 in the step's mount namespace" >&2; exit 126; }; fi
cd -- "$3" || exit 126
shift 4
exec "$@"`

func (ns *mountNS) wrap(c Command) Command {
	w := c
	w.Path = ns.sh
	w.Args = append([]string{"-c", mountScript, ns.mount, c.Bind.From, c.Bind.To, c.Dir, c.Bind.Hide, c.Path}, c.Args...)
	return w
}

// MountIsolation is Isolation with a mount namespace of the command's own,
// for package steps that build in a tree of their own: as root directly;
// otherwise in a user namespace that maps the user to root in it (a bind
// mount needs CAP_SYS_ADMIN there, which a non-root user loses at exec).
// An error says why where neither works.
func MountIsolation() (*mountNS, error) {
	mountOnce.Do(func() { mountIso, mountErr = probeMount() })
	return mountIso, mountErr
}

func probeMount() (*mountNS, error) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		return nil, fmt.Errorf("%w: no sh to set up a package step's mount namespace", errNoIsolation)
	}
	mount, err := exec.LookPath("mount")
	if err != nil {
		return nil, fmt.Errorf("%w: no mount program (util-linux) to show a package step its own tree", errNoIsolation)
	}
	probe, err := os.MkdirTemp("", "dorisarm-mount-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(probe)
	from, to := filepath.Join(probe, "from"), filepath.Join(probe, "to")
	os.Mkdir(from, 0o755)
	os.Mkdir(to, 0o755)
	if err := os.WriteFile(filepath.Join(from, "seen"), nil, 0o644); err != nil {
		return nil, err
	}
	var tries []string
	uid, gid := os.Getuid(), os.Getgid()
	var cands []*syscall.SysProcAttr
	if os.Geteuid() == 0 {
		cands = append(cands, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS})
	}
	cands = append(cands, &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
	})
	for _, attr := range cands {
		ns := &mountNS{attr: attr, sh: sh, mount: mount, description: describeIsolation(attr) + " with a mount namespace"}
		var out strings.Builder
		c := ns.wrap(Command{Path: "test", Args: []string{"-e", "seen"}, Dir: to, Bind: &Bind{From: from, To: to}})
		cmd := exec.Command(c.Path, c.Args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = c.Dir, &out, &out, attr
		if err := cmd.Run(); err != nil {
			tries = append(tries, fmt.Sprintf("%s: %v %s", ns.description, err, strings.TrimSpace(out.String())))
			continue
		}
		if _, err := os.Stat(filepath.Join(to, "seen")); err == nil {
			return nil, fmt.Errorf("%w: the probe's bind mount reached the build machine's mounts", errNoIsolation)
		}
		return ns, nil
	}
	return nil, fmt.Errorf("%w: a package step builds in a tree of its own, shown at the cell's path in a mount namespace, and none can be made here (%s); run dorisarm as root or with CAP_SYS_ADMIN (a Dagger exec: InsecureRootCapabilities), or allow unprivileged user namespaces",
		errNoIsolation, joinTries(tries))
}
