package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// example is one invocation shown in a command's --help.
type example struct {
	cmd  *cobra.Command // the command whose --help shows it
	line string         // as shown, continuation lines joined
	env  []string       // NAME=value words before dorisarm
	argv []string       // dorisarm and its arguments, up to a pipe or redirect
}

// examples splits each command's Example into invocations.
func examples(t *testing.T) []example {
	t.Helper()
	var out []example
	walk(newRoot(), func(c *cobra.Command) {
		if c.Example == "" {
			return
		}
		for _, line := range joinContinuations(c.Example) {
			words, err := shellWords(line)
			if err != nil {
				t.Errorf("%s --help: example %q: %v", c.CommandPath(), line, err)
				continue
			}
			ex := example{cmd: c, line: line}
			for len(words) > 0 && isAssignment(words[0]) {
				ex.env, words = append(ex.env, words[0]), words[1:]
			}
			ex.argv = words
			out = append(out, ex)
		}
	})
	return out
}

// joinContinuations splits an Example into its non-empty lines, a line
// ending in a backslash joined with the next.
func joinContinuations(text string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		if strings.HasSuffix(l, `\`) {
			cur += strings.TrimSuffix(l, `\`) + " "
			continue
		}
		if l = strings.TrimSpace(cur + l); l != "" {
			out = append(out, l)
		}
		cur = ""
	}
	if cur = strings.TrimSpace(cur); cur != "" {
		out = append(out, cur)
	}
	return out
}

// shellWords splits a command line as sh would, for the simple lines
// --help shows: single and double quotes, backslash escapes; it stops at an
// unquoted pipe, redirect, command separator or comment.
func shellWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == ' ' || ch == '\t':
			end()
		case ch == '|' || ch == '>' || ch == '<' || ch == ';' || ch == '&' || (ch == '#' && !inWord):
			end()
			return words, nil
		case ch == '\\':
			if i+1 == len(line) {
				return nil, fmt.Errorf("a backslash ends the line")
			}
			i++
			w.WriteByte(line[i])
			inWord = true
		case ch == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unclosed single quote")
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte(`"\$`+"`", line[i+1]) >= 0 {
					i++
				}
				w.WriteByte(line[i])
			}
			if i == len(line) {
				return nil, fmt.Errorf("unclosed double quote")
			}
			inWord = true
		default:
			w.WriteByte(ch)
			inWord = true
		}
	}
	end()
	return words, nil
}

// isAssignment: NAME=value, as in COSIGN_PASSWORD=... dorisarm keygen.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func TestShellWords(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`dorisarm plan --target kunpeng920`, "dorisarm|plan|--target|kunpeng920"},
		{`dorisarm matrix -o json | jq '.[] | select(.target=="kunpeng920")'`, "dorisarm|matrix|-o|json"},
		{`dorisarm verify --certificate-identity-regexp '^https://github.com/ORG/REPO/' x`, "dorisarm|verify|--certificate-identity-regexp|^https://github.com/ORG/REPO/|x"},
		{`dorisarm scan --format sarif a.tar.gz > scan.sarif`, "dorisarm|scan|--format|sarif|a.tar.gz"},
		{`dorisarm sign --keyless ghcr.io/o/d:1     # in GitHub Actions`, "dorisarm|sign|--keyless|ghcr.io/o/d:1"},
		{`COSIGN_PASSWORD=... dorisarm keygen --out "my keys"`, "COSIGN_PASSWORD=...|dorisarm|keygen|--out|my keys"},
		{`dorisarm x a\ b "q\"q" c#d`, `dorisarm|x|a b|q"q|c#d`},
	} {
		got, err := shellWords(c.line)
		if err != nil || strings.Join(got, "|") != c.want {
			t.Errorf("shellWords(%q) = %q, %v; want %s", c.line, got, err, c.want)
		}
	}
	for _, bad := range []string{`dorisarm 'open`, `dorisarm "open`, `dorisarm x \`} {
		if _, err := shellWords(bad); err == nil {
			t.Errorf("shellWords(%q): no error", bad)
		}
	}
	got := joinContinuations("  dorisarm patch new x --component c \\\n      --source s --targets k\n\n  dorisarm version")
	if len(got) != 2 || got[0] != "dorisarm patch new x --component c        --source s --targets k" || got[1] != "dorisarm version" {
		t.Errorf("joinContinuations: %q", got)
	}
	if !isAssignment("COSIGN_PASSWORD=...") || !isAssignment("SOURCE_DATE_EPOCH=1717000000") || isAssignment("--key=x") || isAssignment("a.b=c") {
		t.Error("isAssignment")
	}
}

// parseExample resolves an example against a fresh command tree: the
// command it names, its flags and its positional arguments, as cobra
// would before running it. It returns the command found.
func parseExample(ex example) (*cobra.Command, error) {
	if len(ex.argv) == 0 || ex.argv[0] != "dorisarm" {
		return nil, fmt.Errorf("does not run dorisarm")
	}
	root := newRoot()
	root.InitDefaultCompletionCmd()
	c, rest, err := root.Find(ex.argv[1:])
	if err != nil {
		return nil, err
	}
	if c.CommandPath() != ex.cmd.CommandPath() && !strings.HasPrefix(c.CommandPath(), ex.cmd.CommandPath()+" ") {
		return c, fmt.Errorf("runs %s, not %s or one of its subcommands", c.CommandPath(), ex.cmd.CommandPath())
	}
	if !c.Runnable() {
		return c, fmt.Errorf("%s only groups commands: name one of them", c.CommandPath())
	}
	if err := c.ParseFlags(rest); err != nil {
		return c, fmt.Errorf("%s: %w", c.CommandPath(), err)
	}
	if err := c.ValidateArgs(c.Flags().Args()); err != nil {
		return c, fmt.Errorf("%s: arguments %q: %w", c.CommandPath(), c.Flags().Args(), err)
	}
	if err := c.ValidateRequiredFlags(); err != nil {
		return c, err
	}
	if err := c.ValidateFlagGroups(); err != nil {
		return c, err
	}
	// --output/--format takes the formats its usage names (checkFormat in
	// RunE refuses the others).
	if f := c.Flags().Lookup("output"); f != nil && (f.Changed || c.Flags().Changed("format")) {
		usage := strings.FieldsFunc(f.Usage, func(r rune) bool { return r == ' ' || r == ',' || r == ':' || r == '(' || r == ')' })
		if !slices.Contains(usage, f.Value.String()) {
			return c, fmt.Errorf("%s: --output %s: the command's formats are %q", c.CommandPath(), f.Value, f.Usage)
		}
	}
	return c, nil
}

// TestHelpExamplesParse: every invocation in every command's --help names
// that command (or a subcommand), with flags it has and as many positional
// arguments as it takes.
func TestHelpExamplesParse(t *testing.T) {
	exs := examples(t)
	commands := map[string]bool{}
	for _, ex := range exs {
		commands[ex.cmd.CommandPath()] = true
		if _, err := parseExample(ex); err != nil {
			t.Errorf("%s --help shows %q: %v", ex.cmd.CommandPath(), ex.line, err)
		}
	}
	if len(exs) < 40 || len(commands) < 20 {
		t.Errorf("only %d examples of %d commands parsed", len(exs), len(commands))
	}
}

// TestHelpExampleCheckCatchesMistakes: the parse above fails for the
// mistakes it is there to catch.
func TestHelpExampleCheckCatchesMistakes(t *testing.T) {
	plan, _, _ := newRoot().Find([]string{"plan"})
	image, _, _ := newRoot().Find([]string{"image"})
	version, _, _ := newRoot().Find([]string{"version"})
	for _, c := range []struct {
		cmd  *cobra.Command
		line string
		want string
	}{
		{plan, "dorisarm plan --source ~/src/doris --target graviton3 --mirror /srv/doris-thirdparty", "unknown flag: --mirror"},
		{plan, "dorisarm plan --target kunpeng920 extra", "unknown command"},
		{version, "dorisarm matrix", "runs dorisarm matrix, not dorisarm version"},
		{image, "dorisarm image", "only groups commands"},
		{image, "dorisarm image inspect", "accepts 1 arg(s), received 0"},
		{version, "doris-arm version", "does not run dorisarm"},
		{version, "dorisarm version -o yaml", "--output yaml"},
		{plan, "dorisarm plan --target all --format sarif", "--output sarif"},
	} {
		words, _ := shellWords(c.line)
		_, err := parseExample(example{cmd: c.cmd, line: c.line, argv: words})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.line, err, c.want)
		}
	}
}

// runnable are the --help examples that run here for real, as written
// (pipes included), from the repository root or, for those that write, from
// an empty directory. Each must still be shown by its command.
var runnable = []struct {
	line    string
	scratch bool   // run in an empty directory
	needs   string // a file that must exist, else the example is skipped
	want    string // in what it prints
}{
	{line: "dorisarm version", want: "dorisarm "},
	{line: "dorisarm version -o json", want: `"version"`},
	{line: "dorisarm matrix", want: "kunpeng920"},
	{line: `dorisarm matrix -o json | jq '.[] | select(.target=="kunpeng920")'`, want: `"target": "kunpeng920"`},
	{line: "dorisarm plan --target kunpeng920", want: "plan 2.1/kunpeng920"},
	{line: "dorisarm plan --target all -o json", want: `"schema"`},
	{line: "dorisarm patch list", want: "bitshuffle"},
	{line: "dorisarm patch list --target kunpeng920", want: "bitshuffle"},
	{line: "dorisarm patch list --doris 2.1.8 --target kunpeng920", want: "bitshuffle"},
	{line: "dorisarm patch list --patches examples/minidoris/patches -o json", want: `"component"`},
	{line: "dorisarm sources list", want: "bitshuffle"},
	{line: "dorisarm sources list -o json", want: "bitshuffle"},
	{line: "dorisarm cache prune --cache .cache/demo --max-size 0 -o json", scratch: true, want: "{"},
	{line: "dorisarm scan /usr/lib/aarch64-linux-gnu/libcrypto.so.3", needs: "/usr/lib/aarch64-linux-gnu/libcrypto.so.3", want: "1 files, 1 ELF"},
}

// TestHelpExamplesRun runs the examples that need no build, registry, key
// or network with the dorisarm built by TestMain, through sh -c so that
// their pipes run too.
func TestHelpExamplesRun(t *testing.T) {
	shown := map[string]bool{}
	for _, ex := range examples(t) {
		shown[ex.line] = true
	}
	abs, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, r := range runnable {
		t.Run(strings.TrimPrefix(r.line, "dorisarm "), func(t *testing.T) {
			if !shown[r.line] {
				t.Fatalf("no command's --help shows %q any more: update the list of runnable examples", r.line)
			}
			if r.needs != "" {
				if _, err := os.Stat(r.needs); err != nil {
					t.Skipf("%s: %v", r.line, err)
				}
			}
			if strings.Contains(r.line, "| jq") {
				if _, err := exec.LookPath("jq"); err != nil {
					t.Skip("jq not installed")
				}
			}
			cmd := exec.Command("bash", "-o", "pipefail", "-c", r.line)
			cmd.Dir = abs
			if r.scratch {
				cmd.Dir = t.TempDir()
			}
			cmd.Env = append(os.Environ(), "PATH="+path, "NO_COLOR=1")
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			if err := cmd.Run(); err != nil || !strings.Contains(o.String(), r.want) {
				t.Errorf("%s: %v, stdout lacks %q:\n%s\n%s", r.line, err, r.want, o.String(), e.String())
			}
		})
	}
}
