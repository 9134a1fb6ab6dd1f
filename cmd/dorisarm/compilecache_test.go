package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/build"
)

// compileStats is what the compile cache did for each build step of a
// published build's record.
func compileStats(t *testing.T, pub string) map[string]build.CompileStats {
	t.Helper()
	var rec struct {
		Steps []struct {
			ID           string
			CompileCache *build.CompileStats `json:"compile_cache"`
		}
	}
	if err := json.Unmarshal(readBytes(t, filepath.Join(pub, "dorisarm-build.json")), &rec); err != nil {
		t.Fatal(err)
	}
	out := map[string]build.CompileStats{}
	for _, s := range rec.Steps {
		if s.CompileCache != nil {
			out[s.ID] = *s.CompileCache
		}
	}
	return out
}

// TestCompileCache: the BE's compiles go through ccache (Debian's, real,
// with the real cross compiler) into a compile cache outside the step
// tree. A build killed after its first BE unit was compiled and run again
// compiles only the other; a second work directory and cache naming the
// same compile cache compiles nothing and publishes the same bytes;
// --be-compile-cache off keeps nothing; cache prune removes it.
func TestCompileCache(t *testing.T) {
	slow(t, "builds the sample four times with ccache")
	needBuildTools(t)
	needTool(t, "ccache")
	dir := t.TempDir()
	// The sample, its BE compiling one unit at a time with a pause after
	// each: a window to kill the build in once the first is cached.
	tree := filepath.Join(dir, "minidoris")
	copyDir(t, filepath.Join(repo_(t), "examples", "minidoris"), tree)
	edit(t, filepath.Join(tree, "build.sh"), `        objs+=("${obj}")`, `        objs+=("${obj}")
        wait; sleep 4`)
	recipe := filepath.Join(repo_(t), "recipes", "minidoris.yaml")
	args := func(cache, out string, extra ...string) []string {
		return append([]string{"build", "--source", tree, "--recipe", recipe, "--target", "graviton2", "--compiler", "clang",
			"--cache", filepath.Join(dir, cache), "--out", filepath.Join(dir, out)}, extra...)
	}

	// Killed once the first BE unit is in the compile cache.
	cmd := exec.Command(bin, args("a", "out-killed")...)
	cmd.Dir = repo
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	logs := filepath.Join(dir, "a", "work", "graviton2-2.1.8", "logs")
	deadline := time.After(5 * time.Minute)
	var stats string
wait:
	for {
		select {
		case err := <-done:
			t.Fatalf("the build ended (%v) before its first BE unit was cached:\n%s", err, log.String())
		case <-deadline:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("no BE unit was cached in 5 minutes:\n%s", log.String())
		case <-time.After(100 * time.Millisecond):
		}
		ls, _ := filepath.Glob(filepath.Join(logs, "ccache-*.log"))
		for _, l := range ls {
			if b, _ := os.ReadFile(l); strings.Contains(string(b), "cache_miss") {
				stats = l
				break wait
			}
		}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	phase := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(stats), "ccache-"), ".log")

	stdout, errOut, code := run(t, args("a", "out-a")...)
	if code != 0 {
		t.Fatalf("the build after the kill: exit %d\n%s\n%s", code, stdout, errOut)
	}
	pubA := filepath.Join(dir, "out-a", "2.1.8", "graviton2")
	first := compileStats(t, pubA)
	units := int64(0)
	for id, st := range first {
		if st.Hits+st.Misses > 0 && strings.HasPrefix(id, "build:be") {
			units = st.Hits + st.Misses
		}
	}
	if units < 2 {
		t.Fatalf("the BE steps compiled %d units through ccache, want the sample's 2 or more: %v", units, first)
	}
	// The step killed: its phase's build step (release: build:be;
	// instrument: build:be:instrument) hit what was compiled before the kill.
	killedStep := "build:be"
	if phase != "release" {
		killedStep = "build:be:" + phase
	}
	if st := first[killedStep]; st.Hits < 1 || st.Hits+st.Misses != units {
		t.Errorf("%s after the kill: %d hits, %d misses; want the unit compiled before the kill to hit (of %d)", killedStep, st.Hits, st.Misses, units)
	}

	// Another work directory and cache, the same compile cache.
	stdout, errOut, code = run(t, args("b", "out-b", "--be-compile-cache", filepath.Join(dir, "a", "compile"))...)
	if code != 0 {
		t.Fatalf("second cache: exit %d\n%s\n%s", code, stdout, errOut)
	}
	pubB := filepath.Join(dir, "out-b", "2.1.8", "graviton2")
	for id, st := range compileStats(t, pubB) {
		if strings.HasPrefix(id, "build:be") && (st.Misses != 0 || st.Hits != units) {
			t.Errorf("%s with the shared compile cache: %d hits, %d misses; want %d hits", id, st.Hits, st.Misses, units)
		}
	}
	be := filepath.Join("be", "lib", "doris_be")
	if a, b := readBytes(t, filepath.Join(pubA, be)), readBytes(t, filepath.Join(pubB, be)); !bytes.Equal(a, b) {
		t.Error("doris_be from the compile cache differs from the one compiled")
	}

	// Off: nothing kept, nothing counted.
	if _, errOut, code := run(t, args("c", "out-c", "--be-compile-cache", "off")...); code != 0 {
		t.Fatalf("--be-compile-cache off: exit %d\n%s", code, errOut)
	}
	if st := compileStats(t, filepath.Join(dir, "out-c", "2.1.8", "graviton2")); len(st) != 0 {
		t.Errorf("--be-compile-cache off: the record counts %v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "c", "compile")); err == nil {
		t.Error("--be-compile-cache off made a compile cache")
	}

	// cache prune bounds it with the step cache.
	keys, _ := filepath.Glob(filepath.Join(dir, "a", "compile", "*"))
	if len(keys) == 0 {
		t.Fatal("no compile cache directory under the cache")
	}
	if _, errOut, code := run(t, "cache", "prune", "--cache", filepath.Join(dir, "a"), "--max-size", "0"); code != 0 {
		t.Fatalf("cache prune: exit %d\n%s", code, errOut)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "a", "compile", "*")); len(left) != 0 {
		t.Errorf("cache prune --max-size 0 left %v", left)
	}
	// A size ccache cannot take is refused before anything runs.
	if _, errOut, code := run(t, args("d", "out-d", "--be-compile-cache-size", "lots")...); code != 2 || !strings.Contains(errOut, "--be-compile-cache-size") {
		t.Errorf("--be-compile-cache-size lots: exit %d %s", code, errOut)
	}
}

