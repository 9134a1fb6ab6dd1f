package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/testproc"
)

// escapes are what a hostile step tries, each a shell snippet that
// prints "ESCAPED <name>" when it gets through. $SECRET is a directory
// of this machine the step was not given (the cache, the keys), $TREE
// its tree, $RO a read-only input, $PID dorisarm's process and $PORT a
// server on this machine's loopback.
var escapes = []struct{ name, sh string }{
	{"uid-is-root", `[ "$(id -u)" = 0 ] && echo ESCAPED uid-is-root`},
	// Not an escape: what a compiler needs (clang's temporary files).
	{"tmp-not-writable", `for d in /tmp /var/tmp "$TMPDIR" "$HOME"; do echo x > "$d/.probe" || echo ESCAPED tmp-not-writable "$d"; done`},
	{"capabilities", `grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status || echo ESCAPED capabilities`},
	{"no-new-privs", `grep -q '^NoNewPrivs:[[:space:]]*1$' /proc/self/status || echo ESCAPED no-new-privs`},
	{"read-cache", `cat "$SECRET/steps/entry/meta.json" 2>/dev/null && echo ESCAPED read-cache`},
	{"rewrite-cache", `echo poisoned 2>/dev/null > "$SECRET/steps/entry/meta.json" && echo ESCAPED rewrite-cache`},
	{"read-key", `cat "$SECRET/cosign.key" 2>/dev/null && echo ESCAPED read-key`},
	{"home", `ls "$HOSTHOME" >/dev/null 2>&1 && [ "$HOSTHOME" != /tmp ] && echo ESCAPED home`},
	{"shadow", `cat /etc/shadow >/dev/null 2>&1 && echo ESCAPED shadow`},
	{"host-write", `mkdir -p "$SECRET/planted" 2>/dev/null && echo x > "$SECRET/planted/file" 2>/dev/null; true`},
	{"ro-input-write", `echo x 2>/dev/null > "$RO/input" && echo ESCAPED ro-input-write`},
	{"ro-input-remove", `rm -f "$RO/input" 2>/dev/null; [ -e "$RO/input" ] || echo ESCAPED ro-input-remove`},
	{"umount-tree", `umount "$TREE" 2>/dev/null && echo ESCAPED umount-tree`},
	{"umount-ro", `umount "$RO" 2>/dev/null && echo ESCAPED umount-ro`},
	{"userns-umount", `unshare -Urm sh -c "umount '$RO' && echo ESCAPED userns-umount" 2>/dev/null; true`},
	{"nsenter-net", `nsenter --net=/proc/$PID/ns/net true 2>/dev/null && echo ESCAPED nsenter-net`},
	{"proc-root", `ls /proc/$PID/root/ >/dev/null 2>&1 && echo ESCAPED proc-root`},
	{"signal-dorisarm", `kill -0 $PID 2>/dev/null && echo ESCAPED signal-dorisarm`},
	{"loopback-server", `bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null && echo ESCAPED loopback-server`},
	{"daemon", `setsid sh -c "sleep 300 # $TOKEN" </dev/null >/dev/null 2>&1 & true`},
}

// TestSandboxEscapes runs every escape in a step, as root and again as an
// unprivileged user (the test binary started again under setpriv), and
// checks that none got through and that nothing the step started
// outlives it.
func TestSandboxEscapes(t *testing.T) {
	testSandboxEscapes(t)
	if os.Getenv("DORISARM_SANDBOX_CHILD") != "" || os.Geteuid() != 0 {
		return
	}
	t.Run("as-nobody", func(t *testing.T) {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("no setpriv (util-linux): the unprivileged run is not made")
		}
		// The test binary, where nobody can run it.
		dir, err := os.MkdirTemp("", "dorisarm-sandbox-test-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		os.Chmod(dir, 0o755)
		self, _ := os.Executable()
		bin := filepath.Join(dir, "build.test")
		if err := copyFile(self, bin); err != nil {
			t.Fatal(err)
		}
		os.Chmod(bin, 0o755)
		var out bytes.Buffer
		cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestSandboxEscapes$", "-test.v", "-test.count=1")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "DORISARM_SANDBOX_CHILD=1", "HOME=/nonexistent", "TMPDIR=/tmp", "GOCACHE=/tmp/nobody-gocache")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("as nobody: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "--- PASS: TestSandboxEscapes") {
			t.Fatalf("as nobody, the test did not pass:\n%s", out.String())
		}
		t.Logf("as nobody:\n%s", out.String())
	})
}

