package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/promote"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// walk visits every command under c.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, s := range c.Commands() {
		walk(s, fn)
	}
}

func isCompletion(c *cobra.Command) bool {
	for p := c; p != nil; p = p.Parent() {
		if p.Name() == "completion" {
			return true
		}
	}
	return false
}

// TestEveryCommandHasExamplesAndJSON: --help shows examples on every
// command, and every command that prints something takes --output json.
func TestEveryCommandHasExamplesAndJSON(t *testing.T) {
	root := newRoot()
	root.InitDefaultCompletionCmd()
	n := 0
	walk(root, func(c *cobra.Command) {
		if c == root || c.Hidden || c.Name() == "help" || isCompletion(c) {
			return
		}
		n++
		if c.Example == "" {
			t.Errorf("%s has no examples in --help", c.CommandPath())
		}
		if !c.Runnable() {
			return
		}
		f := c.Flags().Lookup("output")
		if f == nil || f.Shorthand != "o" {
			t.Errorf("%s has no --output/-o", c.CommandPath())
			return
		}
		if c.Flags().Lookup("format") == nil {
			t.Errorf("%s lost --format, the older name of --output", c.CommandPath())
		}
	})
	if n < 20 {
		t.Errorf("only %d commands walked", n)
	}
}

func TestUseColor(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		mode string
		env  func(string) string
		tty  bool
		want bool
	}{
		{"auto", env(), true, true},
		{"auto", env(), false, false},
		{"auto", env("NO_COLOR", "1"), true, false},
		{"auto", env("NO_COLOR", ""), true, true}, // set but empty does not count (no-color.org)
		{"auto", env("TERM", "dumb"), true, false},
		{"always", env("NO_COLOR", "1"), false, true}, // the command line overrides the environment
		{"never", env(), true, false},
	} {
		if got, err := useColor(c.mode, c.env, c.tty); err != nil || got != c.want {
			t.Errorf("useColor(%s, tty %v): %v %v, want %v", c.mode, c.tty, got, err, c.want)
		}
	}
	if _, _, code := run(t, "version", "--color", "sometimes"); code != 2 {
		t.Errorf("--color sometimes: exit %d", code)
	}
}

// ptyRun runs dorisarm with its stdout on a terminal (script(1) makes one).
func ptyRun(t *testing.T, env []string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script(1) not installed")
	}
	line := bin
	for _, a := range args {
		line += " '" + a + "'"
	}
	cmd := exec.Command("script", "-qec", line, "/dev/null")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.Output()
	return string(out)
}

// TestNoColor: on a terminal the status words are coloured, with NO_COLOR
// they are not; piped output never is.
func TestNoColor(t *testing.T) {
	// patch check prints a status word per hunk: the sample's bitshuffle patch
	// against the sample's bitshuffle archive.
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", filepath.Join(repo, "examples/minidoris/thirdparty/mirror/bitshuffle-0.5.1.tar.gz"), "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	src, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(src) != 1 {
		t.Fatalf("archive holds %v", src)
	}
	args := []string{"patch", "check", "--patches", "examples/minidoris/patches", "--target", "kunpeng920", "--source", src[0], "--component", "bitshuffle", "--version", "0.5.1"}
	if out, errOut, code := run(t, args...); code != 0 || !strings.Contains(out, ": clean") {
		t.Fatalf("patch check: exit %d\n%s%s", code, out, errOut)
	}
	colored := ptyRun(t, []string{"NO_COLOR=", "TERM=xterm"}, args...)
	plain := ptyRun(t, []string{"NO_COLOR=1", "TERM=xterm"}, args...)
	piped, _, _ := run(t, args...)
	if !strings.Contains(colored, "\x1b[3") {
		t.Errorf("no colour on a terminal:\n%q", colored)
	}
	if strings.Contains(plain, "\x1b[3") || strings.Contains(piped, "\x1b[") {
		t.Errorf("colour despite NO_COLOR or a pipe:\n%q\n%q", plain, piped)
	}
}

