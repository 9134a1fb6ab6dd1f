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

// TestSimulatePartsOfAPackageList: a partial build's record lacks the
// package that failed, which its collect step still needs; merged with the
// build that made that package it is one profile, as before each record
// was checked alone.
func TestSimulatePartsOfAPackageList(t *testing.T) {
	write := func(name, rec string) string {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, build.RecordFile), []byte(rec), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	partial := write("kunpeng920.partial", `{"cell":{"doris":"2.1.7","target":"kunpeng920"},"jobs":2,"partial":{"failed":["LIBDIVIDE"]},"steps":[`+
		`{"id":"thirdparty:ARROW","seconds":480,"cpu_seconds":600},`+
		`{"id":"collect","seconds":4,"cpu_seconds":1,"needs":["thirdparty:ARROW","thirdparty:LIBDIVIDE"]}]}`)
	later := write("kunpeng920", `{"cell":{"doris":"2.1.7","target":"kunpeng920"},"jobs":2,"steps":[`+
		`{"id":"thirdparty:LIBDIVIDE","seconds":2,"cpu_seconds":1},`+
		`{"id":"collect","seconds":4,"cpu_seconds":1,"cached":true,"needs":["thirdparty:LIBDIVIDE"]}]}`)
	steps, _, err := loadProfiles([]string{partial, later})
	if err != nil || len(steps) != 3 {
		t.Fatalf("a partial build and the build of what it lacked: %v, %v", steps, err)
	}
	if _, _, err := loadProfiles([]string{partial}); err == nil || !strings.Contains(err.Error(), "do not merge into one profile") || !strings.Contains(err.Error(), "thirdparty:LIBDIVIDE") {
		t.Errorf("the partial build alone: %v, want the missing step named", err)
	}
	// A complete build's record is checked alone: its missing need names it.
	whole := write("whole", `{"cell":{"doris":"2.1.7","target":"x"},"jobs":2,"steps":[{"id":"a","seconds":1},{"id":"b","seconds":1,"needs":["a","z"]}]}`)
	if _, _, err := loadProfiles([]string{whole}); err == nil || !strings.Contains(err.Error(), filepath.Join(whole, build.RecordFile)+": step x/b needs x/z") {
		t.Errorf("a complete record with a missing need: %v, want its file named", err)
	}
}
