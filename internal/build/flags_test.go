package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/plan"
)

// The record holds the flag read-back of the plan's packages only: the
// work tree keeps other packages' from earlier builds of the cell, and a
// damaged one is left out with a warning.
func TestLoadFlagsOnlyThePlansPackages(t *testing.T) {
	work := t.TempDir()
	dir := filepath.Join(work, flagsDir)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "SNAPPY.json"), []byte(`{"requested":"armv8-a+crc","objects":4,"verdicts":{"target":4},"at_target":1}`), 0o644)
	os.WriteFile(filepath.Join(dir, "GLOG.json"), []byte(`{"objects":7}`), 0o644)
	os.WriteFile(filepath.Join(dir, "LZ4.json"), []byte(`{"objects":`), 0o644)
	var warned []string
	r := &runner{work: work, rec: &Record{}, warn: func(s string) { warned = append(warned, s) },
		in: Input{Plan: &plan.Plan{Steps: []plan.Step{
			{ID: "thirdparty:SNAPPY", Kind: plan.KindThirdparty},
			{ID: "thirdparty:LZ4", Kind: plan.KindThirdparty},
			{ID: "thirdparty:ZSTD", Kind: plan.KindThirdparty}, // installed nothing: no file
			{ID: "build:be", Kind: plan.KindBuild},
		}}}}
	r.loadFlags()
	if len(r.rec.PackageFlags) != 1 || r.rec.PackageFlags["SNAPPY"] == nil || r.rec.PackageFlags["SNAPPY"].Objects != 4 {
		t.Errorf("package flags: %+v", r.rec.PackageFlags)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "LZ4") {
		t.Errorf("warnings: %q", warned)
	}
}
