package about

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/datafs"
)

func TestReadBuild(t *testing.T) {
	if b := ReadBuild("v9.9.9"); b.Version != "v9.9.9" || b.Go == "" {
		t.Errorf("linked version: %+v", b)
	}
	// A test binary has no module version: "dev".
	if b := ReadBuild(""); b.Version != "dev" {
		t.Errorf("unlinked version: %+v", b)
	}
}

func TestWriteText(t *testing.T) {
	n := 3
	r := Report{Build: Build{Version: "v1.2.3", Go: "go1.26", Commit: "abc", Modified: true}, Data: &datafs.Info{
		Source:  "mixed",
		Matrix:  datafs.Item{Name: "matrix.yaml", Path: "/x/matrix.yaml", SHA256: "m1"},
		Recipes: []datafs.Item{{Name: "recipes/doris.yaml", Path: "embedded:recipes/doris.yaml", SHA256: "r1"}},
		Patches: []datafs.Item{{Name: "patches", Path: "embedded:patches", SHA256: "p1", Patches: &n}},
		Sample:  "embedded:examples/minidoris",
	}}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"dorisarm v1.2.3 (go1.26, commit abc (modified))\n",
		"data: mixed\n",
		"  matrix.yaml",
		"embedded:recipes/doris.yaml  r1\n",
		"  patches (3 patches)",
		"  sample",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}
