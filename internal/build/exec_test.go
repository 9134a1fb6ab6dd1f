package build

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStepsRunWithNoNetwork: a command RunProcess starts sees no network
// interface but a loopback one (a network namespace of its own).
func TestStepsRunWithNoNetwork(t *testing.T) {
	var out bytes.Buffer
	err := RunProcess(context.Background(), Command{Step: "thirdparty:TEST", Path: "sh", Args: []string{"-c", "sed -n 's/^ *\\([^:]*\\):.*/\\1/p' /proc/self/net/dev"}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got := strings.Fields(out.String()); len(got) != 1 || got[0] != "lo" {
		t.Errorf("a build step sees network interfaces %q, want only lo", got)
	}
	host, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		t.Skip(err)
	}
	if strings.Count(string(host), ":") < 3 {
		t.Skipf("this machine has no network interface besides lo: the namespace cannot be told apart")
	}
}

// TestDownloadNamesURL: a package whose CMake configure downloads (a
// file(DOWNLOAD) as CPM.cmake does, whose error names only the file and
// line) fails naming the URL; so does a shell step that runs curl.
func TestDownloadNamesURL(t *testing.T) {
	if _, err := exec.LookPath("cmake"); err != nil {
		t.Skip("cmake not installed")
	}
	src, _ := filepath.Abs(filepath.Join("testdata", "downloads"))
	var log bytes.Buffer
	bdir := t.TempDir()
	err := RunProcess(context.Background(), Command{Step: "thirdparty:DOWNLOADS", Path: "cmake", Args: []string{"-S", src, "-B", bdir}, Dir: bdir, Stdout: &log, Stderr: &log,
		Sandbox: &Sandbox{Writable: []Mount{{From: bdir}}, ReadOnly: []Mount{{From: src}}}})
	var d *DownloadError
	if !errors.As(err, &d) {
		t.Fatalf("configure that downloads: %v, want a DownloadError\n%s", err, log.String())
	}
	want := "https://example.invalid/dorisarm-test/v${CPM_DOWNLOAD_VERSION}/CPM.cmake"
	if len(d.URLs) != 1 || d.URLs[0] != want || !strings.Contains(err.Error(), "thirdparty:DOWNLOADS") || !strings.Contains(log.String(), "dorisarm: step thirdparty:DOWNLOADS runs with no network and tried to download "+want) {
		t.Errorf("error %q (URLs %q), want %s named; log:\n%s", err, d.URLs, want, log.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Errorf("the command's exit error is not kept: %v", err)
	}

	if _, err := exec.LookPath("curl"); err == nil {
		log.Reset()
		err = RunProcess(context.Background(), Command{Step: "build:be", Path: "sh", Args: []string{"-xc", "curl -fsS https://example.invalid/x/thing-1.0.tar.gz -o thing.tar.gz"}, Dir: t.TempDir(), Stdout: &log, Stderr: &log})
		if !errors.As(err, &d) || len(d.URLs) != 1 || d.URLs[0] != "https://example.invalid/x/thing-1.0.tar.gz" {
			t.Errorf("curl: %v\n%s", err, log.String())
		}
	}
	// A step that fails for another reason names no URL.
	log.Reset()
	err = RunProcess(context.Background(), Command{Step: "build:be", Path: "sh", Args: []string{"-c", "echo 'see https://example.org/docs'; exit 2"}, Stdout: &log, Stderr: &log})
	if err == nil || errors.As(err, &d) {
		t.Errorf("a plain failure: %v", err)
	}
}

// TestCommandCPU: RunProcess adds the CPU time of the program and of the
// children it waited for to Command.CPU (per command, so cells running at
// once each count their own).
func TestCommandCPU(t *testing.T) {
	var cpu time.Duration
	spin := `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`
	for range 2 {
		// The work is done by a child of sh -c's shell: it counts once waited for.
		if err := RunProcess(context.Background(), Command{Step: "x", Path: "sh", Args: []string{"-c", "sh -c '" + spin + "'"}, CPU: &cpu}); err != nil {
			t.Fatal(err)
		}
	}
	var one time.Duration
	if err := RunProcess(context.Background(), Command{Step: "x", Path: "sh", Args: []string{"-c", spin}, CPU: &one}); err != nil {
		t.Fatal(err)
	}
	if one <= 0 || cpu < one {
		t.Errorf("CPU of one spin %v, of two (in a child) %v: want both counted, the two at least the one", one, cpu)
	}
	if err := RunProcess(context.Background(), Command{Step: "x", Path: "true"}); err != nil {
		t.Fatalf("a command without CPU: %v", err)
	}
}

// TestSandboxShowsTreeAtPath: a command given a writable Mount sees the
// package tree at the cell's path, writes there into the package tree,
// and sees nothing of the cell's directory nor of the other packages'
// trees; the build machine's mounts never change.
func TestSandboxShowsTreeAtPath(t *testing.T) {
	// As a cell lays them out: the package's tree among the others'.
	cell, pkgs := t.TempDir(), t.TempDir()
	pkg := filepath.Join(pkgs, "X")
	os.Mkdir(pkg, 0o755)
	os.WriteFile(filepath.Join(cell, "cell-file"), []byte("cell"), 0o644)
	os.WriteFile(filepath.Join(pkg, "pkg-file"), []byte("pkg"), 0o644)
	var out bytes.Buffer
	others := filepath.Join(pkgs, "Y")
	os.MkdirAll(others, 0o755)
	os.WriteFile(filepath.Join(others, "other-file"), nil, 0o644)
	c := Command{Step: "thirdparty:X", Path: "sh", Args: []string{"-c", `pwd; ls; echo made > "$PWD/made"; ls /proc/self/net/dev >/dev/null; ls "$0" 2>/dev/null; true`, pkgs},
		Dir: cell, Stdout: &out, Stderr: &out, Sandbox: &Sandbox{Writable: []Mount{{From: pkg, To: cell}}}}
	if err := RunProcess(context.Background(), c); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got := strings.Fields(out.String()); !slices.Equal(got, []string{cell, "pkg-file"}) {
		t.Errorf("the command saw %q, want its working directory %s holding the package tree's pkg-file, and nothing of the other trees", got, cell)
	}
	if _, err := os.Stat(filepath.Join(others, "other-file")); err != nil {
		t.Errorf("the step's namespace changed the machine's files: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pkg, "made")); err != nil {
		t.Errorf("what the command wrote at the cell's path is not in the package tree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cell, "made")); err == nil {
		t.Error("the command wrote into the cell's own directory")
	}
	if c.Outside(filepath.Join(cell, "a", "b")) != filepath.Join(pkg, "a", "b") || c.Outside(cell+"x") != cell+"x" {
		t.Errorf("Outside maps wrongly: %s, %s", c.Outside(filepath.Join(cell, "a", "b")), c.Outside(cell+"x"))
	}
	st, _ := os.Stat(filepath.Join(pkg, "made"))
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		t.Errorf("the tree's files belong to uid %d after the step, want dorisarm's %d back", sys.Uid, os.Getuid())
	}
}

// TestSandboxedCPUIsCounted: a step's programs run in the sandbox's PID
// namespace, whose first process bubblewrap does not reap; their CPU time
// still reaches the step's record (it read about 0 before).
func TestSandboxedCPUIsCounted(t *testing.T) {
	if _, err := sandbox(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	var cpu time.Duration
	var out strings.Builder
	// About half a second of CPU in a grandchild of the namespace's first process.
	c := Command{Step: "busy", Path: "sh", Args: []string{"-c", `sh -c 'i=0; while [ $i -lt 1500000 ]; do i=$((i+1)); done'`}, Dir: dir,
		Stdout: &out, Stderr: &out, CPU: &cpu}
	t0 := time.Now()
	if err := RunProcess(context.Background(), c); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	wall := time.Since(t0)
	// The loop needs well over 100 ms of CPU however loaded the machine
	// (a share of the wall time is not: under load it falls to a fifth).
	if cpu < 100*time.Millisecond {
		t.Errorf("the step ran %s and its CPU time reads %s", wall, cpu)
	}
	t.Logf("wall %s, CPU %s", wall, cpu)
}
