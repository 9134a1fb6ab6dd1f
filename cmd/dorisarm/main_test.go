package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/spf13/cobra"
)

var bin string

func TestMain(m *testing.M) {
	if os.Getenv(noExecEnv) != "" {
		runNoExec()
		return
	}
	dir, err := os.MkdirTemp("", "dorisarm-cli")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "dorisarm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	if missing := uncheckedJSON(); code == 0 && len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "no test ran these commands with --output json, so their JSON is not checked for nulls: %s\n", strings.Join(missing, ", "))
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

const repo = "../.."

// slow skips a test under go test -short: the fast tier runs in-process
// and without compilers or registries; make test runs everything.
func slow(t *testing.T, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: this test %s (make test runs it)", why)
	}
}

// run runs dorisarm in the repository root.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runIn(t, repo, args...)
}

// runIn runs dorisarm in dir.
func runIn(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(e.String(), "panic:") || strings.Contains(e.String(), "goroutine ") {
		t.Fatalf("dorisarm %v panicked:\n%s", args, e.String())
	}
	if code != 2 {
		checkJSONOutput(t, args, o.String())
	}
	return o.String(), e.String(), code
}

func TestVersionAndCompletion(t *testing.T) {
	if out, _, code := run(t, "version"); code != 0 || !strings.HasPrefix(out, "dorisarm ") {
		t.Errorf("version: %d %q", code, out)
	}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		if out, _, code := run(t, "completion", sh); code != 0 || !strings.Contains(out, "dorisarm") {
			t.Errorf("completion %s: %d", sh, code)
		}
	}
	// Target and compiler names come from the matrix, lists included.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "build", "--target", "grav"}, []string{"graviton2", "graviton3", "graviton4"}},
		{[]string{"__complete", "plan", "--target", "kunpeng920,gen"}, []string{"kunpeng920,generic-armv8"}},
		{[]string{"__complete", "build", "--target", "a"}, []string{"ampere-altra", "all"}},
		{[]string{"__complete", "scan", "--target", "a"}, []string{"ampere-altra"}},
		{[]string{"__complete", "build", "--compiler", ""}, []string{"bisheng-clang", "clang", "gcc"}},
	} {
		out, _, code := run(t, c.args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) == 0 || strings.Join(lines[:len(lines)-1], " ") != strings.Join(c.want, " ") || lines[len(lines)-1] != ":4" {
			t.Errorf("%v: %q, want %v and :4 (no file completion)", c.args, out, c.want)
		}
	}
}

func TestMatrixCommand(t *testing.T) {
	out, _, code := run(t, "matrix")
	if code != 0 || !strings.Contains(out, "28 cells") || !strings.Contains(out, "2.1/kunpeng920") {
		t.Fatalf("matrix: %d\n%s", code, out)
	}
	out, _, code = run(t, "matrix", "--format", "json")
	var cells []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &cells) != nil || len(cells) != 28 {
		t.Fatalf("matrix json: %d %d", code, len(cells))
	}
}

// TestBadMatricesExitTwo runs the whole malformed corpus through the CLI.
func TestBadMatricesExitTwo(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repo, "internal", "matrix", "testdata", "bad", "*.yaml"))
	for _, f := range files {
		rel, _ := filepath.Rel(repo, f)
		for _, args := range [][]string{{"matrix", "--matrix", rel}, {"plan", "--matrix", rel, "--target", "kunpeng920"}} {
			_, errOut, code := run(t, args...)
			if code != 2 || !strings.Contains(errOut, rel+":") {
				t.Errorf("%v: exit %d, stderr %q; want 2 naming the file", args, code, errOut)
			}
		}
	}
	if _, errOut, code := run(t, "matrix", "--matrix", "no/such/matrix.yaml"); code != 2 || !strings.Contains(errOut, "no/such/matrix.yaml") {
		t.Errorf("missing matrix: %d %q", code, errOut)
	}
}

