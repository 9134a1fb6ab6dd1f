package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/sign"
	"github.com/dorisarm/dorisarm/internal/testproc"
)

// e2eOnly skips a test unless DORISARM_E2E is set (make e2e sets it): it
// takes minutes of real builds.
func e2eOnly(t *testing.T, why string) {
	t.Helper()
	slow(t, why)
	if os.Getenv("DORISARM_E2E") == "" {
		t.Skipf("this test %s: make e2e runs it (DORISARM_E2E=1)", why)
	}
}

// TestKilledBuilds kills a cold build of the sample with SIGKILL at
// DORISARM_KILL_MOMENTS (default 30) random moments of it (unpack, package
// steps, merges, cache writes, pushes to a registry, the gate), each from
// an empty step cache, and after each checks that every entry the cache
// holds restores cleanly against its own digests, that nothing the build
// started is still running, that nothing half-made is published, and
// that the next build succeeds and publishes the same files as a build
// that was never interrupted. DORISARM_KILL_SEED repeats a run.
func TestKilledBuilds(t *testing.T) {
	e2eOnly(t, "builds the sample dozens of times, killing each build part way")
	needBuildTools(t)
	moments := 30
	if v := os.Getenv("DORISARM_KILL_MOMENTS"); v != "" {
		moments, _ = strconv.Atoi(v)
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("DORISARM_KILL_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (DORISARM_KILL_SEED=%d repeats this run)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	dir := t.TempDir()
	addr := testproc.Registry(t)
	repo := addr + "/dorisarm/killed"
	t.Setenv("COSIGN_PASSWORD", "pw")
	priv, _, err := sign.Keygen(filepath.Join(dir, "keys"), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sysroots := filepath.Join(dir, "sysroots")
	cache := filepath.Join(dir, "cache")
	args := func(out string) []string {
		return []string{"build", "--target", "graviton2", "--compiler", "clang", "--out", filepath.Join(dir, out),
			"--cache", cache, "--sysroot-cache", sysroots, "--cache-to", repo, "--cache-sign-key", priv}
	}
	if _, errOut, code := run(t, args("out-ref")...); code != 0 {
		t.Fatalf("reference build: exit %d\n%s", code, errOut)
	}
	ref := outputsOf(t, filepath.Join(dir, "out-ref"))
	// Later cold builds do not make the sysroot again: time them.
	os.RemoveAll(cache)
	t0 := time.Now()
	if _, errOut, code := run(t, args("out-ref2")...); code != 0 {
		t.Fatalf("second reference build: exit %d\n%s", code, errOut)
	}
	cold := time.Since(t0)
	t.Logf("a cold build takes %s: the kills fall within it", cold.Round(time.Millisecond))

	for i := 0; i < moments; i++ {
		os.RemoveAll(cache)
		at := time.Duration(rng.Int64N(int64(cold)))
		out := fmt.Sprintf("out-%d", i)
		killed, log := killAt(t, at, args(out))
		step := lastStarted(log)
		t.Logf("moment %d: killed at %s (%s), during %s", i, at.Round(time.Millisecond), map[bool]string{true: "killed", false: "it had finished"}[killed], step)
		if left := leftRunning(cache, 5*time.Second); len(left) > 0 {
			t.Errorf("moment %d (%s): left running: %v", i, step, left)
		}
		checkCacheEntries(t, cache, fmt.Sprintf("moment %d (%s)", i, step))
		if pub := filepath.Join(dir, out, "2.1.8", "graviton2"); exists(pub) {
			if _, err := build.Verify(pub); err != nil {
				t.Errorf("moment %d (%s): a half-made build is published: %v", i, step, err)
			}
		}
		if _, errOut, code := run(t, args(out+"-next")...); code != 0 {
			t.Errorf("moment %d (%s): the next build: exit %d\n%s", i, step, code, errOut)
			continue
		}
		if got := outputsOf(t, filepath.Join(dir, out+"-next")); got != ref {
			t.Errorf("moment %d (%s): the next build publishes other files than an uninterrupted one", i, step)
		}
	}
}

// killAt starts dorisarm with args and sends it SIGKILL after d; it
// reports whether the build was still running then, with what it printed.
func killAt(t *testing.T, d time.Duration, args []string) (killed bool, log string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = repo
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return false, b.String()
	case <-time.After(d):
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
	return true, b.String()
}

// lastStarted is the last step the progress output says started.
func lastStarted(log string) string {
	last := "setup"
	for _, l := range strings.Split(log, "\n") {
		if f := strings.Fields(l); len(f) >= 5 && f[len(f)-1] == "started" {
			last = f[3]
		} else if i := strings.Index(l, " started (running: "); i > 0 {
			if f := strings.Fields(l[:i]); len(f) > 0 {
				last = f[len(f)-1]
			}
		}
	}
	return last
}

// leftRunning are the processes whose command line names dir, once limit
// has passed without them all ending (the sandbox's namespace dies with
// bubblewrap, which dies with dorisarm: it takes the kernel a moment).
func leftRunning(dir string, limit time.Duration) []string {
	deadline := time.Now().Add(limit)
	for {
		left := testproc.ProcessesWith(dir)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkCacheEntries restores every entry of the step cache into a
// scratch tree: each must pass the cache's own checks (files.tar against
// meta.json's digest and size, every name and link).
func checkCacheEntries(t *testing.T, dir, when string) {
	t.Helper()
	c := &build.Cache{Dir: dir}
	ents, err := c.Entries()
	if err != nil {
		t.Errorf("%s: listing the cache: %v", when, err)
		return
	}
	for _, e := range ents {
		m, ok := c.Get(e.Key)
		if !ok {
			t.Errorf("%s: cache entry %s has no readable meta.json (a partial entry)", when, e.Key[:12])
			continue
		}
		scratch, err := os.MkdirTemp("", "dorisarm-restore-")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Restore(e.Key, scratch, m); err != nil {
			var ce *build.CorruptError
			if errors.As(err, &ce) {
				t.Errorf("%s: cache entry %s (%s) does not restore: %v", when, e.Key[:12], m.Step, err)
			} else {
				t.Errorf("%s: restoring %s: %v", when, e.Key[:12], err)
			}
		}
		os.RemoveAll(scratch)
	}
}

// outputsOf is the build record's list of what the build published.
func outputsOf(t *testing.T, out string) string {
	t.Helper()
	var rec struct {
		Outputs json.RawMessage `json:"outputs"`
	}
	b, err := os.ReadFile(filepath.Join(out, "2.1.8", "graviton2", "dorisarm-build.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil || len(rec.Outputs) < 10 {
		t.Fatalf("the build record in %s: %v", out, err)
	}
	return string(rec.Outputs)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
