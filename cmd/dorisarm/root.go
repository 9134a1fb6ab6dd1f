package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dorisarm/dorisarm/internal/about"
	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/textfmt"
)

// version is set at link time (-ldflags "-X main.version=…"); otherwise the
// module version from the build info.
var version = ""

type globals struct {
	data      datafs.Locator
	stdout    io.Writer
	stderr    io.Writer
	colorMode string
	color     bool // colour stdout's status words (see useColor)
}

// useColor decides whether to colour (see textfmt.UseColor).
func useColor(mode string, getenv func(string) string, tty bool) (bool, error) {
	c, ok := textfmt.UseColor(mode, getenv, tty)
	if !ok {
		return false, usageErr("--color %q: use auto, always or never", mode)
	}
	return c, nil
}

// paint colours a status word green (ok) or red when colour is on.
func (g *globals) paint(ok bool, word string) string { return textfmt.Paint(g.color, ok, word) }

func (g *globals) loadMatrix() (*matrix.Matrix, error) {
	m, err := matrix.Load(g.data.MatrixPath())
	return m, fault.Input(err)
}

// commands are the top-level commands, in the order help lists them.
var commands = []struct {
	name string
	make func(*globals) *cobra.Command
}{
	{"version", newVersionCmd}, {"matrix", newMatrixCmd}, {"plan", newPlanCmd}, {"sources", newSourcesCmd},
	{"patch", newPatchCmd}, {"scan", newScanCmd}, {"build", newBuildCmd}, {"cache", newCacheCmd},
	{"image", newImageCmd}, {"publish", newPublishCmd}, {"keygen", newKeygenCmd}, {"sign", newSignCmd},
	{"verify", newVerifyCmd}, {"promote", newPromoteCmd}, {"report", newReportCmd}, {"packages", newPackagesCmd}, {"simulate", newSimulateCmd},
}

// newRoot is the whole command tree.
func newRoot() *cobra.Command { return buildRoot(newGlobals(), func(string) bool { return true }) }

func newGlobals() *globals {
	return &globals{stdout: stdout, stderr: os.Stderr, data: datafs.Locator{CacheDir: defaultCacheDir()}}
}

// stdout is the process's standard output, keeping the first write error:
// a command that prints a table or a plan does not check each write, and
// main must not exit 0 when the output ended half-written (a full disk,
// /dev/full, a file size limit).
var stdout = &checkedWriter{w: os.Stdout}

// checkedWriter writes to w until a write fails, then keeps that error.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	c.err = err
	return n, err
}

