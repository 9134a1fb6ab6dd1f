package build

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sandbox is what a step's programs see besides the build machine's
// system (/usr, /etc and the links into /usr beside them): the step's
// own tree and the few files it may write, read-only, the inputs it
// declared (compiler homes, the sysroot, the recipe's host_env
// directories) and a private /tmp. Nothing else of the machine is there:
// not the cache, not --out, not the keys, not the other cells' or
// packages' trees, not $HOME.
type Sandbox struct {
	Writable []Mount
	ReadOnly []Mount
}

// Mount shows the path From of this machine at To in the step's mount
// namespace (at From itself when To is empty).
type Mount struct {
	From, To string
	// Shared marks a file steps running at once all write (the phase's
	// compiler log): as root it is given to the sandbox's user for good,
	// since one step's end taking it back would leave the others unable
	// to write it.
	Shared bool
}

func (m Mount) dest() string {
	if m.To == "" {
		return m.From
	}
	return m.To
}

// Outside is where path p, as the command sees it, is on this machine.
func (c Command) Outside(p string) string {
	if c.Sandbox == nil {
		return p
	}
	for _, m := range slices.Concat(c.Sandbox.Writable, c.Sandbox.ReadOnly) {
		to := m.dest()
		if p == to {
			return m.From
		}
		if rest, ok := strings.CutPrefix(p, to+string(filepath.Separator)); ok {
			return filepath.Join(m.From, rest)
		}
	}
	return p
}

// SandboxUID is the user id a step runs as when dorisarm runs as root:
// an id no account of a Debian system has, so the step owns nothing of
// the machine but the tree it is given (chowned to it for the step, and
// back after). DORISARM_SANDBOX_UID overrides it.
const SandboxUID = 61727

// sandboxer is the probed bubblewrap and how steps run in it.
type sandboxer struct {
	bwrap, setpriv string
	// root: dorisarm runs as root, so bubblewrap sets the namespaces up
	// with its privileges and setpriv then drops to uid (no capability,
	// no_new_privs, no group); otherwise bubblewrap makes a user
	// namespace that maps the user to itself, with no capability in it.
	root     bool
	uid, gid int
	// system are bubblewrap's arguments for the build machine's system.
	system []string
	// systemDirs are the directories system shows (read-only).
	systemDirs []string
}

var (
	sandboxOnce sync.Once
	theSandbox  *sandboxer
	sandboxErr  error
)

// errNoSandbox is a step that cannot run because no sandbox can be made.
var errNoSandbox = errors.New("cannot run a build step in a sandbox")

// sandbox is the probed sandbox, or why none can be made here.
func sandbox() (*sandboxer, error) {
	sandboxOnce.Do(func() { theSandbox, sandboxErr = probeSandbox() })
	return theSandbox, sandboxErr
}

func probeSandbox() (*sandboxer, error) {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("%w: bubblewrap (bwrap) is not installed; install it (Debian: apt-get install bubblewrap, or scripts/install-deps.sh)", errNoSandbox)
	}
	sb := &sandboxer{bwrap: bw, uid: os.Getuid(), gid: os.Getgid()}
	if os.Geteuid() == 0 {
		sb.root = true
		if sb.setpriv, err = exec.LookPath("setpriv"); err != nil {
			return nil, fmt.Errorf("%w: dorisarm runs as root and steps run as an unprivileged user, which needs setpriv (util-linux)", errNoSandbox)
		}
		sb.uid, sb.gid = SandboxUID, SandboxUID
		if v := os.Getenv("DORISARM_SANDBOX_UID"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n >= 1<<31 {
				return nil, fmt.Errorf("%w: DORISARM_SANDBOX_UID=%q is not a user id above 0", errNoSandbox, v)
			}
			sb.uid, sb.gid = n, n
		}
	}
	sb.system, sb.systemDirs = systemMounts()
	if sb.root {
		ids, err := accountFiles(sb.uid, sb.gid)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNoSandbox, err)
		}
		sb.system = append(sb.system, ids...)
	}
	probe, err := os.MkdirTemp("", "dorisarm-sandbox-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(probe)
	var out strings.Builder
	c := Command{Step: "probe", Path: "sh", Args: []string{"-c", "echo ok > probed"}, Dir: probe, Stdout: &out, Stderr: &out,
		Sandbox: &Sandbox{Writable: []Mount{{From: probe}}}}
	cmd, undo, err := sb.command(c)
	if err == nil {
		var run *sandboxRun
		if run, err = startSandbox(cmd); err == nil {
			err = cmd.Wait()
			if _, gerr := run.waitGone(10 * time.Second); err == nil {
				err = gerr
			}
		}
		undo()
	}
	if b, rerr := os.ReadFile(filepath.Join(probe, "probed")); err == nil && (rerr != nil || string(b) != "ok\n") {
		err = fmt.Errorf("the probe's write did not reach its tree")
	}
	if err != nil {
		how := "allow unprivileged user namespaces (user.max_user_namespaces > 0; kernel.unprivileged_userns_clone=1 where the kernel has it; AppArmor's kernel.apparmor_restrict_unprivileged_userns=0)"
		if sb.root {
			how = "a container needs CAP_SYS_ADMIN for it (a Dagger exec: InsecureRootCapabilities; docker run --privileged or --cap-add SYS_ADMIN --security-opt seccomp=unconfined)"
		}
		return nil, fmt.Errorf("%w: bubblewrap cannot make one here (%v: %s); %s", errNoSandbox, err, strings.TrimSpace(out.String()), how)
	}
	return sb, nil
}