func testSandboxEscapes(t *testing.T) {
	if _, err := sandbox(); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	secret := filepath.Join(base, "cache")
	tree := filepath.Join(base, "cache", "work", "cell", "src")
	ro := filepath.Join(base, "cache", "work", "cell", "toolchain")
	for _, d := range []string{filepath.Join(secret, "steps", "entry"), tree, ro} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(secret, "steps", "entry", "meta.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(secret, "cosign.key"), []byte("KEY"), 0o644)
	os.WriteFile(filepath.Join(ro, "input"), []byte("in"), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	token := fmt.Sprintf("dorisarm-escape-%d-%d", os.Getpid(), time.Now().UnixNano())
	var script strings.Builder
	for _, e := range escapes {
		fmt.Fprintf(&script, "%s\n", e.sh)
	}
	home, _ := os.UserHomeDir()
	env := []string{"SECRET=" + secret, "TREE=" + tree, "RO=" + ro, "PID=" + strconv.Itoa(os.Getpid()), "HOSTHOME=" + home,
		"PORT=" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "TOKEN=" + token, "PATH=/usr/bin:/bin:/usr/sbin:/sbin"}
	var out bytes.Buffer
	c := Command{Step: "thirdparty:HOSTILE", Path: "bash", Args: []string{"-c", script.String()}, Env: env, Dir: tree,
		Stdout: &out, Stderr: &out, Sandbox: &Sandbox{Writable: []Mount{{From: tree}}, ReadOnly: []Mount{{From: ro}}}}
	if err := RunProcess(context.Background(), c); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, e := range escapes {
		if strings.Contains(out.String(), "ESCAPED "+e.name) {
			t.Errorf("%s: the sandbox let it through (%s)", e.name, e.sh)
		}
	}
	if _, err := os.Stat(filepath.Join(secret, "planted")); err == nil {
		t.Error("host-write: the step made a directory of the machine's")
	}
	if b, _ := os.ReadFile(filepath.Join(secret, "steps", "entry", "meta.json")); string(b) != "{}" {
		t.Errorf("the cache entry reads %q after the step", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "input")); string(b) != "in" {
		t.Errorf("the read-only input reads %q after the step", b)
	}
	if pids := testproc.ProcessesWith(token); len(pids) > 0 {
		t.Errorf("daemon: processes the step started outlive it: %v", pids)
	}
}

// TestSandboxRefusesWhatItCannotShow: a path inside the system
// directories shown elsewhere, or writable, is refused before anything
// runs, as a relative path is.
func TestSandboxRefusesWhatItCannotShow(t *testing.T) {
	sb, err := sandbox()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Sandbox{
		{Writable: []Mount{{From: "/usr/lib"}}},
		{ReadOnly: []Mount{{From: t.TempDir(), To: "/usr/share/x"}}},
		{Writable: []Mount{{From: "rel"}}},
	} {
		if _, err := sb.args(Command{Step: "x", Path: "true", Sandbox: s}); err == nil {
			t.Errorf("%+v: accepted", *s)
		}
	}
}

// TestPreloadSeenOnlyInTheStep: a step's LD_PRELOAD names a library at
// a path of its namespace (the exec shim in its compiler home at
// /dorisarm/toolchain): the step's programs load it, and bubblewrap,
// which runs before that path exists, is not given it (ld.so would
// print "cannot be preloaded" into every step's log).
func TestPreloadSeenOnlyInTheStep(t *testing.T) {
	// The build machine's own (not a cross sysroot's in /lib/<triple>).
	triple := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	libm, err := filepath.Glob("/lib/" + triple + "/libm.so.6")
	if err != nil || len(libm) == 0 {
		t.Skip("no libm.so.6 of this machine's to preload")
	}
	tree := t.TempDir()
	data, err := os.ReadFile(libm[0])
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tree, "libpre.so"), data, 0o755)
	var out bytes.Buffer
	c := Command{Step: "preload", Path: "/bin/sh", Args: []string{"-c", `grep -c libpre.so /proc/self/maps`},
		Env: []string{"PATH=/usr/bin:/bin", "LD_PRELOAD=/dorisarm/src/libpre.so"}, Dir: "/dorisarm/src",
		Stdout: &out, Stderr: &out, Sandbox: &Sandbox{Writable: []Mount{{From: tree, To: "/dorisarm/src"}}}}
	if err := RunProcess(context.Background(), c); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "cannot be preloaded") || strings.TrimSpace(out.String()) == "0" {
		t.Errorf("the step's preload: %q", out.String())
	}
}

