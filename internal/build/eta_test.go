package build

import (
	"bytes"
	"context"
	"strings"
	"testing"

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
	if secs, unknown := timed.eta(none); unknown != 0 || secs < 200 || secs > 202 {
		t.Errorf("nothing done: %v s left (%d unknown), want LZ4 beside GFLAGS+GLOG, then collect: 201 s", secs, unknown)
	}
	lz4Done := func(id string) bool { return id == "thirdparty:LZ4" }
	if secs, _ := timed.eta(lz4Done); secs < 100 || secs > 102 {
		t.Errorf("LZ4 done: %v s left, want GFLAGS, GLOG, collect: 101 s", secs)
	}
	if _, unknown := untimed.eta(none); unknown != 4 {
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
