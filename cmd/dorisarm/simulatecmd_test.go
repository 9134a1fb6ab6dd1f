package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/build"
)

// TestSimulateKeepsVersionsApart: records of one target and two Doris
// versions are two builds' steps, not one step each (3.0's 5,000 s BE
// build was dropped as a duplicate of 2.1's); records of one version keep
// the short <target>/ names and merge.
func TestSimulateKeepsVersionsApart(t *testing.T) {
	record := func(doris string, be float64) string {
		dir := filepath.Join(t.TempDir(), doris, "kunpeng920")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		rec := `{"cell":{"doris":"` + doris + `","target":"kunpeng920"},"jobs":2,"steps":[` +
			`{"id":"thirdparty:ZLIB","seconds":20,"cpu_seconds":30},` +
			`{"id":"build:be","seconds":` + strconv.FormatFloat(be, 'f', -1, 64) + `,"cpu_seconds":1,"needs":["thirdparty:ZLIB"]}]}`
		if err := os.WriteFile(filepath.Join(dir, build.RecordFile), []byte(rec), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a, b := record("2.1.7", 100), record("3.0.3", 5000)
	steps, builds, err := loadProfiles([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var sum float64
	for _, s := range steps {
		ids = append(ids, s.ID)
		sum += s.Wall
	}
	if len(steps) != 4 || sum != 5140 || !strings.HasPrefix(ids[0], "kunpeng920@2.1.7/") {
		t.Errorf("two versions: steps %v (wall %v s), builds %v: want four steps, 5140 s, named by target and version", ids, sum, builds)
	}
	steps, _, err = loadProfiles([]string{a, a})
	if err != nil || len(steps) != 2 || !strings.HasPrefix(steps[0].ID, "kunpeng920/") {
		t.Errorf("one version twice: %v, %v: want its two steps, named by target", steps, err)
	}
}
