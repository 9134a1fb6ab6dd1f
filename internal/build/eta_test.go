package build

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/simulate"
)

// TestPrioritiesAndETA: a package others wait for comes before one
// nothing waits for, timed or not; the time left is the simulated
// schedule of what is not done, a lower bound when a step was never timed.
func TestPrioritiesAndETA(t *testing.T) {
	p := &plan.Plan{Steps: []plan.Step{
		{ID: "thirdparty:GFLAGS", Kind: plan.KindThirdparty},
		{ID: "thirdparty:LZ4", Kind: plan.KindThirdparty},
		{ID: "thirdparty:GLOG", Kind: plan.KindThirdparty, Needs: []string{"thirdparty:GFLAGS"}},
		{ID: "collect", Kind: plan.KindCollect, Needs: []string{"thirdparty:GLOG", "thirdparty:LZ4"}},
	}}
	untimed := &etaModel{known: map[string]bool{}, cores: 2}
	for _, s := range p.Steps {
		untimed.steps = append(untimed.steps, simulate.Step{ID: s.ID, Needs: s.Needs, Jobs: 2})
	}
	pr := untimed.priorities(p)
	if !(pr[0] > pr[1]) {
		t.Errorf("untimed: GFLAGS (GLOG waits for it) %v, LZ4 %v: want GFLAGS first", pr[0], pr[1])
	}
	// Timed: LZ4 alone takes longer than GFLAGS then GLOG: it goes first.
	timed := &etaModel{known: map[string]bool{}, cores: 2}
	for _, s := range []simulate.Step{
		{ID: "thirdparty:GFLAGS", Wall: 20, CPU: 20, Jobs: 2},
		{ID: "thirdparty:LZ4", Wall: 200, CPU: 200, Jobs: 2},
		{ID: "thirdparty:GLOG", Needs: []string{"thirdparty:GFLAGS"}, Wall: 80, CPU: 80, Jobs: 2},
		{ID: "collect", Needs: []string{"thirdparty:GLOG", "thirdparty:LZ4"}, Wall: 1, CPU: 1, Jobs: 2},
	} {
		timed.steps = append(timed.steps, s)
		timed.known[s.ID] = true
	}
	pr = timed.priorities(p)
	if !(pr[1] > pr[0]) {
		t.Errorf("timed: LZ4 %v, GFLAGS %v: want LZ4 first", pr[1], pr[0])
	}
	none := func(string) bool { return false }
	if secs, unknown, _ := timed.eta(none); unknown != 0 || secs < 200 || secs > 202 {
		t.Errorf("nothing done: %v s left (%d unknown), want LZ4 beside GFLAGS+GLOG, then collect: 201 s", secs, unknown)
	}
	lz4Done := func(id string) bool { return id == "thirdparty:LZ4" }
	if secs, _, _ := timed.eta(lz4Done); secs < 100 || secs > 102 {
		t.Errorf("LZ4 done: %v s left, want GFLAGS, GLOG, collect: 101 s", secs)
	}
	if _, unknown, _ := untimed.eta(none); unknown != 4 {
		t.Errorf("untimed: %d unknown steps, want 4", unknown)
	}
}

// TestTimesOutliveKeys: a build whose keys changed (a patch edited) and
// that publishes elsewhere still knows how long its steps took last time:
// the cell's work directory keeps them by step name. The first build knew
// nothing, and estimated nothing.
func TestTimesOutliveKeys(t *testing.T) {
	t.Parallel()
	const target = "kunpeng920"
	cache := t.TempDir()
	var first, second bytes.Buffer
	fx := &fakeExec{}
	if _, err := Run(context.Background(), fastInput(t, target, ""), Options{Out: t.TempDir(), Cache: cache, Exec: fx.exec, Progress: NewProgress(&first, false)}); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), fastInput(t, target, editedPatches(t)), Options{Out: t.TempDir(), Cache: cache, Exec: fx.exec, Progress: NewProgress(&second, false)}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(first.String(), "left)") {
		t.Errorf("the first build's progress estimates a time left, with no step ever timed:\n%s", first.String())
	}
	if strings.Contains(second.String(), "never timed") || !strings.Contains(second.String(), "left)") {
		t.Errorf("the second build's progress:\n%s\nwant every step timed", second.String())
	}
}