func readBytes(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSharedCompileCache: two runners, each with a cache of its own (its
// own work directory and local compile cache), share a directory (as a
// fleet shares an NFS mount). The second compiles nothing: every BE unit
// comes from what the first added there, through ccache's remote storage
// in the step's sandbox, and its doris_be is the first's. cache prune
// bounds the shared directory as any cache; a URL is refused with the way
// to share, and a shared cache with the compile cache off is refused.
func TestSharedCompileCache(t *testing.T) {
	slow(t, "builds the sample twice with ccache and a shared compile cache")
	needBuildTools(t)
	needTool(t, "ccache")
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	recipe := filepath.Join(repo_(t), "recipes", "minidoris.yaml")
	args := func(runner string, extra ...string) []string {
		return append([]string{"build", "--recipe", recipe, "--target", "graviton2", "--compiler", "clang",
			"--cache", filepath.Join(dir, runner), "--out", filepath.Join(dir, "out-"+runner), "--be-compile-cache-shared", shared}, extra...)
	}
	// What the BE steps' compile caches did, and the doris_be published.
	read := func(runner string) (map[string]build.CompileStats, []byte) {
		pub := filepath.Join(dir, "out-"+runner, "2.1.8", "graviton2")
		be := map[string]build.CompileStats{}
		for id, st := range compileStats(t, pub) {
			if strings.HasPrefix(id, "build:be") {
				be[id] = st
			}
		}
		return be, readBytes(t, filepath.Join(pub, "be", "lib", "doris_be"))
	}
	if _, errOut, code := run(t, args("r1")...); code != 0 {
		t.Fatalf("runner 1: exit %d\n%s", code, errOut)
	}
	first, beA := read("r1")
	if len(first) == 0 {
		t.Fatal("runner 1: no BE step compiled through ccache")
	}
	for id, st := range first {
		if st.Misses == 0 || st.SharedHits != 0 {
			t.Errorf("runner 1, %s: %+v; want every unit compiled, none from the shared cache", id, st)
		}
	}
	if keys, _ := filepath.Glob(filepath.Join(shared, "compile", "*", "*", "*")); len(keys) == 0 {
		t.Fatal("runner 1 added nothing to the shared compile cache")
	}
	if _, errOut, code := run(t, args("r2")...); code != 0 {
		t.Fatalf("runner 2: exit %d\n%s", code, errOut)
	}
	second, beB := read("r2")
	for id, st := range second {
		want := first[id].Hits + first[id].Misses
		if st.Misses != 0 || st.Hits != want || st.SharedHits != want {
			t.Errorf("runner 2, %s: %+v; want all %d units from the shared cache", id, st, want)
		}
	}
	if !bytes.Equal(beA, beB) {
		t.Error("runner 2's doris_be, from the shared compile cache, differs from runner 1's")
	}
	if _, errOut, code := run(t, "cache", "prune", "--cache", shared, "--max-size", "0"); code != 0 {
		t.Fatalf("cache prune of the shared directory: exit %d\n%s", code, errOut)
	}
	if left, _ := filepath.Glob(filepath.Join(shared, "compile", "*")); len(left) != 0 {
		t.Errorf("cache prune --max-size 0 left %v in the shared compile cache", left)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{args("r3", "--be-compile-cache", "http://cache.example:8080/ccache"), "--be-compile-cache-shared DIR"},
		{args("r3", "--be-compile-cache", "off"), "needs the compile cache on"},
	} {
		if _, errOut, code := run(t, c.args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", c.args[len(c.args)-2:], code, c.want, errOut)
		}
	}
}