// newRootFor is the command tree args need: when they name a top-level
// command (as cobra finds it), the root with that command alone, since
// building every command and its flags costs each run a few hundred
// microseconds; for anything else (help, completion, an unknown command)
// the whole tree, so that help, completion and suggestions see it all.
func newRootFor(args []string) *cobra.Command {
	probe := buildRoot(&globals{}, func(string) bool { return false })
	for _, c := range commands {
		probe.AddCommand(&cobra.Command{Use: c.name})
	}
	found, _, err := probe.Find(args)
	if err != nil || found == probe || found.Parent() != probe {
		return newRoot()
	}
	name := found.Name()
	root := buildRoot(newGlobals(), func(n string) bool { return n == name })
	// cobra adds its completion command (five commands, their flags and
	// help texts) at every Execute; args name another command here, and
	// completion itself is served by the whole tree.
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

// buildRoot makes the root command with the top-level commands want picks.
func buildRoot(g *globals, want func(name string) bool) *cobra.Command {
	root := &cobra.Command{
		Use:   "dorisarm",
		Short: "Build Apache Doris for ARM servers, prove it fits the CPU, publish signed images",
		Long: `dorisarm turns matrix.yaml (targets, CPUs, OSes, compilers), recipes/ and
patches/ into builds of Apache Doris for Kunpeng, Graviton, Ampere and generic
ARMv8 servers.

Every command that prints data takes --output json (-o json). Status words
are coloured on a terminal unless $NO_COLOR is set (or --color never).

Exit status: 0 ok, 1 a check failed, 2 bad input or usage, 3 the machine or
the network failed (a registry that cannot be reached or answers 5xx, a full
disk, permission denied): retry those. 130 interrupted. README.md, "Exit
status", has the table.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if g.stdout != nil {
		root.SetOut(g.stdout) // help and usage as well
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return fmt.Errorf("%w (see --help)", err) })
	root.PersistentFlags().StringVar(&g.data.Matrix, "matrix", "", "the build matrix (default: matrix.yaml in the working directory, else the one built into dorisarm)")
	inputFlags(root, false, "matrix")
	root.PersistentFlags().StringVar(&g.colorMode, "color", "auto", "colour status words: auto (a terminal without $NO_COLOR), always or never")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		var err error
		if g.color, err = useColor(g.colorMode, os.Getenv, isTerminal(os.Stdout)); err != nil {
			return err
		}
		if err := checkFormat(cmd); err != nil {
			return err
		}
		return checkInputs(cmd)
	}
	for _, c := range commands {
		if want(c.name) {
			root.AddCommand(c.make(g))
		}
	}
	registerCompletions(root, g)
	return root
}

// registerCompletions completes --target and --compiler from the matrix
// (--matrix, as given on the command line being completed).
func registerCompletions(c *cobra.Command, g *globals) {
	names := func(list func(*matrix.Matrix) []string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			m, err := matrix.Load(g.data.MatrixPath())
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			// --target a,b,<TAB>: complete the last name of the list.
			prefix := toComplete[:strings.LastIndex(toComplete, ",")+1]
			var out []string
			for _, n := range list(m) {
				if strings.HasPrefix(prefix+n, toComplete) {
					out = append(out, prefix+n)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		}
	}
	targets := names(func(m *matrix.Matrix) []string { return m.TargetNames() })
	if c.Name() == "plan" || c.Name() == "build" { // they take lists and all
		targets = names(func(m *matrix.Matrix) []string { return append(m.TargetNames(), "all") })
	}
	compilers := names(func(m *matrix.Matrix) []string { return slices.Sorted(maps.Keys(m.Compilers)) })
	if c.Flags().Lookup("target") != nil {
		c.RegisterFlagCompletionFunc("target", targets)
	}
	if c.Flags().Lookup("compiler") != nil {
		c.RegisterFlagCompletionFunc("compiler", compilers)
	}
	for _, s := range c.Commands() {
		registerCompletions(s, g)
	}
}

func newVersionCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print dorisarm's version and the data it uses",
		Long: `version prints dorisarm's version and commit, and which data the other
commands use: matrix.yaml, recipes/ and the patch series from the working
directory (or --matrix's directory) when they are there, otherwise the copies
built into dorisarm ("embedded:<path>"), each with its sha256.`,
		Example: "  dorisarm version\n  dorisarm version -o json\n  dorisarm version --matrix ~/doris-arm/matrix.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := g.data.Info()
			if err != nil {
				return fault.Inputf("%s: cannot read dorisarm's data: %w (pass --matrix FILE)", g.data.MatrixPath(), err)
			}
			return printAs(g.stdout, format, about.Report{Build: about.ReadBuild(version), Data: data})
		},
	}
	formatFlag(cmd, &format, "text or json", "text", "json")
	return cmd
}

// printJSON writes v as indented JSON: what --output json prints.
func printJSON(w io.Writer, v any) error { return textfmt.JSON(w, v) }

// formatFlag registers --output (-o), and --format as another name for
// it, on one variable: every command that prints data takes --output json.
// allowed[0] is the default; the root checks the value before RunE runs.
func formatFlag(cmd *cobra.Command, p *string, usage string, allowed ...string) {
	cmd.Flags().StringVarP(p, "output", "o", allowed[0], usage)
	// --format: what earlier versions took, kept working, not shown (-o is
	// the one output flag, as in kubectl and cosign).
	cmd.Flags().StringVar(p, "format", allowed[0], "the same as --output")
	cmd.Flags().MarkHidden("format")
	cmd.Flags().SetAnnotation("output", "formats", allowed)
}

// checkFormat refuses an --output the command does not print.
func checkFormat(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("output")
	if f == nil {
		return nil
	}
	allowed := f.Annotations["formats"]
	if slices.Contains(allowed, f.Value.String()) {
		return nil
	}
	return usageErr("--output/--format %q: use one of %s", f.Value.String(), strings.Join(allowed, ", "))
}

// inputFlags marks the flags named (those cmd has) as naming a file
// dorisarm reads (dirs: or a directory). The root checks each one given
// before the command runs (checkInputs).
func inputFlags(cmd *cobra.Command, dirs bool, names ...string) {
	kind := []string{"file"}
	if dirs {
		kind = append(kind, "dir")
	}
	for _, n := range names {
		if cmd.Flags().Lookup(n) != nil {
			cmd.Flags().SetAnnotation(n, "input", kind)
		} else {
			cmd.PersistentFlags().SetAnnotation(n, "input", kind)
		}
	}
}

// checkInputs refuses, before anything runs, a flag marked by inputFlags
// that names something other than a regular file it can open (or a
// directory, where one is taken): a named pipe would block the command for
// ever, /dev/zero read without end, and a file that cannot serve, found
// only at its first use, may leave, say, a shared cache silently unused.
// The error names the flag, the path and what is there (exit status 2). A
// file that is not there is left to the read, after the command's own
// checks of its flags. The reads use fsutil.ReadFile or OpenRegular, which
// check again and bound what they read. A name in dorisarm's built-in data
// ("embedded:...") is not a path.
func checkInputs(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		kind, ok := f.Annotations["input"]
		path := f.Value.String()
		if !ok || err != nil || path == "" || datafs.IsEmbedded(path) {
			return
		}
		err = inputFile("--"+f.Name, path, slices.Contains(kind, "dir"))
	})
	return err
}

// inputFile checks one file a flag names (see checkInputs).
func inputFile(flag, path string, dirs bool) error {
	want := "give the path of a file"
	if dirs {
		want = "give the path of a file or a directory"
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Said where the file is read, after the command's own checks of
		// its flags (a missing file blocks nothing).
		return nil
	case err != nil:
		return fault.Inputf("%s %s: %v", flag, path, pathCause(err))
	case st.IsDir() && dirs:
		return nil
	case !st.Mode().IsRegular():
		return fault.Inputf("%s %s: not a regular file (%s); %s", flag, path, fsutil.Kind(st.Mode()), want)
	}
	f, _, err := fsutil.OpenRegular(path)
	if err != nil {
		return fault.Inputf("%s %s: %v", flag, path, pathCause(err))
	}
	return f.Close()
}

// pathCause is what a *fs.PathError says is wrong, without the operation
// and the path, which the caller's message names already.
func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// registryFlags registers --insecure and --registry-timeout on ro.
func registryFlags(cmd *cobra.Command, ro *registry.Options) {
	cmd.Flags().BoolVar(&ro.Insecure, "insecure", false, "allow plain-HTTP registries that are not on loopback")
	registryTimeoutFlag(cmd, &ro.Stall)
	registryMinRateFlag(cmd, &ro.MinRate)
}

// registryMinRateFlag registers --registry-min-rate (KiB/s) on r (bytes/s).
func registryMinRateFlag(cmd *cobra.Command, r *int64) {
	*r = registry.DefaultMinRate
	cmd.Flags().Var((*kibRate)(r), "registry-min-rate", "fail a registry read whose body arrives slower than this many KiB/s on average (after one --registry-timeout of grace)")
}

// kibRate is a rate flag given in KiB/s and kept in bytes/s; more than zero.
type kibRate int64

func (k *kibRate) String() string { return strconv.FormatInt(int64(*k)>>10, 10) }
func (k *kibRate) Type() string   { return "KiB/s" }
func (k *kibRate) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > 1<<40 {
		return fmt.Errorf("%q is not a rate in KiB/s (a whole number above 0)", s)
	}
	*k = kibRate(n << 10)
	return nil
}

// registryTimeoutFlag registers --registry-timeout on d.
func registryTimeoutFlag(cmd *cobra.Command, d *time.Duration) {
	*d = registry.DefaultStall
	cmd.Flags().Var((*positiveDuration)(d), "registry-timeout", "fail a registry request that gets no answer, or less than 64 KiB of its body, for this long")
}

// positiveDuration is a duration flag that must be more than zero.
type positiveDuration time.Duration

func (p *positiveDuration) String() string { return time.Duration(*p).String() }
func (p *positiveDuration) Type() string   { return "duration" }
func (p *positiveDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("want a duration above zero, such as 30s or 5m")
	}
	*p = positiveDuration(d)
	return nil
}

// textWriter is what a command prints: as text, or with -o json as JSON.
type textWriter interface{ WriteText(io.Writer) error }

// printAs prints v as JSON when format is json, else as its text.
func printAs(w io.Writer, format string, v textWriter) error {
	if format == "json" {
		return printJSON(w, v)
	}
	return v.WriteText(w)
}
