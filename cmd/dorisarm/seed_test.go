package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The C++ runtime (runtimes.gcc-12 in matrix.yaml) takes eight minutes
// to build cold on two cores, and every build of the real recipe needs it.
// The first test of a run that needs an ISA's runtime builds it once, into
// a cache of this test binary's (DORISARM_RUNTIME_CACHE: one kept between
// runs); each test then starts its own cache with a copy of the runtime's
// entries. A copy is an entry like any other: content-addressed by its
// key, its files.tar checked against its meta.json when restored.
var runtimeSeed struct {
	sync.Mutex
	built map[string]bool // ISA → its runtime is in the seed cache
}

// seedDir is the cache the runtimes are built into.
func seedDir() string {
	if c := os.Getenv("DORISARM_RUNTIME_CACHE"); c != "" {
		return c
	}
	return filepath.Join(filepath.Dir(bin), "runtime-seed")
}

// seedRuntime copies into cache the runtime entries a real-recipe build
// for target needs, building them first where no test of this run has.
func seedRuntime(t *testing.T, cache, target string) {
	t.Helper()
	tree, mirror := corpusTree(t)
	runtimeSeed.Lock()
	defer runtimeSeed.Unlock()
	if runtimeSeed.built == nil {
		runtimeSeed.built = map[string]bool{}
	}
	seed := seedDir()
	isa := "aarch64" // matrix.yaml: every target but x86_64
	if target == "x86_64" {
		isa = "x86_64"
	}
	if !runtimeSeed.built[isa] {
		// bzip2 is C and small: the build is the runtime and little else.
		out := filepath.Join(t.TempDir(), "seed-out")
		stdout, errOut, code := run(t, "build", "--source", tree, "--mirror", mirror, "--packages", "bzip",
			"--target", target, "--compiler", "clang", "--out", out, "--cache", seed)
		if code != 0 {
			t.Fatalf("building the C++ runtime for %s: exit %d\n%s\n%s", target, code, stdout, errOut)
		}
		runtimeSeed.built[isa] = true
	}
	steps, err := os.ReadDir(filepath.Join(seed, "steps"))
	if err != nil {
		t.Fatal(err)
	}
	copied := 0
	for _, e := range steps {
		b, err := os.ReadFile(filepath.Join(seed, "steps", e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var m struct{ Step string }
		if json.Unmarshal(b, &m) != nil || !strings.HasPrefix(m.Step, "runtime:") {
			continue
		}
		dst := filepath.Join(cache, "steps", e.Name())
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		tmp := dst + ".seed"
		if out, err := exec.Command("cp", "-a", filepath.Join(seed, "steps", e.Name()), tmp).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		if err := os.Rename(tmp, dst); err != nil {
			t.Fatal(err)
		}
		copied++
	}
	if copied == 0 {
		t.Logf("no runtime entry copied into %s (it had them)", cache)
	}
}
