package build

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/sample"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/testproc"
)

const repo = "../.."

type setup struct {
	target, compiler string
	patches          string // patch dir (default: the recipe's)
	tree             string // source tree (default: the sample)
	recipe           func(*recipe.Recipe)
	packages         []string // --packages (default: the whole sample)
	accept           string   // --accept-lost-tuning
}

// need skips a test that builds the sample with real compilers and qemu
// under -short (runner_test.go covers the runner there without them) and
// where they are not installed.
func need(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the sample with real compilers and qemu (minutes); skipped with -short, where runner_test.go's fast tests cover the runner")
	}
	for _, tool := range []string{"qemu-aarch64", "aarch64-linux-gnu-gcc", "clang-16", "make", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-deps.sh)", tool)
		}
	}
}

func input(t *testing.T, s setup) Input {
	t.Helper()
	in := sample.Load(t, repo, s.patches, s.tree)
	if s.recipe != nil {
		s.recipe(in.Recipe)
	}
	cell, tc := in.Toolchain(t, s.target, s.compiler)
	return planned(t, in, cell, tc, plan.Inputs{Packages: s.packages, AcceptLostTuning: s.accept,
		// The sysroot path is tested end to end by the CLI and the demo; these tests build against this machine's libraries.
		SysrootWaiver: "unit test of the runner"})
}

func countLines(path string) int {
	data, _ := os.ReadFile(path)
	return strings.Count(string(data), "\n")
}