// systemMounts are bubblewrap's arguments that show the build machine's
// programs and libraries read-only: /usr and /etc, and /bin, /sbin and
// /lib* as they are (links into /usr on a merged-/usr system).
func systemMounts() (args, dirs []string) {
	for _, d := range []string{"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		st, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case st.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(d)
			if err != nil {
				continue
			}
			args = append(args, "--symlink", t, d)
		case st.IsDir():
			args = append(args, "--ro-bind", d, d)
			dirs = append(dirs, d)
		}
	}
	return args, dirs
}

// sandboxUser is the account name of the sandbox's user inside a step.
const sandboxUser = "dorisarm"

// accountFiles are bubblewrap's arguments that give the sandbox's user an
// account inside the step when the build machine's /etc/passwd and
// /etc/group have none for its ids: copies of both with a line for it,
// shown over the originals. Build scripts ask who runs them (Doris 3.0's
// gen_build_version.sh runs whoami under set -e, and fails with "cannot
// find name for user ID" without one). The copies live in a directory of
// the machine's temporary directory named by their content, made once and
// shared by every dorisarm that needs the same.
func accountFiles(uid, gid int) ([]string, error) {
	files := []struct{ path, line string }{
		{"/etc/passwd", fmt.Sprintf("%s:x:%d:%d:dorisarm build step:/tmp:/usr/sbin/nologin", sandboxUser, uid, gid)},
		{"/etc/group", fmt.Sprintf("%s:x:%d:", sandboxUser, gid)},
	}
	id := []string{strconv.Itoa(uid), strconv.Itoa(gid)}
	var args []string
	h := sha256.New()
	contents := make([][]byte, len(files))
	for i, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, err
		}
		has := false
		for _, l := range strings.Split(string(b), "\n") {
			if fs := strings.Split(l, ":"); len(fs) > 3 && fs[2] == id[i] {
				has = true
			}
		}
		if !has {
			if len(b) > 0 && b[len(b)-1] != '\n' {
				b = append(b, '\n')
			}
			b = append(b, f.line+"\n"...)
		}
		contents[i] = b
		fmt.Fprintf(h, "%s\x00%d\x00%s", f.path, len(b), b)
	}
	dir, err := ownDir(filepath.Join(os.TempDir(), fmt.Sprintf("dorisarm-sandbox-accounts-%x", h.Sum(nil)[:8])))
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		p := filepath.Join(dir, filepath.Base(f.path))
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, contents[i]) {
			tmp, err := os.CreateTemp(dir, ".tmp-")
			if err != nil {
				return nil, err
			}
			_, werr := tmp.Write(contents[i])
			if cerr := tmp.Close(); werr == nil {
				werr = cerr
			}
			if werr == nil {
				werr = os.Chmod(tmp.Name(), 0o644)
			}
			if werr == nil {
				werr = os.Rename(tmp.Name(), p)
			}
			if werr != nil {
				os.Remove(tmp.Name())
				return nil, werr
			}
		}
		args = append(args, "--ro-bind", p, f.path)
	}
	return args, nil
}

