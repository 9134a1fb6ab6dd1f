package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/testproc"
)

type cacheRecord struct {
	Cache struct {
		Hits, Misses, Pulled []string
		Pushed               int
	}
	Outputs []struct{ Path, SHA256 string }
}

func readRecord(t *testing.T, out, target string) cacheRecord {
	t.Helper()
	var rec cacheRecord
	b, err := os.ReadFile(filepath.Join(out, "2.1.8", target, "dorisarm-build.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil {
		t.Fatalf("build record: %v", err)
	}
	return rec
}

// TestRegistryCache: a cold build offers every step to a docker-registry
// (--cache-to); a build on another, empty cache directory restores every
// step from it (--cache-from) and runs no compiler, publishing the same
// files; `cache pull` fills a third cache; a files.tar altered in the
// registry's storage is refused and its step runs again.
func TestRegistryCache(t *testing.T) {
	slow(t, "builds with real compilers against a real docker-registry")
	needBuildTools(t)
	addr, storage := testproc.RegistryStorage(t)
	repo := addr + "/dorisarm/cache"
	dir := t.TempDir()
	build := func(cache, out string, extra ...string) cacheRecord {
		t.Helper()
		args := append([]string{"build", "--target", "graviton2", "--out", filepath.Join(dir, out), "--cache", filepath.Join(dir, cache)}, extra...)
		if stdout, errOut, code := run(t, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, errOut)
		}
		return readRecord(t, filepath.Join(dir, out), "graviton2")
	}
	cold := build("a", "out-a", "--cache-to", repo)
	if len(cold.Cache.Hits) != 0 || cold.Cache.Pushed != len(cold.Cache.Misses) || cold.Cache.Pushed == 0 {
		t.Fatalf("cold build: %+v", cold.Cache)
	}
	warm := build("b", "out-b", "--cache-from", repo)
	if len(warm.Cache.Misses) != 0 || len(warm.Cache.Pulled) != len(cold.Cache.Misses) {
		t.Errorf("build from the registry: misses %v, pulled %d of %d", warm.Cache.Misses, len(warm.Cache.Pulled), len(cold.Cache.Misses))
	}
	if logs, _ := filepath.Glob(filepath.Join(dir, "a", "work", "*", "logs", "compiler-*.log")); len(logs) == 0 {
		t.Error("the cold build left no compiler log: the check below would prove nothing")
	}
	if logs, _ := filepath.Glob(filepath.Join(dir, "b", "work", "*", "logs", "compiler-*.log")); len(logs) != 0 {
		t.Errorf("a compiler ran in the build from the registry: %v", logs)
	}
	if len(warm.Outputs) != len(cold.Outputs) {
		t.Fatalf("outputs: %d vs %d", len(warm.Outputs), len(cold.Outputs))
	}
	for i := range warm.Outputs {
		if warm.Outputs[i] != cold.Outputs[i] {
			t.Errorf("output %s differs from the cold build's", warm.Outputs[i].Path)
		}
	}

	stdout, errOut, code := run(t, "cache", "pull", "--repo", repo, "--cache", filepath.Join(dir, "c"))
	if code != 0 || !strings.HasPrefix(stdout, "pulled ") || strings.HasPrefix(stdout, "pulled 0 ") {
		t.Errorf("cache pull: exit %d %s%s", code, stdout, errOut)
	}
	// Again as JSON (nothing new to pull), and a push of what is there
	// (all of it already in the registry): lists that may be empty.
	if _, errOut, code := run(t, "cache", "pull", "--repo", repo, "--cache", filepath.Join(dir, "c"), "-o", "json"); code != 0 {
		t.Errorf("cache pull -o json: exit %d %s", code, errOut)
	}
	if _, errOut, code := run(t, "cache", "push", "--repo", repo, "--cache", filepath.Join(dir, "c"), "-o", "json"); code != 0 {
		t.Errorf("cache push -o json: exit %d %s", code, errOut)
	}

	// Alter the largest files.tar in the registry's storage.
	var biggest string
	var size int64
	filepath.Walk(filepath.Join(storage, "docker/registry/v2/blobs"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Size() > size {
			biggest, size = p, fi.Size()
		}
		return nil
	})
	data, _ := os.ReadFile(biggest)
	for i := 0; i < 16; i++ {
		data[len(data)/2+i] ^= 0xff
	}
	os.WriteFile(biggest, data, 0o644)
	stdout, errOut, code = run(t, "build", "--target", "graviton2", "--out", filepath.Join(dir, "out-d"), "--cache", filepath.Join(dir, "d"), "--cache-from", repo)
	if code != 0 || !strings.Contains(errOut, "refused") {
		t.Fatalf("build with an altered registry entry: exit %d\n%s%s", code, stdout, errOut)
	}
	rec := readRecord(t, filepath.Join(dir, "out-d"), "graviton2")
	if len(rec.Cache.Misses) == 0 || len(rec.Cache.Misses)+len(rec.Cache.Pulled) != len(cold.Cache.Misses) {
		t.Errorf("after the altered entry: misses %v, pulled %v", rec.Cache.Misses, rec.Cache.Pulled)
	}
	for i := range rec.Outputs {
		if rec.Outputs[i] != cold.Outputs[i] {
			t.Errorf("output %s differs from the cold build's", rec.Outputs[i].Path)
		}
	}
}