// TestBuildCacheAndRebuild builds kunpeng920 (clang: PGO + ThinLTO) cold,
// again with nothing changed (no compiler runs), and after changing one patch
// (only the steps after it run).
func TestBuildCacheAndRebuild(t *testing.T) {
	need(t)
	out, cache := t.TempDir(), t.TempDir()
	opts := Options{Out: out, Cache: cache, Jobs: 2}
	in := input(t, setup{target: "kunpeng920", compiler: "clang"})
	rec, err := Run(context.Background(), in, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := Dir(out, "2.1.8", "kunpeng920")
	back, err := ReadRecord(filepath.Join(dir, RecordFile))
	if err != nil || back.Compiler.Name != "clang" || back.PGOProfile == "" || back.Scan == nil || !back.Scan.Clean {
		t.Fatalf("record: %+v %v", back, err)
	}
	// The published record holds the build's time: at least its longest
	// step's (package steps run at once: not their sum).
	var longest float64
	for _, s := range back.Steps {
		longest = max(longest, s.Seconds)
	}
	if back.Seconds < longest || longest <= 0 {
		t.Errorf("published record: %.2f s for a build whose longest step took %.2f s", back.Seconds, longest)
	}
	if len(rec.Cache.Hits) != 0 || !strings.Contains(strings.Join(rec.Flags[plan.PhasePGO], " "), "-flto=thin") {
		t.Errorf("cold build: hits %v, flags %v", rec.Cache.Hits, rec.Flags)
	}
	if len(back.Smoke) != 1 || !strings.Contains(back.Smoke[0].Output, "kernel=scalar") || back.Smoke[0].Model != "neoverse-n1" {
		t.Errorf("smoke: %+v", back.Smoke)
	}
	// The Kunpeng output carries no SVE outside guarded code.
	rep, err := scan.Scan(context.Background(), []string{dir}, in.Policy, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Files {
		if f.Features["sve"] != f.Guarded["sve"] {
			t.Errorf("%s has unguarded SVE: %v", f.Path, f.Features)
		}
	}

	// No-op rebuild: the published build is up to date.
	logs := filepath.Join(cache, "work", "kunpeng920-2.1.8", "logs")
	before := countLines(filepath.Join(logs, "compiler-thirdparty.log")) + countLines(filepath.Join(logs, "compiler-pgo.log"))
	rec, err = Run(context.Background(), input(t, setup{target: "kunpeng920", compiler: "clang"}), opts)
	if err != nil || !rec.UpToDate {
		t.Fatalf("no-op rebuild not up to date: %v", err)
	}
	// A published file edited by hand: not up to date any more; rebuilt
	// with every cacheable step from the cache, and the file restored.
	be := filepath.Join(dir, "be", "lib", "doris_be")
	orig, _ := os.ReadFile(be)
	os.WriteFile(be, append(append([]byte{}, orig...), "tampered"...), 0o755)
	rec, err = Run(context.Background(), input(t, setup{target: "kunpeng920", compiler: "clang"}), opts)
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := os.ReadFile(be); string(now) != string(orig) {
		t.Error("the edited doris_be was not replaced by the rebuild")
	}
	for _, pk := range rec.Packages {
		if len(pk.SHA256) != 64 {
			t.Errorf("record of a build from the cache: package %s without its sha256", pk.Entry)
		}
	}
	nSetup := 0 // sysroot and toolchain steps keep their results elsewhere
	for _, st := range rec.Steps {
		if strings.HasPrefix(st.ID, "sysroot:") || strings.HasPrefix(st.ID, "toolchain:") {
			nSetup++
		}
	}
	if rec.UpToDate || len(rec.Cache.Misses) != 0 || len(rec.Cache.Hits) != len(rec.Steps)-2-nSetup {
		t.Errorf("rebuild from the cache: up to date %v, misses %v", rec.UpToDate, rec.Cache.Misses)
	}
	// The compiler logs are rewritten by the wrappers only when a compiler runs.
	after := countLines(filepath.Join(logs, "compiler-thirdparty.log")) + countLines(filepath.Join(logs, "compiler-pgo.log"))
	if after > before {
		t.Errorf("a compiler ran in a no-op rebuild (%d → %d log lines)", before, after)
	}

	// 16 bytes flipped inside the cached result of build:be, and the
	// published doris_be edited again: the entry is found corrupt, discarded
	// and build:be runs again; what is published is the real doris_be.
	flipCached(t, cache, "build:be")
	os.WriteFile(be, append(append([]byte{}, orig...), "tampered"...), 0o755)
	rec, err = Run(context.Background(), input(t, setup{target: "kunpeng920", compiler: "clang"}), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.Cache.Misses, " "); got != "build:be" {
		t.Errorf("after build:be's entry was corrupted, misses %q, want build:be", got)
	}
	if !strings.Contains(strings.Join(rec.Warnings, "\n"), "is corrupt") {
		t.Errorf("no warning about the corrupt entry: %q", rec.Warnings)
	}
	if now, _ := os.ReadFile(be); string(now) != string(orig) {
		t.Error("the doris_be published after a corrupt cache entry differs from the real one")
	}

	// Change the bitshuffle patch: only its dependents rebuild.
	pdir := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(repo, "examples/minidoris/patches")+"/.", pdir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	pf := filepath.Join(pdir, "bitshuffle", "0001-scalar-bitshuffle.patch")
	data, _ := os.ReadFile(pf)
	os.WriteFile(pf, []byte(strings.Replace(string(data), "Last-Update: 2026-11-29", "Last-Update: 2026-12-01", 1)), 0o644)
	rec, err = Run(context.Background(), input(t, setup{target: "kunpeng920", compiler: "clang", patches: pdir}), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := "patch:bitshuffle thirdparty:BITSHUFFLE build:be:instrument pgo:train pgo:merge build:be"
	if got := strings.Join(rec.Cache.Misses, " "); got != want {
		t.Errorf("after one patch changed, misses:\n got %s\nwant %s", got, want)
	}
}

// TestGraviton3KeepsSVE: the graviton3 BE passes its smoke run under qemu's
// SVE model and dies with SIGILL under Kunpeng's model (neoverse-n1).
func TestGraviton3KeepsSVE(t *testing.T) {
	need(t)
	// Relative --out and --cache (as `make demo` passes them): steps run in
	// other directories and must still find the wrappers and the cache.
	out, cache := relative(t, t.TempDir()), relative(t, t.TempDir())
	in := input(t, setup{target: "graviton3", compiler: "gcc"})
	rec, err := Run(context.Background(), in, Options{Out: out, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rec.Smoke[0].Output, "kernel=sve") {
		t.Fatalf("graviton3 smoke: %+v", rec.Smoke)
	}
	be := filepath.Join(Dir(out, "2.1.8", "graviton3"), "be/lib/doris_be")
	argv := append(in.TC.EmulatorAs("neoverse-n1"), be, "--self-test")
	err = exec.Command(argv[0], argv[1:]...).Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || (ee.ExitCode() != -1 && ee.ExitCode() != 132) {
		t.Errorf("graviton3 BE under neoverse-n1: %v, want SIGILL", err)
	}
}

// TestLeakedSVEFailsSmokeAndScan: builds on a pretend SVE build host, without
// the sve-off patch and the recipe pin, leak SVE. Kunpeng's PGO training run
// dies with SIGILL; Graviton2's smoke run does; without smoke runs the scan
// gate refuses the build. Nothing is published in any case.
func TestLeakedSVEFailsSmokeAndScan(t *testing.T) {
	need(t)
	// The build host's /proc/cpuinfo as simdprobe's Makefile reads it
	// (CPUINFO), inside the tree: a step sees nothing else of the machine.
	tree := t.TempDir()
	exec.Command("cp", "-a", filepath.Join(repo, "examples/minidoris")+"/.", tree).Run()
	os.WriteFile(filepath.Join(tree, "thirdparty", "cpuinfo-sve"), []byte("Features\t: fp asimd atomics sve\n"), 0o644)
	pdir := t.TempDir()
	exec.Command("cp", "-a", filepath.Join(repo, "examples/minidoris/patches")+"/.", pdir).Run()
	os.RemoveAll(filepath.Join(pdir, "simdprobe"))
	noPin := func(r *recipe.Recipe) {
		r.Thirdparty.Env["SIMDPROBE"] = map[string]string{"CPUINFO": "$SRC/thirdparty/cpuinfo-sve"}
	}
	out, cache := t.TempDir(), t.TempDir()
	_, err := Run(context.Background(), input(t, setup{target: "kunpeng920", compiler: "gcc", patches: pdir, recipe: noPin, tree: tree}), Options{Out: out, Cache: cache})
	if !errors.Is(err, ErrGate) || !strings.Contains(err.Error(), "SIGILL under qemu -cpu neoverse-n1") || !strings.Contains(err.Error(), "PGO training") {
		t.Fatalf("training gate: %v", err)
	}
	_, err = Run(context.Background(), input(t, setup{target: "graviton2", compiler: "gcc", patches: pdir, recipe: noPin, tree: tree}), Options{Out: out, Cache: cache})
	if !errors.Is(err, ErrGate) || !strings.Contains(err.Error(), "be/lib/doris_be died with SIGILL under qemu -cpu neoverse-n1") {
		t.Fatalf("smoke gate: %v", err)
	}
	noSmoke := func(r *recipe.Recipe) { noPin(r); r.Smoke = nil }
	_, err = Run(context.Background(), input(t, setup{target: "graviton2", compiler: "gcc", patches: pdir, recipe: noSmoke, tree: tree}), Options{Out: out, Cache: cache})
	if !errors.Is(err, ErrGate) || !strings.Contains(err.Error(), "isa-extension sve in simdprobe_sum") {
		t.Fatalf("scan gate: %v", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("something was published: %v", ents)
	}
}

// TestBadInputs: a tampered archive, a missing one, a patch that no longer
// applies and a failing build step each stop the build with a clear error,
// leave the published build as it was and cache nothing for the failed step.
func TestBadInputs(t *testing.T) {
	need(t)
	out, cache := t.TempDir(), t.TempDir()
	good := input(t, setup{target: "generic-armv8", compiler: "gcc"})
	if _, err := Run(context.Background(), good, Options{Out: out, Cache: cache}); err != nil {
		t.Fatal(err)
	}
	published := filepath.Join(Dir(out, "2.1.8", "generic-armv8"), RecordFile)
	stamp, _ := os.ReadFile(published)

	// A mirror whose minilz archive was tampered with.
	mirror := t.TempDir()
	exec.Command("cp", "-a", filepath.Join(repo, "examples/minidoris/thirdparty/mirror")+"/.", mirror).Run()
	os.WriteFile(filepath.Join(mirror, "minilz-1.2.0.tar.gz"), []byte("tampered"), 0o644)
	// A fresh output directory too: into `out` the same plan is up to date
	// and fetches nothing.
	fresh, freshOut := t.TempDir(), t.TempDir()
	_, err := Run(context.Background(), good, Options{Out: freshOut, Cache: fresh, Mirror: mirror})
	if err == nil || !strings.Contains(err.Error(), "minilz-1.2.0.tar.gz: MD5") {
		t.Errorf("tampered archive: %v", err)
	}
	os.Remove(filepath.Join(mirror, "minilz-1.2.0.tar.gz"))
	_, err = Run(context.Background(), good, Options{Out: freshOut, Cache: fresh, Mirror: mirror})
	if err == nil || !strings.Contains(err.Error(), "minilz-1.2.0.tar.gz is not in mirror") {
		t.Errorf("missing archive: %v", err)
	}
	if _, ok := (&Cache{Dir: fresh}).Get(good.Plan.Step("fetch:MINILZ").Key); ok {
		t.Error("the failed fetch was cached")
	}
	if ents, _ := os.ReadDir(freshOut); len(ents) != 0 {
		t.Errorf("failed builds left %v in the output directory", ents)
	}
	// With the published build unchanged, the same plan is up to date: the
	// broken mirror is not even consulted.
	if rec, err := Run(context.Background(), good, Options{Out: out, Cache: fresh, Mirror: mirror}); err != nil || !rec.UpToDate {
		t.Errorf("published build not up to date: %v", err)
	}

	// A tree whose bitshuffle source moved on: the kunpeng patch no longer applies.
	tree := t.TempDir()
	exec.Command("cp", "-a", filepath.Join(repo, "examples/minidoris")+"/.", tree).Run()
	bad := filepath.Join(tree, "build.sh")
	data, _ := os.ReadFile(bad)
	os.WriteFile(bad, []byte(strings.Replace(string(data), `OPENSSL_LIBS=("${TP_INSTALL}/lib/libssl.a"`, `OPENSSL_LIBS=("${TP_INSTALL}/lib/libssl.a" `, 1)), 0o755)
	_, err = Run(context.Background(), input(t, setup{target: "kunpeng920", compiler: "gcc", tree: tree}), Options{Out: out, Cache: cache})
	var se *StepError
	if !errors.As(err, &se) || se.Step != "patch:doris" || !strings.Contains(err.Error(), "no longer apply") {
		t.Errorf("patch drift: %v", err)
	}

	// A build step that fails: its log's tail is shown, the previous build stays.
	os.WriteFile(bad, []byte(strings.Replace(string(data), "set -eo pipefail", "set -eo pipefail\necho 'error: the compiler broke' >&2; exit 3", 1)), 0o755)
	_, err = Run(context.Background(), input(t, setup{target: "generic-armv8", compiler: "gcc", tree: tree}), Options{Out: out, Cache: cache})
	if !errors.As(err, &se) || !strings.HasPrefix(se.Step, "build:") || !strings.Contains(se.Tail, "the compiler broke") {
		t.Errorf("failing step: %v", err)
	}
	if now, _ := os.ReadFile(published); string(now) != string(stamp) {
		t.Error("a failed build changed the published one")
	}
	if ents, _ := filepath.Glob(filepath.Join(out, ".staging-*")); len(ents) != 0 {
		t.Errorf("staging left behind: %v", ents)
	}
}

func TestCachePrune(t *testing.T) {
	dir := t.TempDir()
	c := &Cache{Dir: dir}
	c.Init()
	tree := t.TempDir()
	os.WriteFile(filepath.Join(tree, "f"), make([]byte, 1000), 0o644)
	for _, k := range []string{"a", "b", "c"} {
		if err := c.Put(Meta{Key: k}, tree, []string{"f"}); err != nil {
			t.Fatal(err)
		}
	}
	// A second Put of the same key (a concurrent build) is harmless.
	if err := c.Put(Meta{Key: "a"}, tree, []string{"f"}); err != nil {
		t.Fatal(err)
	}
	c.Get("a") // most recently used
	entries, _ := c.Entries()
	removed, err := c.Prune(2 * entries[0].Bytes)
	if err != nil || len(removed) != 1 || removed[0].Key == "a" {
		t.Fatalf("prune: %v %+v", err, removed)
	}
	if _, ok := c.Get("a"); !ok {
		t.Error("pruned the most recently used entry")
	}
	out := t.TempDir()
	m, _ := c.Get("a")
	if err := c.Restore("a", out, m); err != nil || countBytes(filepath.Join(out, "f")) != 1000 {
		t.Errorf("restore: %v", err)
	}
}

func countBytes(p string) int {
	b, _ := os.ReadFile(p)
	return len(b)
}

func relative(t *testing.T, dir string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, dir)
	if err != nil || filepath.IsAbs(rel) {
		t.Fatalf("no relative path to %s: %v", dir, err)
	}
	return rel
}

// TestInterrupt: cancelling a build (what Ctrl-C does) stops the running
// step and everything it started, caches nothing for it, publishes nothing,
// and the next run resumes from the steps finished before.
func TestInterrupt(t *testing.T) {
	need(t)
	tree, out, cache := t.TempDir(), t.TempDir(), t.TempDir()
	exec.Command("cp", "-a", filepath.Join(repo, "examples/minidoris")+"/.", tree).Run()
	// The step writes in its own tree (the cell's, under the cache), and
	// its child is found by a command line of its own.
	token := fmt.Sprintf("%d.%d", 60+os.Getpid()%100, time.Now().UnixNano()%1000000)
	script := filepath.Join(tree, "build.sh")
	data, _ := os.ReadFile(script)
	hang := "set -eo pipefail\nsleep " + token + " & echo started > \"$(dirname \"$0\")/hang.started\"; wait"
	os.WriteFile(script, []byte(strings.Replace(string(data), "set -eo pipefail", hang, 1)), 0o755)
	in := input(t, setup{target: "generic-armv8", compiler: "gcc", tree: tree})
	started := filepath.Join(cache, "work", "generic-armv8-"+in.Plan.Cell.Doris, "src", "hang.started")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() {
		_, err := Run(ctx, in, Options{Out: out, Cache: cache})
		done <- err
	}()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil && len(testproc.ProcessesWith(token)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			found, _ := filepath.Glob(filepath.Join(cache, "work", "*", "src", "hang.started"))
			t.Fatalf("build.sh never started (%s; found %v; running %v)", started, found, testproc.ProcessesWith(token))
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted build returned %v", err)
	}
	if left := testproc.ProcessesWith(token); len(left) > 0 {
		t.Errorf("the step's child process outlived the interrupt: %v", left)
	}
	c := &Cache{Dir: cache}
	for _, s := range in.Plan.Steps {
		_, ok := c.Get(s.Key)
		if strings.HasPrefix(s.ID, "build:") && ok {
			t.Errorf("interrupted step %s was cached", s.ID)
		}
		if strings.HasPrefix(s.ID, "thirdparty:") && !ok {
			t.Errorf("finished step %s was not cached", s.ID)
		}
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("an interrupted build left %v in the output directory", ents)
	}
}

// flipCached flips 16 bytes in the middle of the cached result of step.
func flipCached(t *testing.T, cache, step string) {
	t.Helper()
	metas, _ := filepath.Glob(filepath.Join(cache, "steps", "*", "meta.json"))
	for _, mp := range metas {
		data, _ := os.ReadFile(mp)
		if !strings.Contains(string(data), `"step": "`+step+`"`) {
			continue
		}
		tp := filepath.Join(filepath.Dir(mp), "files.tar")
		tar, err := os.ReadFile(tp)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 16; i++ {
			tar[len(tar)/2+i] ^= 0x5a
		}
		if err := os.WriteFile(tp, tar, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no cache entry for %s", step)
}

// TestConcurrentBuildsShareOut: two builds of one cell with different
// caches into one --out at the same time both succeed (each stages on its
// own; publishing is serialised), the published build verifies, and no
// staging directory is left behind.
func TestConcurrentBuildsShareOut(t *testing.T) {
	need(t)
	out := t.TempDir()
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		cache := t.TempDir()
		in := input(t, setup{target: "generic-armv8", compiler: "gcc"})
		go func() {
			_, err := Run(context.Background(), in, Options{Out: out, Cache: cache, Jobs: 1})
			errs <- err
		}()
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Errorf("concurrent build: %v", err)
		}
	}
	if _, err := Verify(Dir(out, "2.1.8", "generic-armv8")); err != nil {
		t.Errorf("the published build does not verify: %v", err)
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if e.Name() != "2.1.8" {
			t.Errorf("left in --out: %s", e.Name())
		}
	}
}

// TestRealPackagesSameBytesAnyOrder: built with the real cross compiler,
// a package's install is byte-identical whether the build has the other
// packages or not, and whether they build one at a time or at once (each
// build from an empty cache at the same path, so that only what the
// package saw can differ).
func TestRealPackagesSameBytesAnyOrder(t *testing.T) {
	need(t)
	const target = "kunpeng920"
	cache := filepath.Join(t.TempDir(), "cache")
	builds := []struct {
		packages []string
		atOnce   int
	}{
		{[]string{"openssl", "bitshuffle", "simdprobe", "minilz"}, 1},
		{[]string{"minilz", "simdprobe", "openssl", "bitshuffle"}, 2},
		{[]string{"bitshuffle"}, 2},
	}
	var first map[string]string
	for i, b := range builds {
		if err := os.RemoveAll(cache); err != nil {
			t.Fatal(err)
		}
		in := input(t, setup{target: target, compiler: "clang", packages: b.packages})
		out := t.TempDir()
		if _, err := Run(context.Background(), in, Options{Out: out, Cache: cache, Jobs: 2, PackagesAtOnce: b.atOnce}); err != nil {
			t.Fatalf("build %d (%v): %v", i, b.packages, err)
		}
		got := installed(t, out, target)
		if got["lib/libbitshuffle.a"] == "" {
			t.Fatalf("build %d installed no libbitshuffle.a: %v", i, slices.Collect(maps.Keys(got)))
		}
		if first == nil {
			first = got
			continue
		}
		for f, data := range got {
			if data != first[f] {
				t.Errorf("build %d (%v, %d at once): %s differs from the first build's", i, b.packages, b.atOnce, f)
			}
		}
	}
}
