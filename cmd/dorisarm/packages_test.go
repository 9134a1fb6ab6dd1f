package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/pkgstatus"
)

// TestPackagesOfTheSample runs `dorisarm packages -o json` on third-party
// builds of the bundled sample, which every clone has (the tests on real
// Doris packages need ../shared/corpus), so its JSON is checked for nulls
// on every full run: two targets built, then a partial build with a
// package that fails merged with the earlier table (--previous).
func TestPackagesOfTheSample(t *testing.T) {
	slow(t, "cross-builds the sample's third-party packages")
	needTool(t, "aarch64-linux-gnu-gcc", "make")
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	// gcc and no sysroot: the Debian archive need not be reachable.
	common := []string{"--recipe", "recipes/minidoris.yaml", "--compiler", "gcc", "--waive-sysroot", "testing the package table",
		"--packages", "bitshuffle,minilz,simdprobe", "--keep-going", "--cache", cache}
	build := func(source, targets, out string) (string, int) {
		args := append([]string{"build", "--source", source, "--target", targets, "--out", out}, common...)
		_, errOut, code := run(t, args...)
		return errOut, code
	}
	out := filepath.Join(dir, "out")
	if errOut, code := build("examples/minidoris", "kunpeng920,graviton3", out); code != 0 {
		t.Fatalf("build: exit %d\n%s", code, errOut)
	}
	dirs := []string{filepath.Join(out, "2.1.8", "kunpeng920"), filepath.Join(out, "2.1.8", "graviton3")}
	stdout, errOut, code := run(t, append([]string{"packages", "--feature", "sve", "-o", "json"}, dirs...)...)
	if code != 0 {
		t.Fatalf("packages: exit %d\n%s", code, errOut)
	}
	var table pkgstatus.Table
	if err := json.Unmarshal([]byte(stdout), &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 3 || len(table.Targets) != 2 {
		t.Fatalf("packages: %d rows for %v, want BITSHUFFLE, MINILZ and SIMDPROBE on two targets:\n%s", len(table.Rows), table.Targets, stdout)
	}
	for _, row := range table.Rows {
		for _, target := range []string{"kunpeng920", "graviton3"} {
			r := row.Results[target]
			if r == nil || r.Status != pkgstatus.Built || !r.Scanned || r.ELF == 0 || r.Foreign != 0 {
				t.Errorf("%s on %s: %+v, want built and scanned, with ELF objects for the target only", row.Package, target, r)
				continue
			}
			// simdprobe tunes itself to the CPU it is built for: SVE on
			// Graviton3 only.
			if sve := r.Features["sve"]; (row.Package == "SIMDPROBE" && target == "graviton3") != (sve > 0) {
				t.Errorf("%s on %s: %d SVE instructions", row.Package, target, sve)
			}
		}
	}
	prev := filepath.Join(dir, "packages.json")
	if err := os.WriteFile(prev, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}

	// A copy of the sample whose minilz fails: the partial build's table,
	// with what it did not try taken from the earlier one.
	bad := filepath.Join(dir, "bad")
	copyDir(t, filepath.Join(repo, "examples", "minidoris"), bad)
	editFile(t, filepath.Join(bad, "thirdparty", "build-thirdparty.sh"), "build_minilz() {\n",
		"build_minilz() {\n    echo \"minilz: broken on purpose\" >&2; exit 3\n")
	if errOut, code := build(bad, "kunpeng920", filepath.Join(dir, "out2")); code != 1 {
		t.Fatalf("build of the broken sample: exit %d, want 1\n%s", code, errOut)
	}
	partial := filepath.Join(dir, "out2", "2.1.8", "kunpeng920.partial")
	stdout, errOut, code = run(t, "packages", "--previous", prev, "-o", "json", partial)
	if code != 0 {
		t.Fatalf("packages --previous: exit %d\n%s", code, errOut)
	}
	table = pkgstatus.Table{}
	if err := json.Unmarshal([]byte(stdout), &table); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]*pkgstatus.Result{}
	for _, row := range table.Rows {
		got[row.Package] = row.Results
	}
	if m := got["MINILZ"]["kunpeng920"]; m == nil || m.Status != pkgstatus.Failed || m.Step != "thirdparty:MINILZ" || !strings.Contains(m.Cause, "broken on purpose") {
		t.Errorf("MINILZ on kunpeng920: %+v, want failed in thirdparty:MINILZ", m)
	}
	if b := got["BITSHUFFLE"]["kunpeng920"]; b == nil || b.Status != pkgstatus.Built || b.Earlier {
		t.Errorf("BITSHUFFLE on kunpeng920: %+v, want built by the partial build", b)
	}
	if s := got["SIMDPROBE"]["graviton3"]; s == nil || s.Status != pkgstatus.Built || !s.Earlier || s.Features["sve"] == 0 {
		t.Errorf("SIMDPROBE on graviton3: %+v, want the earlier table's result, with its SVE count", s)
	}
}
