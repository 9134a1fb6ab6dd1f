package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// noExecEnv makes the test binary run dorisarm's main with every execve
// and execveat refused by the kernel (a seccomp filter on all threads): no
// process can start, whatever code path tries.
const noExecEnv = "DORISARM_TEST_NO_EXEC"

// runNoExec is what TestMain does for a child started with noExecEnv.
func runNoExec() {
	if err := denyExec(); err != nil {
		os.Stderr.WriteString("installing the seccomp filter: " + err.Error() + "\n")
		os.Exit(3)
	}
	os.Args = append([]string{"dorisarm"}, strings.Split(os.Getenv(noExecEnv), "\x1f")...)
	main()
}

// denyExec installs a seccomp filter on every thread of the process that
// makes execve and execveat fail with EPERM.
func denyExec() error {
	runtime.LockOSThread()
	deny := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_EXECVE},
		{Code: unix.BPF_RET | unix.BPF_K, K: deny},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_EXECVEAT},
		{Code: unix.BPF_RET | unix.BPF_K, K: deny},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return e
	}
	return nil
}

// planNoExec runs `dorisarm args...` in the repository with no process
// allowed to start.
func planNoExec(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), noExecEnv+"="+strings.Join(args, "\x1f"))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestPlanStartsNoProcess: planning is pure. `dorisarm plan --target all`
// makes no sysroot (a fresh sysroot cache holds none afterwards: the build's
// sysroot step makes it), and once the machine has seen its compilers,
// binutils and the tree's scripts (their answers are remembered by content
// digest), it starts no process at all: run again with execve refused by
// the kernel, it prints the same plan.
func TestPlanStartsNoProcess(t *testing.T) {
	slow(t, "resolves the compilers of every target")
	// The child runs dorisarm (a command that starts nothing).
	if _, errOut, err := planNoExec(t, "sources", "lock", "--help"); err != nil {
		t.Fatalf("the no-exec child does not run dorisarm: %v %s", err, errOut)
	}
	cache := t.TempDir()
	args := []string{"plan", "--target", "all", "-o", "json", "--sysroot-cache", cache}
	warm, errOut, code := run(t, args...)
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, errOut)
	}
	made, _ := filepath.Glob(filepath.Join(cache, "sysroots", "sha256-*"))
	index, _ := filepath.Glob(filepath.Join(cache, "sysroots", "index", "*"))
	if len(made)+len(index) > 0 {
		t.Errorf("plan made sysroots: %v %v", made, index)
	}
	if !strings.Contains(warm, `"kind": "sysroot"`) || !strings.Contains(warm, `"kind": "toolchain"`) {
		t.Errorf("the plan has no sysroot and toolchain steps")
	}
	got, errOut, err := planNoExec(t, args...)
	if err != nil {
		t.Fatalf("plan with no process allowed: %v\n%s", err, errOut)
	}
	if got != warm {
		t.Errorf("the plan made with no process differs from the one made with them")
	}
	// The seam is real: with the memo gone, planning has to start programs
	// and cannot.
	if err := os.RemoveAll(filepath.Join(cache, "memo")); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := planNoExec(t, args...); err == nil || !strings.Contains(errOut, "operation not permitted") {
		t.Errorf("a cold plan with no process allowed: %v %s", err, errOut)
	}
}
