package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/simulate"
)

func needBuildTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"qemu-aarch64", "aarch64-linux-gnu-gcc", "make", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (run scripts/install-deps.sh)", tool)
		}
	}
}

// TestBuildCommand builds the sample for graviton2 through the CLI with the
// real cross compiler and qemu, then checks the published tree, the record,
// the no-op rebuild and cache prune.
func TestBuildCommand(t *testing.T) {
	slow(t, "builds the sample with real cross compilers")
	needBuildTools(t)
	dir := t.TempDir()
	out, cache := filepath.Join(dir, "out"), filepath.Join(dir, "cache")
	// clang: Debian's gcc 12 cannot link for the OS's glibc, and a cold
	// build that finds it out plans again (its fetches then come from the cache).
	stdout, stderr, code := run(t, "build", "--target", "graviton2", "--compiler", "clang", "--out", out, "--cache", cache)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s\n%s", code, stdout, stderr)
	}
	pub := filepath.Join(out, "2.1.8", "graviton2")
	if !strings.Contains(stdout, pub+"  graviton2  ") || !strings.Contains(stdout, "; cache: 0 of ") {
		t.Fatalf("build output:\n%s", stdout)
	}
	var rec struct {
		Cell struct{ Target string }
		Scan struct{ Pass bool }
	}
	b, err := os.ReadFile(filepath.Join(pub, "dorisarm-build.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Cell.Target != "graviton2" {
		t.Fatalf("build record: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(pub, "be", "lib", "doris_be")); err != nil {
		t.Fatal("doris_be not published:", err)
	}
	checkSimulate(t, pub)

	stdout, stderr, code = run(t, "build", "--target", "graviton2", "--compiler", "clang", "--out", out, "--cache", cache)
	if code != 0 || !strings.Contains(stdout, "up to date") {
		t.Fatalf("rebuild: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// The same no-op rebuild as JSON: one entry per target, nothing else on stdout.
	stdout, stderr, code = run(t, "build", "--target", "graviton2", "--compiler", "clang", "--out", out, "--cache", cache, "-o", "json")
	var outs []struct {
		Target, Dir, State string
		CacheSteps         int `json:"cache_steps"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &outs) != nil || len(outs) != 1 ||
		outs[0].Target != "graviton2" || outs[0].Dir != pub || outs[0].State != "up to date" {
		t.Fatalf("rebuild -o json: exit %d\n%s\n%s", code, stdout, stderr)
	}

	stdout, _, code = run(t, "cache", "prune", "--cache", cache, "--max-size", "0")
	if code != 0 || !strings.HasPrefix(stdout, "removed ") || !strings.HasSuffix(strings.TrimSpace(stdout), "; 0 left") || strings.HasPrefix(stdout, "removed 0 ") {
		t.Fatalf("prune: exit %d: %s", code, stdout)
	}
}

func TestBuildBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	allow := filepath.Join(dir, "allow.yaml")
	os.WriteFile(allow, []byte("exceptions:\n  - rule: glibc-version\n    bogus: 1\n"), 0o644)
	// A prebuilt third-party install with a link into the build machine.
	base := filepath.Join(dir, "base")
	os.MkdirAll(filepath.Join(base, "lib"), 0o755)
	os.WriteFile(filepath.Join(base, "lib", "libz.a"), []byte("z"), 0o644)
	os.Symlink("/etc/hostname", filepath.Join(base, "lib", "libhost.so"))
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"build"}, "--target is required"},
		{[]string{"build", "--target", "kunpeng930"}, `unknown target "kunpeng930"`},
		{[]string{"build", "--target", "graviton2", "--compiler", "icc"}, `does not list compiler "icc"`},
		{[]string{"build", "--target", "graviton2", "--allow", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"build", "--target", "graviton2", "--allow", allow}, "allow.yaml:3"},
		{[]string{"build", "--target", "graviton2", "--thirdparty-base", base}, "lib/libhost.so -> /etc/hostname resolves to /etc/hostname, outside the base"},
		{[]string{"build", "--target", "graviton2", "--jobs", "0"}, "--jobs 0: give the build's CPU budget"},
		{[]string{"build", "--target", "graviton2", "--jobs", "-3"}, "--jobs -3"},
		{[]string{"build", "--target", "graviton2", "--packages-at-once", "-1"}, "--packages-at-once -1"},
		{[]string{"build", "--target", "graviton2", "--doris", "2.1.99"}, "--doris 2.1.99: the tree declares Doris 2.1.8"},
	}
	for _, c := range cases {
		args := append(c.args, "--out", filepath.Join(dir, "out"), "--cache", filepath.Join(dir, "cache"))
		_, errOut, code := run(t, args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("a rejected build created the output directory")
	}

	// --cache or --out inside the source tree: refused before anything is
	// copied (a cache inside the tree would copy itself without end).
	tree := filepath.Join(dir, "tree")
	if out, err := exec.Command("cp", "-a", "../../examples/minidoris", tree).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	for _, c := range [][]string{
		{"--out", filepath.Join(dir, "out"), "--cache", filepath.Join(tree, ".cache")},
		{"--out", filepath.Join(tree, "out"), "--cache", filepath.Join(dir, "cache")},
	} {
		args := append([]string{"build", "--target", "graviton2", "--source", tree}, c...)
		_, errOut, code := run(t, args...)
		if code != 2 || !strings.Contains(errOut, "inside the source tree") {
			t.Errorf("%v: exit %d, stderr %q; want 2, inside the source tree", c, code, errOut)
		}
		for _, d := range []string{filepath.Join(tree, ".cache"), filepath.Join(tree, "out")} {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("the refused build created %s", d)
			}
		}
	}
}

// checkSimulate replays the build's measured profile: the record holds
// each step's edges and the CPU time of the steps that ran compilers, and
// simulate's bounds hold.
func checkSimulate(t *testing.T, pub string) {
	t.Helper()
	var rec build.Record
	b, _ := os.ReadFile(filepath.Join(pub, build.RecordFile))
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	var cpu float64
	edges := 0
	for _, s := range rec.Steps {
		cpu += s.CPUSeconds
		edges += len(s.Needs)
	}
	if cpu <= 0 || edges == 0 || rec.Jobs < 1 {
		t.Fatalf("record: CPU %v s over its steps, %d edges, jobs %d", cpu, edges, rec.Jobs)
	}
	var sim struct {
		Steps    int
		Machines []simulate.Result
	}
	if code := runJSON(t, &sim, "simulate", "--cores", "1,64", "-o", "json", pub); code != 0 || sim.Steps != len(rec.Steps) || len(sim.Machines) != 2 {
		t.Fatalf("simulate: exit %d, %+v", code, sim)
	}
	one, many := sim.Machines[0], sim.Machines[1]
	if one.Cores != 1 || many.Cores != 64 || many.Makespan > one.Makespan+1e-9 || many.Makespan < many.CriticalPath-1e-9 ||
		one.Makespan < one.WorkBound-1e-9 || len(many.Path) == 0 || one.SerialSum <= 0 {
		t.Errorf("simulate: %+v", sim.Machines)
	}
	stdout, _, code := run(t, "simulate", "--cores", "2,16", pub)
	if code != 0 || !strings.Contains(stdout, "critical path on 16 cores: ") || !strings.Contains(stdout, "measured, one step after another:") {
		t.Errorf("simulate text: exit %d\n%s", code, stdout)
	}
	// Bad input: exit 2, saying what to do.
	old := filepath.Join(t.TempDir(), "old")
	os.MkdirAll(old, 0o755)
	os.WriteFile(filepath.Join(old, build.RecordFile), []byte(`{"cell":{"target":"x"},"steps":[{"id":"a","seconds":1},{"id":"b","seconds":2}]}`), 0o644)
	bad := func(name, record string) string {
		dir := filepath.Join(t.TempDir(), name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, build.RecordFile), []byte(record), 0o644)
		return dir
	}
	dup := bad("dup", `{"cell":{"target":"x"},"jobs":2,"steps":[{"id":"a","seconds":1},{"id":"a","seconds":2,"needs":["a"]}]}`)
	self := bad("self", `{"cell":{"target":"x"},"jobs":2,"steps":[{"id":"a","seconds":1},{"id":"b","seconds":1,"needs":["a","b"]},{"id":"c","seconds":1,"needs":["b"]}]}`)
	huge := bad("huge", `{"cell":{"target":"x"},"jobs":2,"steps":[{"id":"a","seconds":1},{"id":"b","seconds":1.7e308,"needs":["a"]}]}`)
	none := bad("none", `{"cell":{"target":"x"},"jobs":2,"steps":null}`)
	broken := bad("broken", "{\"cell\":{\"target\":\"x\"},\n\"jobs\":2,\n\"steps\":[{\"id\":\"a\" \"seconds\":1}]}")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"simulate", "--cores", "0", pub}, "want whole numbers from 1 to 4096"},
		{[]string{"simulate", "--cores", "", pub}, "--cores is empty"},
		{[]string{"simulate", filepath.Dir(old)}, "a dorisarm build --out directory"},
		{[]string{"simulate", old}, "records no step edges"},
		{[]string{"simulate", dup}, filepath.Join(dup, build.RecordFile) + ": step x/a is in the profile twice"},
		{[]string{"simulate", self}, filepath.Join(self, build.RecordFile) + ": the steps' needs form a cycle: x/b → x/b;"},
		{[]string{"simulate", huge}, filepath.Join(huge, build.RecordFile) + ": step x/b: wall 1.7e+308 s"},
		{[]string{"simulate", none}, "records no steps"},
		{[]string{"simulate", broken}, "line 3, column 20: invalid character"},
	} {
		if _, stderr, code := run(t, c.args...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %s", c.args, code, stderr)
		}
	}
}