// ownDir is dir when it is (or can be made as) a directory of this
// user's that no one else may write, not a link: the shared temporary
// directory is anyone's, and a directory planted at that name would hand
// steps another /etc/passwd. Otherwise a fresh directory of its own.
func ownDir(dir string) (string, error) {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	st, err := os.Lstat(dir)
	if err == nil && st.IsDir() && st.Mode().Perm()&0o022 == 0 {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == os.Geteuid() {
			return dir, nil
		}
	}
	return os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+"-")
}

// under reports whether p is d or below it.
func under(p, d string) bool {
	return p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/")
}

// args are bubblewrap's arguments for c (its program and arguments last).
func (sb *sandboxer) args(c Command) ([]string, error) {
	a := []string{
		"--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--hostname", "dorisarm-step",
	}
	if !sb.root {
		a = append(a, "--unshare-user", "--disable-userns", "--cap-drop", "ALL")
	}
	a = append(a, sb.system...)
	// /tmp and /var/tmp private and writable by the step's user (the
	// compilers' temporary files: clang fails without them).
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--perms", "01777", "--tmpfs", "/tmp", "--perms", "01777", "--dir", "/var/tmp")
	type mnt struct {
		Mount
		rw bool
	}
	var ms []mnt
	if c.Sandbox != nil {
		for _, m := range c.Sandbox.Writable {
			ms = append(ms, mnt{m, true})
		}
		for _, m := range c.Sandbox.ReadOnly {
			ms = append(ms, mnt{m, false})
		}
	}
	for _, m := range ms {
		if !filepath.IsAbs(m.From) || !filepath.IsAbs(m.dest()) {
			return nil, fmt.Errorf("step %s: sandbox path %q is not absolute", c.Step, m.From)
		}
	}
	// Parents before children: a mount inside another is made after it.
	slices.SortStableFunc(ms, func(x, y mnt) int {
		return strings.Count(x.dest(), "/") - strings.Count(y.dest(), "/")
	})
	made := map[string]bool{"/": true, "/tmp": true, "/var": true, "/var/tmp": true, "/proc": true, "/dev": true}
	var binds []string // destinations whose content is this machine's
	for _, m := range ms {
		dest := filepath.Clean(m.dest())
		if slices.ContainsFunc(sb.systemDirs, func(d string) bool { return under(dest, d) }) {
			if !m.rw && m.From == dest {
				continue // already there, read-only
			}
			return nil, fmt.Errorf("step %s: %s cannot be shown inside the build machine's system directories", c.Step, dest)
		}
		// Directories leading to it, world-searchable (bubblewrap would
		// copy the machine's modes: a 0700 parent shuts the step out).
		for _, anc := range ancestors(dest) {
			if made[anc] || slices.ContainsFunc(binds, func(b string) bool { return under(anc, b) }) {
				continue
			}
			a = append(a, "--perms", "0755", "--dir", anc)
			made[anc] = true
		}
		if m.rw {
			a = append(a, "--bind", m.From, dest)
		} else {
			a = append(a, "--ro-bind", m.From, dest)
		}
		binds = append(binds, dest)
		made[dest] = true
	}
	dir := c.Dir
	if dir == "" {
		dir = "/tmp"
	}
	a = append(a, "--chdir", dir, "--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp")
	// Preloads (the exec shim) name paths of the step's namespace: set
	// in it, not in bubblewrap's own environment, where they are not.
	for _, kv := range c.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == "LD_PRELOAD" {
			a = append(a, "--setenv", k, v)
		}
	}
	a = append(a, "--")
	if sb.root {
		a = append(a, sb.setpriv, "--reuid="+strconv.Itoa(sb.uid), "--regid="+strconv.Itoa(sb.gid), "--clear-groups",
			"--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--")
	}
	return append(append(a, c.Path), c.Args...), nil
}

// ancestors are the directories above p, outermost first, "/" excluded.
func ancestors(p string) []string {
	var out []string
	for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
		out = append(out, d)
	}
	slices.Reverse(out)
	return out
}

