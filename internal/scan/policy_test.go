package scan

import (
	"slices"
	"testing"
)

// TestPolicyMatchesCells: a target's policy is what every build cell of
// that target says (CPU, extensions, OS, glibc, page size), whatever the
// Doris series, for every target of matrix.yaml.
func TestPolicyMatchesCells(t *testing.T) {
	policy(t, "kunpeng920") // loads mtx
	cells := mtx.Cells()
	if len(cells) == 0 {
		t.Fatal("matrix.yaml has no cells")
	}
	for _, c := range cells {
		p, err := PolicyFor(mtx, c.Target.Name)
		if err != nil {
			t.Fatal(err)
		}
		if p.ISA != c.ISA.Name || p.Machine != c.ISA.ELFMachine || p.CPU != c.CPU.Name || !slices.Equal(p.Allowed, c.Allowed) ||
			p.OS != c.OS.ID || p.GlibcMax != c.OS.Glibc || p.GlibcxxMax != c.OS.Glibcxx || p.PageSize != c.PageSize() || p.OpenSSL != c.Target.OpenSSL {
			t.Errorf("%s: policy %+v disagrees with the cell (cpu %s, allowed %v, os %s, page %d)", c.Name(), p, c.CPU.Name, c.Allowed, c.OS.ID, c.PageSize())
		}
	}
	if _, err := PolicyFor(mtx, "no-such-target"); err == nil {
		t.Error("an unknown target has a policy")
	}
}
