// Package golden compares what a test rendered with a file under testdata/
// and, with go test -update, rewrites that file instead.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with what the tests render")

// Check compares got with the file at path. With -update it writes got to
// path (creating testdata/) and passes.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run go test -run '%s' -update to write it", err, t.Name())
	}
	if d := Diff(want, got); d != "" {
		t.Errorf("%s differs from what the test rendered (if the change is intended, run go test -run '%s' -update and review the diff):\n%s", path, t.Name(), d)
	}
}

// Diff describes the first line where got differs from want, with the
// lines around it; "" when they are equal.
func Diff(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	w, g := lines(want), lines(got)
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d (golden %d lines, rendered %d lines)\n", i+1, len(w), len(g))
	if i > 0 {
		fmt.Fprintf(&b, "  both:   %q\n", w[i-1])
	}
	fmt.Fprintf(&b, "  golden: %s\n", at(w, i))
	fmt.Fprintf(&b, "  got:    %s\n", at(g, i))
	return b.String()
}

// lines splits on \n, keeping a final line without one apart from an
// empty one, so that a missing trailing newline shows as a difference.
func lines(b []byte) []string {
	s := strings.SplitAfter(string(b), "\n")
	if len(s) > 0 && s[len(s)-1] == "" {
		s = s[:len(s)-1]
	}
	return s
}

func at(ls []string, i int) string {
	if i >= len(ls) {
		return "(end of file)"
	}
	return fmt.Sprintf("%q", ls[i])
}
