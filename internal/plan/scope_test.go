package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/sample"
)

// TestScanScopeOfThirdpartyBuild: a third-party-only plan's scan step
// ships what the recipe says the BE takes from the install (its inputs and
// its command say so, so dorisarm scan repeats the gate); a BE/FE plan's
// scan ships every file, as before.
func TestScanScopeOfThirdpartyBuild(t *testing.T) {
	f := load(t, "")
	ships := f.Recipe.Ships.Thirdparty
	if len(ships) == 0 {
		t.Fatal("the sample's recipe ships nothing from its install")
	}
	for _, target := range []string{"kunpeng920", "graviton3"} {
		cell, tc := f.Toolchain(t, target, "")
		p, err := Make(Inputs{Matrix: f.Matrix, Cell: cell, Recipe: f.Recipe, Tree: f.Tree, Version: sample.Version, Series: f.Series,
			Toolchain: tc, Lock: f.Lock, SysrootWaiver: "plan unit test", Packages: []string{"openssl"}})
		if err != nil {
			t.Fatal(err)
		}
		s := p.Step("scan")
		if s == nil || s.Inputs.Scan == nil || !slices.Equal(s.Inputs.Scan.Ships, ships) {
			t.Fatalf("%s: --packages scan step %+v, want ships %v", target, s, ships)
		}
		want := "dorisarm scan --target " + target + " --ship " + strings.Join(ships, " --ship ") + " " + OUT
		if got := s.Describe(); got != want {
			t.Errorf("%s: scan step says %q, want %q", target, got, want)
		}
		full := f.plan(t, target, "")
		if s := full.Step("scan"); s.Inputs.Scan != nil || s.Describe() != "dorisarm scan --target "+target+" "+OUT {
			t.Errorf("%s: a BE/FE plan's scan is scoped: %+v", target, s)
		}
	}
}
