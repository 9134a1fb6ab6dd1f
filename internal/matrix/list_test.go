package matrix

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestListAndWriteTable(t *testing.T) {
	m := loadRepoMatrix(t)
	list := m.List()
	cells := m.Cells()
	if len(list) != len(cells) {
		t.Fatalf("List has %d cells, Cells %d", len(list), len(cells))
	}
	var b bytes.Buffer
	m.WriteTable(&b)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(cells)+2 {
		t.Fatalf("table has %d lines, want header + %d cells + summary:\n%s", len(lines), len(cells), b.String())
	}
	if f := strings.Fields(lines[0]); f[0] != "CELL" || f[len(f)-1] != "QEMU" {
		t.Errorf("header = %q", lines[0])
	}
	sawLTO, sawPGO := false, false
	for i, c := range cells {
		l := list[i]
		if l.Cell != c.Name() || l.Target != c.Target.Name || l.PageSize != c.PageSize() || l.Glibc != c.OS.Glibc {
			t.Errorf("List()[%d] = %+v, does not describe cell %s", i, l, c.Name())
		}
		f := strings.Fields(lines[i+1])
		if f[0] != c.Name() || f[4] != fmt.Sprintf("%dK", c.PageSize()/1024) {
			t.Errorf("row %d = %q, want cell %s with page %dK", i, lines[i+1], c.Name(), c.PageSize()/1024)
		}
		wantPGO, wantLTO := "-", "-"
		if c.Target.PGO {
			wantPGO, sawPGO = "yes", true
		}
		if len(c.Target.LTO) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(c.Target.LTO)) { // clang, gcc
				parts = append(parts, k+":"+c.Target.LTO[k])
			}
			wantLTO, sawLTO = strings.Join(parts, ","), true
		}
		if f[7] != wantPGO || f[8] != wantLTO {
			t.Errorf("row %s: PGO %q LTO %q, want %q %q", c.Name(), f[7], f[8], wantPGO, wantLTO)
		}
	}
	if !sawLTO || !sawPGO {
		t.Errorf("the repository matrix has no PGO (%v) or LTO (%v) target: the test proves less than it says", sawPGO, sawLTO)
	}
	want := fmt.Sprintf("%d cells; %s is valid (%s)", len(cells), m.File, m.Digest[:19])
	if lines[len(lines)-1] != want {
		t.Errorf("last line = %q, want %q", lines[len(lines)-1], want)
	}
}

func TestLTOString(t *testing.T) {
	for _, c := range []struct {
		in   map[string]string
		want string
	}{
		{nil, "-"},
		{map[string]string{"gcc": "auto"}, "gcc:auto"},
		{map[string]string{"gcc": "auto", "clang": "thin"}, "clang:thin,gcc:auto"},
	} {
		if got := ltoString(c.in); got != c.want {
			t.Errorf("ltoString(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
