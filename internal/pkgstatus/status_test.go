package pkgstatus

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/scan"
)

// publish writes a build directory holding only rec.
func publish(t *testing.T, rec *build.Record) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), rec.Cell.Target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, build.RecordFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func record(target, isa, source string) *build.Record {
	return &build.Record{Schema: 1, Cell: plan.CellInfo{Doris: "2.1.7-rc01", Target: target, ISA: isa}, Source: plan.SourceInfo{Digest: source},
		Packages: []build.Package{{Entry: "ZLIB", Version: "1.2.11", Archive: "zlib-1.2.11.tar.gz", MD5: "aa"},
			{Entry: "PROTOBUF", Version: "21.11", Archive: "protobuf-all-21.11.tar.gz", MD5: "bb"},
			{Entry: "BRPC", Version: "1.4.0", Archive: "brpc-1.4.0.tar.gz", MD5: "cc"}},
		Outputs: []build.OutputFile{}}
}

func TestLoadTabulatesBuiltFailedSkipped(t *testing.T) {
	g3 := record("graviton3", "aarch64", "sha256:src")
	g3.Compiler.Name, g3.Compiler.Version = "clang", "16.0.6"
	g3.Steps = []build.StepRecord{{ID: "unpack:ZLIB", Seconds: 1}, {ID: "thirdparty:ZLIB", Seconds: 9}, {ID: "thirdparty:PROTOBUF", Seconds: 0.5, RanSeconds: 100, Cached: true},
		{ID: "thirdparty:BRPC", Seconds: 0.2, Cached: true}} // an older entry: no run time
	g3.PackageScans = map[string]*build.PackageScan{
		"ZLIB":     {Files: 10, ELF: 3, Machines: map[string]int{"aarch64": 2, "x86_64": 1}, Features: map[string]int{"sve": 7, "lse": 2}},
		"PROTOBUF": {Files: 300, ELF: 4, Machines: map[string]int{"aarch64": 4}, Violations: 2},
	}
	g3.PackageFlags = map[string]*scan.FlagSummary{"ZLIB": {Objects: 3, AtTarget: 1}}
	k := record("kunpeng920", "aarch64", "sha256:src")
	k.Steps = []build.StepRecord{{ID: "thirdparty:ZLIB", Seconds: 8}}
	// kunpeng920's ZLIB came from a cache entry without a scan.
	k.Partial = &build.Partial{Failed: []string{"PROTOBUF"}, Skipped: []string{"BRPC (needs PROTOBUF)"},
		Errors: []build.PackageError{{Package: "PROTOBUF", Step: "thirdparty:PROTOBUF", Error: "exit status 2",
			First: []string{"line 9: gzip_stream.h:50:10: fatal error: 'zlib.h' file not found | x"}}}}
	tab, err := Load([]string{publish(t, g3), publish(t, k)}, Options{Features: []string{"sve"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]*Result{}
	for _, r := range tab.Rows {
		got[r.Package] = r.Results
	}
	if z := got["ZLIB"]["graviton3"]; z.Status != Built || z.Seconds != 10 || z.Foreign != 1 || z.Features["sve"] != 7 || z.Features["lse"] != 0 || z.AtTarget != 1 || z.FlagObjects != 3 {
		t.Errorf("ZLIB on graviton3: %+v", z)
	}
	if p := got["PROTOBUF"]["graviton3"]; p.Status != Built || !p.Cached || p.Violations != 2 || p.Seconds != 100 {
		t.Errorf("PROTOBUF on graviton3: %+v", p)
	}
	if p := got["PROTOBUF"]["kunpeng920"]; p.Status != Failed || p.Step != "thirdparty:PROTOBUF" || !strings.Contains(p.Cause, "'zlib.h' file not found") {
		t.Errorf("PROTOBUF on kunpeng920: %+v", p)
	}
	if b := got["BRPC"]["kunpeng920"]; b.Status != Skipped || b.Cause != "PROTOBUF" {
		t.Errorf("BRPC on kunpeng920: %+v", b)
	}
	var md bytes.Buffer
	if err := tab.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| BRPC | 1.4.0 | built (from the cache, its build time not recorded), install not scanned (built by a dorisarm without package scans: rebuild with an empty --cache) | not built: needs PROTOBUF |",
		"| PROTOBUF | 21.11 | built 100 s (from the cache), 300 files, 4 ELF, 2 scan findings |",
		"| ZLIB | 1.2.11 | built 10 s, 10 files, 3 ELF, **1 foreign**, sve 7, 100% at target flags, scan clean |",
		`'zlib.h' file not found \| x |`, // a pipe in a cause does not split the cell
		"| package | version | graviton3 (clang 16.0.6) | kunpeng920 |",
		"| built 8 s, install not scanned (built by a dorisarm without package scans: rebuild with an empty --cache) |",
		"graviton3: 3 of 3 packages built. kunpeng920: 1 of 3 packages built.",
		"| PROTOBUF | protobuf-all-21.11.tar.gz | bb | — |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// Two builds of one target merge: what one built counts, by the build that
// ran it, not the one that restored it from the cache.
func TestLoadMergesBuildsOfOneTarget(t *testing.T) {
	a := record("kunpeng920", "aarch64", "sha256:one")
	a.Steps = []build.StepRecord{{ID: "thirdparty:ZLIB", Seconds: 30}}
	a.Partial = &build.Partial{Failed: []string{"PROTOBUF"}, Skipped: []string{"BRPC (needs PROTOBUF)"}}
	b := record("kunpeng920", "aarch64", "sha256:two") // a tree copy with other MD5 lines
	b.Steps = []build.StepRecord{{ID: "thirdparty:ZLIB", Seconds: 0.5, Cached: true}, {ID: "thirdparty:PROTOBUF", Seconds: 60}}
	b.Partial = &build.Partial{Skipped: []string{"BRPC (needs GFLAGS)"}}
	tab, err := Load([]string{publish(t, a), publish(t, b)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*Result{}
	for _, r := range tab.Rows {
		got[r.Package] = r.Results["kunpeng920"]
	}
	if z := got["ZLIB"]; z.Seconds != 30 || z.Cached {
		t.Errorf("ZLIB: %+v, want the 30 s build", z)
	}
	if p := got["PROTOBUF"]; p.Status != Built || p.Seconds != 60 {
		t.Errorf("PROTOBUF: %+v, want built", p)
	}
	if r := got["BRPC"]; r.Status != Skipped {
		t.Errorf("BRPC: %+v", r)
	}
	if len(tab.Targets) != 1 || strings.Join(tab.Sources, " ") != "sha256:one sha256:two" {
		t.Errorf("targets %v, sources %v", tab.Targets, tab.Sources)
	}
}

func TestLoadRefusesMixedInputs(t *testing.T) {
	a := publish(t, record("kunpeng920", "aarch64", "sha256:one"))
	for name, c := range map[string]struct {
		dirs []string
		want string
	}{
		"none": {nil, "no build directory"},
		"other version": {[]string{a, publish(t, func() *build.Record {
			r := record("graviton3", "aarch64", "sha256:one")
			r.Cell.Doris = "3.0.2"
			return r
		}())}, "tabulate one Doris version at a time"},
		"other compiler": {[]string{a, publish(t, func() *build.Record {
			r := record("kunpeng920", "aarch64", "sha256:one")
			r.Compiler.Name = "gcc"
			return r
		}())}, "tabulate one compiler per target"},
		"no record": {[]string{t.TempDir()}, "has no build record"},
	} {
		if _, err := Load(c.dirs, Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	// A file the record does not list: the directory is not what was built.
	extra := publish(t, record("graviton3", "aarch64", "sha256:one"))
	os.WriteFile(filepath.Join(extra, "planted"), []byte("x"), 0o644)
	if _, err := Load([]string{extra}, Options{}); err == nil || !strings.Contains(err.Error(), "planted is not in the build record") {
		t.Errorf("planted file: %v", err)
	}
	// Another archive under the same entry on two targets.
	other := record("graviton3", "aarch64", "sha256:one")
	other.Packages[0].MD5 = "zz"
	if _, err := Load([]string{a, publish(t, other)}, Options{}); err == nil || !strings.Contains(err.Error(), "tabulate builds of the same archives") {
		t.Errorf("other archive: %v", err)
	}
}

// An entry with no build step of its own (its archive unpacked for another
// package) is "source only", never "built".
func TestSourceOnly(t *testing.T) {
	r := record("kunpeng920", "aarch64", "sha256:one")
	r.Packages = append(r.Packages, build.Package{Entry: "RAGEL", Version: "6.10", Archive: "ragel-6.10.tar.gz", MD5: "dd"})
	r.Steps = []build.StepRecord{{ID: "unpack:RAGEL", Seconds: 2}}
	tab, err := Load([]string{publish(t, r)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range tab.Rows {
		if row.Package == "RAGEL" {
			if res := row.Results["kunpeng920"]; res.Status != SourceOnly || res.text() != "source only (unpacked 2 s; no build step of its own)" {
				t.Errorf("RAGEL: %+v %q", res, res.text())
			}
			return
		}
	}
	t.Error("no RAGEL row")
}

// A run that rebuilds one package on one target merges into the table of
// an earlier run: its cells win, the earlier ones stay, marked.
func TestMergeEarlierTable(t *testing.T) {
	old := record("graviton3", "aarch64", "sha256:old")
	old.Steps = []build.StepRecord{{ID: "thirdparty:ZLIB", Seconds: 33}}
	old.Partial = &build.Partial{Failed: []string{"PROTOBUF"}, Skipped: []string{"BRPC (needs PROTOBUF)"}}
	prevTab, err := Load([]string{publish(t, old)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(prevTab)
	prevPath := filepath.Join(t.TempDir(), "status.json")
	os.WriteFile(prevPath, b, 0o644)
	prev, err := ReadTable(prevPath)
	if err != nil {
		t.Fatal(err)
	}

	now := record("kunpeng920", "aarch64", "sha256:new")
	now.Packages = now.Packages[1:2] // PROTOBUF only
	now.Steps = []build.StepRecord{{ID: "thirdparty:PROTOBUF", Seconds: 314}}
	nowDir := publish(t, now)
	fresh := func() *Table {
		tab, err := Load([]string{nowDir}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	tab := fresh()
	if err := tab.Merge(prev); err != nil {
		t.Fatal(err)
	}
	if strings.Join(tab.Targets, " ") != "graviton3 kunpeng920" || strings.Join(tab.Sources, " ") != "sha256:new sha256:old" {
		t.Fatalf("targets %v, sources %v", tab.Targets, tab.Sources)
	}
	rows := map[string]*Row{}
	for _, r := range tab.Rows {
		rows[r.Package] = r
	}
	if len(rows) != 3 {
		t.Fatalf("rows %v, want ZLIB, PROTOBUF and BRPC", rows)
	}
	if r := rows["PROTOBUF"].Results; r["kunpeng920"].Earlier || r["kunpeng920"].Seconds != 314 || !r["graviton3"].Earlier || r["graviton3"].Status != Failed {
		t.Errorf("PROTOBUF: kunpeng920 %+v, graviton3 %+v", r["kunpeng920"], r["graviton3"])
	}
	if r := rows["ZLIB"].Results; r["kunpeng920"] != nil || !r["graviton3"].Earlier {
		t.Errorf("ZLIB: %+v", r)
	}
	var md bytes.Buffer
	tab.Markdown(&md)
	if !strings.Contains(md.String(), "| PROTOBUF | 21.11 |") {
		t.Errorf("no PROTOBUF row:\n%s", md.String())
	}
	for _, line := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(line, "| PROTOBUF | 21.11 |") && (strings.Count(line, "†") != 1 || !strings.Contains(line, "built 314 s, ") || strings.Contains(line, "314 s †")) {
			t.Errorf("PROTOBUF row %q: want the new cell unmarked and the earlier failure marked", line)
		}
	}
	if !strings.Contains(md.String(), "kunpeng920: 1 of 1 packages built. ") || !strings.Contains(md.String(), "† from the earlier table") {
		t.Errorf("markdown:\n%s", md.String())
	}

	// Other bytes for one package, another compiler, another Doris: refused.
	bad := *prev
	bad.Rows = []*Row{{Package: "PROTOBUF", MD5: "ff", Results: map[string]*Result{"graviton3": {Status: Built}}}}
	if err := fresh().Merge(&bad); err == nil || !strings.Contains(err.Error(), "md5 ff") || !strings.Contains(err.Error(), "graviton3") {
		t.Errorf("other bytes, an earlier cell kept: %v", err)
	}
	// Other bytes, but this run rebuilt it wherever the earlier table had it.
	replaced := *prev
	replaced.Targets = []string{"kunpeng920"}
	replaced.Rows = []*Row{{Package: "PROTOBUF", MD5: "ff", Results: map[string]*Result{"kunpeng920": {Status: Failed}}}}
	if err := fresh().Merge(&replaced); err != nil {
		t.Errorf("other bytes, every earlier cell rebuilt: %v", err)
	}
	bad = *prev
	bad.Compilers = map[string]string{"kunpeng920": "gcc 12"}
	bad.Targets = []string{"kunpeng920"}
	if err := fresh().Merge(&bad); err == nil || !strings.Contains(err.Error(), "gcc 12") {
		t.Errorf("other compiler: %v", err)
	}
	bad = *prev
	bad.Doris = "3.0.2"
	if err := fresh().Merge(&bad); err == nil || !strings.Contains(err.Error(), "3.0.2") {
		t.Errorf("other Doris: %v", err)
	}
	// Not a table: named, not a panic.
	for name, body := range map[string]string{"unknown field": `{"doris":"x","targets":["a"],"extra":1}`, "no targets": `{"doris":"x"}`, "stray target": `{"doris":"x","targets":["a"],"rows":[{"package":"P","results":{"b":{}}}]}`} {
		p := filepath.Join(t.TempDir(), "t.json")
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := ReadTable(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// dorisarm packages reads a build only as its record lists it: a link
// planted in the published build after the build is refused, naming it.
func TestLoadRefusesPlantedLink(t *testing.T) {
	dir := publish(t, record("graviton3", "aarch64", "sha256:src"))
	if _, err := Load([]string{dir}, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/shadow", filepath.Join(dir, "libplanted.so")); err != nil {
		t.Fatal(err)
	}
	_, err := Load([]string{dir}, Options{})
	if err == nil || !strings.Contains(err.Error(), "libplanted.so (a link to /etc/shadow) is not in the build record") {
		t.Errorf("got %v", err)
	}
}

// TestNotUsed: a package the target's product does not use is a row of its
// own, saying why and where, not counted as tried; built on another target
// (or named by --packages there), it shows as built.
func TestNotUsed(t *testing.T) {
	hdfs3 := plan.NotUsedPackage{Entry: "HDFS3", Version: "2.3.9", Archive: "libhdfs3.tar.gz", MD5: "ee",
		Why: "the BE links libhdfs", Where: "be/CMakeLists.txt:494"}
	k := record("kunpeng920", "aarch64", "sha256:one")
	k.NotUsed = []plan.NotUsedPackage{hdfs3}
	g := record("graviton3", "aarch64", "sha256:one")
	g.Packages = append(g.Packages, build.Package{Entry: "HDFS3", Version: "2.3.9", Archive: "libhdfs3.tar.gz", MD5: "ee"})
	g.Steps = []build.StepRecord{{ID: "thirdparty:HDFS3", Seconds: 30}}
	g.NotUsed = []plan.NotUsedPackage{hdfs3}
	tab, err := Load([]string{publish(t, k), publish(t, g)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var row *Row
	for _, r := range tab.Rows {
		if r.Package == "HDFS3" {
			row = r
		}
	}
	if row == nil {
		t.Fatal("no HDFS3 row")
	}
	if res := row.Results["kunpeng920"]; res == nil || res.Status != NotUsed ||
		res.text() != "not used on aarch64: the BE links libhdfs (be/CMakeLists.txt:494)" {
		t.Errorf("kunpeng920: %+v", res)
	}
	if res := row.Results["graviton3"]; res == nil || res.Status != Built {
		t.Errorf("graviton3, where it was built: %+v", res)
	}
	var md bytes.Buffer
	if err := tab.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kunpeng920: 0 of 3 packages built (1 more not used there).", "graviton3: 1 of 4 packages built."} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the table does not say %q:\n%s", want, md.String())
		}
	}
}