// TestExitStatus: bad input and usage exit 2 with a message that says what
// to do, across the commands.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "127.0.0.1:1/x/y:z"}, "give --key"},
		{[]string{"sign", "127.0.0.1:1/x/y:z"}, "give --key"},
		{[]string{"promote"}, "give --key"},
		{[]string{"image", "inspect", "oci:" + dir + ":a:b"}, "index.json"},
		{[]string{"cache", "prune", "--cache", dir, "--max-size", "-1"}, "--max-size -1"},
		{[]string{"build", "--cache-max-size", "-5", "--target", "kunpeng920"}, "--cache-max-size -5"},
		{[]string{"publish"}, "--repo is required"},
		{[]string{"scan", "--target", "nope", "."}, "unknown target \"nope\""},
		{[]string{"report", "--release"}, "flag needs an argument"},
		{[]string{"version", "extra"}, "unknown command"},
		{[]string{"matrix", "--color", "bad"}, "use auto, always or never"},
		{[]string{"keygen", "-o", "yaml"}, "--output/--format \"yaml\""},
		{[]string{"verify", "--registry-timeout", "-1s", "--key", "k", "127.0.0.1:1/x/y:z"}, "want a duration above zero"},
		{[]string{"scan", "--registry-timeout", "0", "."}, "want a duration above zero"},
		{[]string{"scan", "--jobs", "-1", "."}, "--jobs -1"},
		{[]string{"publish", "--build", dir, "--repo", "127.0.0.1:1/doris", "--jobs", "0"}, "--jobs 0"},
	} {
		_, errOut, code := run(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestPromoteHelpShapeParses: the promotions file shown in promote --help
// is one the parser accepts.
func TestPromoteHelpShapeParses(t *testing.T) {
	cmd, _, err := newRoot().Find([]string{"promote"})
	if err != nil {
		t.Fatal(err)
	}
	_, shape, ok := strings.Cut(cmd.Long, "in this shape:\n\n")
	if !ok {
		t.Fatal("promote --help shows no promotions file")
	}
	shape = strings.ReplaceAll(shape, "<64 hex digits>", strings.Repeat("0a", 32))
	var lines []string
	for _, l := range strings.Split(shape, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "  "))
	}
	f := filepath.Join(t.TempDir(), "promotions.yaml")
	os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	ps, err := promote.LoadFile(f, registry.Options{})
	if err != nil {
		t.Fatalf("the shape in promote --help does not parse:\n%s\n%v", strings.Join(lines, "\n"), err)
	}
	if len(ps) != 1 || len(ps[0].Dst) != 2 {
		t.Errorf("parsed %+v", ps)
	}
}

// TestExitCodeMapping: the one mapping from error kinds to exit statuses.
func TestExitCodeMapping(t *testing.T) {
	enospc := &fs.PathError{Op: "write", Path: "/var/cache/dorisarm/work/x", Err: syscall.ENOSPC}
	in := fault.Inputf("bad flag")
	gate := fault.Gatef("scan found 3 violations")
	for _, c := range []struct {
		err  error
		ran  bool
		want int
	}{
		{nil, true, exitOK},
		{errors.New("unknown flag --x"), false, exitUsage}, // refused by cobra before RunE
		{in, true, exitUsage},
		{fmt.Errorf("plan: %w", in), true, exitUsage},
		{gate, true, exitCheck},
		{fault.Gate(in), true, exitCheck},              // a gate around bad input: the gate wins
		{errors.New("registry down"), true, exitCheck}, // a message is not a kind
		{&datafile.Error{Msg: "x"}, true, exitUsage},
		{&promote.GateError{Reason: "unsigned"}, true, exitCheck},
		// The environment, by mark or by cause, wins over the marks
		// around it: the check or the input is not what failed.
		{fault.Envf("mirror down"), true, exitEnv},
		{fault.Gatef("build failed: %w", enospc), true, exitEnv},
		{fault.Input(fmt.Errorf("keygen: %w", enospc)), true, exitEnv},
		{fault.Because(fault.Gatef("build failed for kunpeng920"), enospc), true, exitEnv},
		{fmt.Errorf("publishing: %w", &fs.PathError{Op: "mkdir", Path: "/out/2.1.8", Err: syscall.EACCES}), true, exitEnv},
		{fault.Input(&fs.PathError{Op: "open", Path: "allow.yaml", Err: syscall.EACCES}), true, exitUsage}, // a file the user named
		{fault.Input(&url.Error{Op: "Get", URL: "https://127.0.0.1:1/v2/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}), true, exitEnv},
		{&transport.Error{StatusCode: 503}, true, exitEnv},
		{&transport.Error{StatusCode: 401}, true, exitEnv},
		{fault.Gate(fmt.Errorf("x: %w", &transport.Error{StatusCode: 404, Errors: []transport.Diagnostic{{Code: transport.ManifestUnknownErrorCode}}})), true, exitCheck},
		{fmt.Errorf("promote: %w", &transport.Error{StatusCode: 404, Errors: []transport.Diagnostic{{Code: transport.ManifestUnknownErrorCode}}}), true, exitUsage},
		{&transport.Error{StatusCode: 404, Errors: []transport.Diagnostic{{Code: transport.BlobUnknownErrorCode}}}, true, exitCheck},
		{fmt.Errorf("writing the output: %w", &fs.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}), true, exitCheck},
		{enospc, false, exitUsage}, // refused by cobra before RunE
	} {
		if got := exitCode(c.err, c.ran); got != c.want {
			t.Errorf("exitCode(%v, ran=%v) = %d, want %d", c.err, c.ran, got, c.want)
		}
	}
}
