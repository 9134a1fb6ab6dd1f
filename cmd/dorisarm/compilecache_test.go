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
)

// compileStats are the compile cache's hits and misses of each build step
// of a published build's record.
func compileStats(t *testing.T, pub string) map[string][2]int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pub, "dorisarm-build.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Steps []struct {
			ID           string
			CompileCache *struct{ Hits, Misses int64 } `json:"compile_cache"`
		}
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, s := range rec.Steps {
		if s.CompileCache != nil {
			out[s.ID] = [2]int64{s.CompileCache.Hits, s.CompileCache.Misses}
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
		if st[0]+st[1] > 0 && strings.HasPrefix(id, "build:be") {
			units = st[0] + st[1]
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
	if st := first[killedStep]; st[0] < 1 || st[0]+st[1] != units {
		t.Errorf("%s after the kill: %d hits, %d misses; want the unit compiled before the kill to hit (of %d)", killedStep, st[0], st[1], units)
	}

	// Another work directory and cache, the same compile cache.
	stdout, errOut, code = run(t, args("b", "out-b", "--be-compile-cache", filepath.Join(dir, "a", "compile"))...)
	if code != 0 {
		t.Fatalf("second cache: exit %d\n%s\n%s", code, stdout, errOut)
	}
	pubB := filepath.Join(dir, "out-b", "2.1.8", "graviton2")
	for id, st := range compileStats(t, pubB) {
		if strings.HasPrefix(id, "build:be") && (st[1] != 0 || st[0] != units) {
			t.Errorf("%s with the shared compile cache: %d hits, %d misses; want %d hits", id, st[0], st[1], units)
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
