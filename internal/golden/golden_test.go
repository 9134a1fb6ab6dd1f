package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiffNamesTheFirstDifferentLine(t *testing.T) {
	for _, c := range []struct {
		want, got string
		has       []string
	}{
		{"a\nb\nc\n", "a\nb\nc\n", nil},
		{"a\nb\nc\n", "a\nB\nc\n", []string{"line 2", `both:   "a\n"`, `golden: "b\n"`, `got:    "B\n"`}},
		{"a\nb\n", "a\nb\nc\n", []string{"line 3", "golden 2 lines, rendered 3 lines", "golden: (end of file)", `got:    "c\n"`}},
		{"a\nb\n", "a\nb", []string{"line 2", `golden: "b\n"`, `got:    "b"`}}, // a lost final newline
		{"x\n", "", []string{"line 1", "rendered 0 lines", "got:    (end of file)"}},
	} {
		d := Diff([]byte(c.want), []byte(c.got))
		if (d == "") != (c.has == nil) {
			t.Errorf("Diff(%q, %q) = %q", c.want, c.got, d)
		}
		for _, s := range c.has {
			if !strings.Contains(d, s) {
				t.Errorf("Diff(%q, %q) lacks %q:\n%s", c.want, c.got, s, d)
			}
		}
	}
}

// fakeT records what Check reports instead of failing the real test.
type fakeT struct {
	testing.TB
	errs, fatals []string
}

func (f *fakeT) Helper()      {}
func (f *fakeT) Name() string { return "TestX" }
func (f *fakeT) Errorf(format string, a ...any) {
	f.errs = append(f.errs, sprintf(format, a...))
}
func (f *fakeT) Fatalf(format string, a ...any) {
	f.fatals = append(f.fatals, sprintf(format, a...))
}
func (f *fakeT) Logf(string, ...any) {}

func TestCheckAndUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "x.golden")
	ft := &fakeT{TB: t}
	Check(ft, path, []byte("one\n"))
	if len(ft.fatals) != 1 || !strings.Contains(ft.fatals[0], "-update") {
		t.Errorf("a missing golden file: %v", ft.fatals)
	}
	*update = true
	Check(ft, path, []byte("one\ntwo\n"))
	*update = false
	if b, err := os.ReadFile(path); err != nil || string(b) != "one\ntwo\n" {
		t.Fatalf("-update wrote %q, %v", b, err)
	}
	ft = &fakeT{TB: t}
	Check(ft, path, []byte("one\ntwo\n"))
	if len(ft.errs)+len(ft.fatals) != 0 {
		t.Errorf("equal output fails: %v %v", ft.errs, ft.fatals)
	}
	Check(ft, path, []byte("one\n2\n"))
	if len(ft.errs) != 1 || !strings.Contains(ft.errs[0], "line 2") || !strings.Contains(ft.errs[0], "x.golden") {
		t.Errorf("a changed line: %v", ft.errs)
	}
}

var sprintf = fmt.Sprintf