// command is the bubblewrap process that runs c, and what puts the
// ownership of its writable paths back once it has ended (as root, they
// belong to the sandbox's user while the step runs).
func (sb *sandboxer) command(c Command) (*exec.Cmd, func(), error) {
	args, err := sb.args(c)
	if err != nil {
		return nil, func() {}, err
	}
	cmd := exec.Command(sb.bwrap, append([]string{"--info-fd", "3"}, args...)...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = withoutPreload(c.Env), c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	undo := func() {}
	if sb.root && c.Sandbox != nil {
		var paths []string
		for _, m := range c.Sandbox.Writable {
			if m.Shared {
				if err := os.Lchown(m.From, sb.uid, sb.gid); err != nil {
					return nil, undo, fmt.Errorf("step %s: giving %s to the sandbox's user %d: %w", c.Step, m.From, sb.uid, err)
				}
				continue
			}
			paths = append(paths, m.From)
		}
		if err := chownTrees(paths, sb.uid, sb.gid); err != nil {
			chownTrees(paths, os.Getuid(), os.Getgid())
			return nil, undo, fmt.Errorf("step %s: giving its tree to the sandbox's user %d: %w", c.Step, sb.uid, err)
		}
		undo = func() { chownTrees(paths, os.Getuid(), os.Getgid()) }
	}
	return cmd, undo, nil
}

// chownTrees gives every file under the paths to uid:gid, links
// themselves (never what they point at).
func chownTrees(paths []string, uid, gid int) error {
	var first error
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, uid, gid)
		})
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// sandboxRun is a started sandbox: bubblewrap's process, and the first
// process of the step's PID namespace, whose end is the end of all the
// step started (the kernel kills the rest of the namespace first).
type sandboxRun struct {
	cmd  *exec.Cmd
	info *os.File
	pid  chan int
}

// start starts cmd with bubblewrap's --info-fd on a pipe, from which it
// learns the namespace's first process.
func startSandbox(cmd *exec.Cmd) (*sandboxRun, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	w.Close()
	run := &sandboxRun{cmd: cmd, info: r, pid: make(chan int, 1)}
	go func() {
		defer r.Close()
		var info struct {
			ChildPid int `json:"child-pid"`
		}
		b, _ := io.ReadAll(io.LimitReader(r, 1<<16))
		json.Unmarshal(b, &info)
		run.pid <- info.ChildPid
	}()
	return run, nil
}

// waitGone waits, after bubblewrap has ended, until the namespace's
// first process has ended too (bubblewrap reports the command's status
// without waiting for the namespace to be torn down): the step's
// processes are all gone then. An error when they are not within limit.
//
// It also returns the CPU time of the namespace's processes that
// bubblewrap's own status leaves out: bubblewrap ends without reaping the
// namespace's first process, which then comes to dorisarm (a child
// subreaper, becomeSubreaper) and is reaped here with its rusage (its
// own and its waited-for descendants': the step's programs).
func (run *sandboxRun) waitGone(limit time.Duration) (time.Duration, error) {
	var pid int
	select {
	case pid = <-run.pid:
	case <-time.After(limit):
		return 0, fmt.Errorf("bubblewrap did not say which process the step's namespace started with")
	}
	if pid <= 0 {
		return 0, nil // the namespace was never made
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("watching the step's namespace (process %d): %w", pid, err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(limit)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, fmt.Errorf("the step's processes (namespace of process %d) did not end within %s", pid, limit)
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left/time.Millisecond)+1)
		if err == nil && n > 0 {
			return reap(pid), nil
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return 0, fmt.Errorf("watching the step's namespace (process %d): %w", pid, err)
		}
	}
}

// reap reaps pid, an ended process, when it is dorisarm's (an orphan
// that came to the subreaper) and returns its CPU time; 0 when another
// process reaped it.
func reap(pid int) time.Duration {
	var ws unix.WaitStatus
	var ru unix.Rusage
	for {
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, &ru)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || got != pid {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
}

var subreaper sync.Once

// becomeSubreaper makes dorisarm the reaper of its descendants' orphans:
// the namespace's first process of each step comes back to it when
// bubblewrap ends, so its CPU time is counted (waitGone).
func becomeSubreaper() {
	subreaper.Do(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}

// withoutPreload is env without LD_PRELOAD (args sets it in the namespace).
func withoutPreload(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "LD_PRELOAD=") })
}