// TestStepEnvIsAllowListed: a step's environment keeps the locale and
// what the recipe names, never a key's password, a token or credentials.
func TestStepEnvIsAllowListed(t *testing.T) {
	in := []string{"COSIGN_PASSWORD=pw", "SIGSTORE_ID_TOKEN=tok", "LANG=C.UTF-8", "LC_ALL=C", "JAVA_HOME=/jdk", "HOME=/root",
		"DOCKER_CONFIG=/root/.docker", "GITHUB_TOKEN=t", "ACTIONS_ID_TOKEN_REQUEST_TOKEN=x", "AWS_SECRET_ACCESS_KEY=k", "PATH=/usr/bin", "junk"}
	got := stepEnv(in, []string{"JAVA_HOME"})
	want := []string{"LANG=C.UTF-8", "LC_ALL=C", "JAVA_HOME=/jdk"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("stepEnv = %q, want %q", got, want)
	}
}

// TestNoSandboxNoStep: where bubblewrap cannot be found the probe fails,
// saying what to install (RunProcess has no other way to run a step).
func TestNoSandboxNoStep(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := probeSandbox()
	if err == nil || !strings.Contains(err.Error(), "apt-get install bubblewrap") || !errors.Is(err, errNoSandbox) {
		t.Errorf("probe without bwrap: %v", err)
	}
}

// TestAccountFiles: the sandbox's user gets a passwd and group line (a
// step's whoami, Doris 3.0's gen_build_version.sh, needs one), the
// machine's lines are kept, and a second call reuses the same files.
func TestAccountFiles(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	args, err := accountFiles(SandboxUID, SandboxUID)
	if err != nil {
		t.Fatal(err)
	}
	if len(args) != 6 || args[0] != "--ro-bind" || args[2] != "/etc/passwd" || args[5] != "/etc/group" {
		t.Fatalf("args %q", args)
	}
	passwd, err := os.ReadFile(args[1])
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s:x:%d:%d:", sandboxUser, SandboxUID, SandboxUID)
	if !strings.Contains(string(passwd), "\n"+want) && !strings.HasPrefix(string(passwd), want) {
		t.Errorf("passwd copy has no line for the sandbox's user:\n%s", passwd)
	}
	if host, _ := os.ReadFile("/etc/passwd"); !strings.HasPrefix(string(passwd), string(host)) {
		t.Errorf("passwd copy does not start with the machine's /etc/passwd")
	}
	group, _ := os.ReadFile(args[4])
	if !strings.Contains(string(group), fmt.Sprintf("%s:x:%d:", sandboxUser, SandboxUID)) {
		t.Errorf("group copy has no line for the sandbox's group:\n%s", group)
	}
	again, err := accountFiles(SandboxUID, SandboxUID)
	if err != nil || !slices.Equal(args, again) {
		t.Errorf("second call: %q, %v; want %q", again, err, args)
	}
	// A directory someone else may write (planted at the shared name) is
	// not used: the copies go to a fresh directory of this user's.
	shared := filepath.Dir(args[1])
	os.Chmod(shared, 0o777)
	planted, err := accountFiles(SandboxUID, SandboxUID)
	if err != nil || filepath.Dir(planted[1]) == shared {
		t.Errorf("a world-writable directory at the shared name was used: %q, %v", planted, err)
	}
}

// TestSharedLogStaysWritable: package steps run at once and write one
// compiler log. As root, each step's writable paths are the sandbox
// user's while it runs and taken back when it ends; the log was too, so
// the first step to end took it back from the others ("cannot create
// /dorisarm/logs/compiler-thirdparty.log: Permission denied" in their
// logs). A shared mount stays the sandbox user's; the rest go back.
func TestSharedLogStaysWritable(t *testing.T) {
	sb, err := sandbox()
	if err != nil {
		t.Skip(err)
	}
	if !sb.root {
		t.Skip("not root: the sandbox runs as this user, nothing is chowned")
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "compiler-thirdparty.log")
	os.WriteFile(log, nil, 0o644)
	treeA, treeB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.Mkdir(treeA, 0o755)
	os.Mkdir(treeB, 0o755)
	step := func(tree string) func() {
		_, undo, err := sb.command(Command{Step: "thirdparty:" + filepath.Base(tree), Path: "true", Dir: tree,
			Sandbox: &Sandbox{Writable: []Mount{{From: tree}, {From: log, Shared: true}}}})
		if err != nil {
			t.Fatal(err)
		}
		return undo
	}
	owner := func(p string) int {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return int(st.Sys().(*syscall.Stat_t).Uid)
	}
	undoA := step(treeA)
	undoB := step(treeB)
	undoA() // A ends while B runs
	if got := owner(log); got != sb.uid {
		t.Errorf("the shared log belongs to uid %d after one step ended, want the sandbox's %d (the running step must still write it)", got, sb.uid)
	}
	if got := owner(treeA); got != os.Getuid() {
		t.Errorf("the ended step's tree belongs to uid %d, want %d back", got, os.Getuid())
	}
	if got := owner(treeB); got != sb.uid {
		t.Errorf("the running step's tree belongs to uid %d", got)
	}
	undoB()
}