func TestPlanCommand(t *testing.T) {
	out, _, code := run(t, "plan", "--target", "kunpeng920")
	if code != 0 || !strings.Contains(out, "plan 2.1/kunpeng920  doris 2.1.8") || !strings.Contains(out, "thirdparty:BITSHUFFLE") {
		t.Fatalf("plan: %d\n%s", code, out)
	}
	a, _, _ := run(t, "plan", "--target", "graviton3", "--format", "json")
	b, _, _ := run(t, "plan", "--target", "graviton3", "--format", "json")
	var p map[string]any
	if a != b || json.Unmarshal([]byte(a), &p) != nil || p["schema"] != float64(plan.Schema) {
		t.Fatal("plan json not stable or not JSON")
	}
	out, _, code = run(t, "plan", "--target", "all", "--format", "json")
	var all []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &all) != nil || len(all) != 7 {
		t.Fatalf("plan all: %d, %d plans", code, len(all))
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"plan"}, "--target is required"},
		{[]string{"plan", "--target", "kunpeng930"}, `unknown target "kunpeng930"`},
		{[]string{"plan", "--target", "kunpeng920", "--format", "xml"}, `--output/--format "xml"`},
		{[]string{"plan", "--target", "kunpeng920", "--compiler", "icc"}, `does not list compiler "icc"`},
		{[]string{"plan", "--target", "kunpeng920", "--doris", "1.2.3"}, "--doris 1.2.3: the tree declares Doris 2.1.8"},
		{[]string{"plan", "--target", "kunpeng920", "--source", "/nonexistent"}, "not a directory"},
		{[]string{"plan", "--bogus"}, "unknown flag"},
		{[]string{"frobnicate"}, "unknown command"},
	}
	for _, c := range cases {
		_, errOut, code := run(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestSourcesLockReproducesTheCommittedLock re-pins the sample from its
// mirror into a scratch recipe directory and compares with recipes/minidoris.lock.
func TestSourcesLockReproducesTheCommittedLock(t *testing.T) {
	dir := t.TempDir()
	data, _ := os.ReadFile(filepath.Join(repo, "recipes", "minidoris.yaml"))
	rf := filepath.Join(dir, "minidoris.yaml")
	os.WriteFile(rf, data, 0o644)
	out, errOut, code := run(t, "sources", "lock", "--recipe", rf, "--source", "examples/minidoris")
	if code != 0 {
		t.Fatalf("lock: %d %s", code, errOut)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "minidoris.lock"))
	want, _ := os.ReadFile(filepath.Join(repo, "recipes", "minidoris.lock"))
	if !bytes.Equal(got, want) || !strings.Contains(out, "pinned 4 archives") {
		t.Errorf("lock differs from the committed one:\n%s", got)
	}
	// A mirror without the archives: exit 1, nothing written.
	os.Remove(filepath.Join(dir, "minidoris.lock"))
	_, errOut, code = run(t, "sources", "lock", "--recipe", rf, "--source", "examples/minidoris", "--mirror", t.TempDir(), "-o", "json")
	if code != 1 || !strings.Contains(errOut, "nothing written") {
		t.Errorf("empty mirror: %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "minidoris.lock")); err == nil {
		t.Error("a lock was written after a failure")
	}
}

// TestOneOutputFlag: every command that prints in several formats takes
// -o/--output; --format, what earlier versions took, still works but is
// not shown, and both have the same default.
func TestOneOutputFlag(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		if o := c.Flags().Lookup("output"); o != nil && o.Shorthand == "o" {
			n++
			f := c.Flags().Lookup("format")
			switch {
			case f == nil:
				t.Errorf("%s: no --format alias (scripts of earlier versions use it)", c.CommandPath())
			case !f.Hidden:
				t.Errorf("%s: --format is shown beside -o", c.CommandPath())
			case f.DefValue != o.DefValue:
				t.Errorf("%s: --format defaults to %q, -o to %q", c.CommandPath(), f.DefValue, o.DefValue)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	if n < 5 {
		t.Errorf("only %d commands have -o", n)
	}
	_, _, code := run(t, "matrix", "--format", "json")
	out, _, _ := run(t, "matrix", "--help")
	if code != 0 || strings.Contains(out, "--format") || !strings.Contains(out, "-o, --output") {
		t.Errorf("matrix --format json: exit %d; its help shows --format or lacks -o:\n%s", code, out)
	}
}