// TestTimesFromOtherTargets: a target's first build under a cache where
// another target of the same Doris version was built estimates its time
// left from that target's step times, and says so; a target of another
// cache knows nothing and estimates nothing.
func TestTimesFromOtherTargets(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	fx := &fakeExec{}
	if _, err := Run(context.Background(), fastInput(t, "kunpeng920", ""), Options{Out: t.TempDir(), Cache: cache, Exec: fx.exec}); err != nil {
		t.Fatal(err)
	}
	// The fake runs each step in no time: make kunpeng920's steps take
	// 100 s each, so the estimate's size shows where it came from.
	in := fastInput(t, "graviton3", "")
	timesPath := filepath.Join(cache, "work", "kunpeng920-"+in.Plan.Cell.Doris, timesFile)
	times := readTimes(timesPath)
	if len(times) == 0 {
		t.Fatalf("%s: kunpeng920's build left no step times", timesPath)
	}
	for id, st := range times {
		st.Wall, st.CPU = 100, 100
		times[id] = st
	}
	data, err := json.Marshal(times)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(timesPath, data, 0o644); err != nil {
		t.Fatal(err)
	}

	var got bytes.Buffer
	if _, err := Run(context.Background(), in, Options{Out: t.TempDir(), Cache: cache, Exec: fx.exec, Progress: NewProgress(&got, false)}); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\(about ([0-9hms.]+) left; (\d+) steps timed only for other targets\)`).FindStringSubmatch(got.String())
	if m == nil {
		t.Fatalf("graviton3's first build, after kunpeng920's under one cache:\n%s\nwant an estimate from kunpeng920's times, saying so", got.String())
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d < 100*time.Second {
		t.Errorf("estimate %s: want at least one of kunpeng920's 100 s steps", m[1])
	}
	if strings.Contains(got.String(), "never timed") {
		t.Errorf("a step kunpeng920 timed reads as never timed:\n%s", got.String())
	}

	var alone bytes.Buffer
	if _, err := Run(context.Background(), fastInput(t, "graviton3", ""), Options{Out: t.TempDir(), Cache: t.TempDir(), Exec: fx.exec, Progress: NewProgress(&alone, false)}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(alone.String(), "other targets") || strings.Contains(alone.String(), "about") {
		t.Errorf("graviton3 under a cache of its own borrowed times:\n%s", alone.String())
	}
}

// TestReadTimesRefusesWhatIsNotAFile: another cell's times file is read
// only when it is a regular file of bounded size; a named pipe there
// blocked the build's estimate (and so the build) for ever.
func TestReadTimesRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, timesFile)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan map[string]stepTime, 1)
	go func() { done <- readTimes(fifo) }()
	select {
	case got := <-done:
		if got != nil {
			t.Errorf("a named pipe read as times %v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("readTimes blocked on a named pipe")
	}
	big := filepath.Join(dir, "big.json")
	var b strings.Builder
	b.WriteString(`{"x":{"wall":1,"jobs":1}`)
	for i := 0; b.Len() <= maxTimes; i++ {
		fmt.Fprintf(&b, `,"step%d":{"wall":1,"jobs":1}`, i)
	}
	b.WriteString("}")
	if err := os.WriteFile(big, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readTimes(big); got != nil {
		t.Errorf("a times file over %d bytes was read: %v", maxTimes, got)
	}
}

// TestStepCountsAgree: the progress line that ends a build, the record
// and the outcome give the same step count (the plan's, the scan step
// included) and the same cache counts.
func TestStepCountsAgree(t *testing.T) {
	const target = "kunpeng920"
	in := fastInput(t, target, "")
	var out bytes.Buffer
	fx := &fakeExec{}
	opts := Options{Out: t.TempDir(), Cache: t.TempDir(), Exec: fx.exec, Progress: NewProgress(&out, false)}
	rec, err := Run(context.Background(), in, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Steps) != len(in.Plan.Steps) {
		t.Errorf("the record lists %d steps, the plan has %d", len(rec.Steps), len(in.Plan.Steps))
	}
	onDisk, err := Verify(Dir(opts.Out, in.Plan.Cell.Doris, target))
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk.Steps) != len(in.Plan.Steps) {
		t.Errorf("the published record lists %d steps, the plan has %d", len(onDisk.Steps), len(in.Plan.Steps))
	}
	want := fmt.Sprintf("(%d steps; %d of %d cacheable steps from the cache)", len(in.Plan.Steps), len(rec.Cache.Hits), len(rec.Cache.Hits)+len(rec.Cache.Misses))
	if !strings.Contains(out.String(), want) {
		t.Errorf("the progress does not end with %q:\n%s", want, out.String())
	}
}
