package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
)

// Every JSON a command prints (-o json, sarif) holds lists as [] and
// objects as {} or not at all, never null: runIn checks each such output a
// test produces, and TestMain checks, after a full run, that every command
// with a JSON output was run with it by some test.

// jsonRan holds the command paths run with a JSON output.
var jsonRan sync.Map

// outputFormat is the --output/-o/--format value in args, or "".
func outputFormat(args []string) string {
	for i, a := range args {
		for _, f := range []string{"-o", "--output", "--format"} {
			switch {
			case a == f && i+1 < len(args):
				return args[i+1]
			case strings.HasPrefix(a, f+"="):
				return strings.TrimPrefix(a, f+"=")
			}
		}
		if strings.HasPrefix(a, "-o") && len(a) > 2 && a[2] != '-' {
			return a[2:]
		}
	}
	return ""
}

// checkJSONOutput fails t when a JSON output of args holds a null.
func checkJSONOutput(t *testing.T, args []string, stdout string) {
	t.Helper()
	if f := outputFormat(args); f != "json" && f != "sarif" {
		return
	}
	c, _, err := newRoot().Find(args)
	if err != nil || c == nil {
		return
	}
	jsonRan.Store(c.CommandPath(), true)
	dec := json.NewDecoder(strings.NewReader(stdout))
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			return
		} else if err != nil {
			return // not JSON (a failure's text): other checks judge it
		}
		if p := nullPath(v, "$"); p != "" {
			t.Errorf("dorisarm %s: %s is null in its JSON output; lists are [] and absent objects are left out", strings.Join(args, " "), p)
		}
	}
}

// nullPath is the path of the first null in v, or "".
func nullPath(v any, at string) string {
	switch x := v.(type) {
	case nil:
		return at
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p := nullPath(x[k], at+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range x {
			if p := nullPath(e, fmt.Sprintf("%s[%d]", at, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// jsonCommands are the command paths whose --output takes json or sarif.
func jsonCommands() []string {
	var out []string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.Flags().Lookup("output"); f != nil {
			formats := f.Annotations["formats"]
			if slices.Contains(formats, "json") || slices.Contains(formats, "sarif") {
				out = append(out, c.CommandPath())
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot())
	sort.Strings(out)
	return out
}

// uncheckedJSON lists the JSON commands no test of a full run ran with a
// JSON output (empty unless the run was complete: no -run, no -short).
func uncheckedJSON() []string {
	if testing.Short() {
		return nil
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		return nil
	}
	var missing []string
	for _, c := range jsonCommands() {
		if _, ok := jsonRan.Load(c); !ok {
			missing = append(missing, c)
		}
	}
	return missing
}

func TestNullPath(t *testing.T) {
	var v any
	json.Unmarshal([]byte(`{"a":[1,{"b":null}],"c":{}}`), &v)
	if p := nullPath(v, "$"); p != "$.a[1].b" {
		t.Errorf("nullPath = %q", p)
	}
	json.Unmarshal([]byte(`{"a":[],"c":{},"d":""}`), &v)
	if p := nullPath(v, "$"); p != "" {
		t.Errorf("nullPath = %q", p)
	}
	for _, c := range []struct {
		args []string
		want string
	}{{[]string{"scan", "-o", "json", "x"}, "json"}, {[]string{"plan", "--output=json"}, "json"}, {[]string{"scan", "-osarif"}, "sarif"}, {[]string{"build", "--out", "x"}, ""}} {
		if got := outputFormat(c.args); got != c.want {
			t.Errorf("outputFormat(%q) = %q", c.args, got)
		}
	}
}

// A scan with nothing to report: its lists are empty, not null. The tree
// holds a jar of Java classes alone (judged: it has no native library to
// miss), beside a text file (a tree of text alone is nothing checked, exit
// 2: TestScanNothingToJudgeExitsTwo).
func TestScanJSONEmptyLists(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var jar bytes.Buffer
	zw := zip.NewWriter(&jar)
	for _, name := range []string{"META-INF/MANIFEST.MF", "org/apache/doris/Main.class"} {
		w, _ := zw.Create(name)
		w.Write([]byte("Manifest-Version: 1.0\n"))
	}
	zw.Close()
	if err := os.WriteFile(filepath.Join(dir, "fe.jar"), jar.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"json", "sarif"} {
		stdout, errOut, code := run(t, "scan", "-o", f, dir)
		if code != 0 || !strings.Contains(stdout, "[]") {
			t.Errorf("scan -o %s of a jar and a text file: exit %d\n%s%s", f, code, stdout, errOut)
		}
	}
}
