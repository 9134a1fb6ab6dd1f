package simulate

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestAmdahl: the serial share a profile implies, and the times it gives.
func TestAmdahl(t *testing.T) {
	for _, c := range []struct {
		s           Step
		work, share float64
		t1, t4      float64
		useful64    int
	}{
		// Kept 2 of 2 cores busy: all parallel.
		{Step{Wall: 10, CPU: 20, Jobs: 2}, 20, 0, 20, 5, 64},
		// One core busy: serial, whatever the cores.
		{Step{Wall: 10, CPU: 10, Jobs: 2}, 10, 1, 10, 10, 1},
		// Less than one core (waiting on disk): serial at its wall time.
		{Step{Wall: 10, CPU: 4, Jobs: 2}, 10, 1, 10, 10, 1},
		// Not measured: serial.
		{Step{Wall: 7, Jobs: 2}, 7, 1, 7, 7, 1},
		// 1.5 of 2 cores: 1/p = 2/3, s = (2/3 − 1/2)/(1/2) = 1/3; T1 = 15.
		{Step{Wall: 10, CPU: 15, Jobs: 2}, 15, 1.0 / 3, 15, 15 * (1.0/3 + 2.0/3/4), 3},
	} {
		w, s := c.s.serial()
		if !near(w, c.work) || !near(s, c.share) {
			t.Errorf("%+v: work %v share %v, want %v %v", c.s, w, s, c.work, c.share)
		}
		if !near(c.s.Time(1), c.t1) || !near(c.s.Time(4), c.t4) {
			t.Errorf("%+v: t(1) %v t(4) %v, want %v %v", c.s, c.s.Time(1), c.s.Time(4), c.t1, c.t4)
		}
		if u := c.s.Useful(64); u != c.useful64 {
			t.Errorf("%+v: useful on 64 cores %d, want %d", c.s, u, c.useful64)
		}
		// The profile itself is reproduced at the cores it was measured on.
		if c.s.CPU > c.s.Wall && !near(c.s.Time(c.s.Jobs), c.s.Wall) {
			t.Errorf("%+v: t(jobs) %v, want the measured wall", c.s, c.s.Time(c.s.Jobs))
		}
	}
}

// TestSchedule: a diamond of serial steps and a parallel one.
//
//	fetch(1) → a(10, serial) ┐
//	         → b(4, serial)  ├→ link(2, serial)
//	         → c(8 CPU on 2) ┘
func TestSchedule(t *testing.T) {
	steps := []Step{
		{ID: "fetch", Wall: 1, CPU: 1, Jobs: 2},
		{ID: "a", Needs: []string{"fetch"}, Wall: 10, CPU: 10, Jobs: 2},
		{ID: "b", Needs: []string{"fetch"}, Wall: 4, CPU: 4, Jobs: 2},
		{ID: "c", Needs: []string{"fetch"}, Wall: 4, CPU: 8, Jobs: 2},
		{ID: "link", Needs: []string{"a", "b", "c"}, Wall: 2, CPU: 2, Jobs: 2},
	}
	for _, c := range []struct {
		cores    int
		makespan float64
		critical float64
	}{
		// 1 core: all in a row, c at 8 s.
		{1, 1 + 10 + 4 + 8 + 2, 1 + 10 + 2},
		// 2 cores: a on one core (longest path first); b and c tie (6 s
		// to the end), b first by ID on the other core, then c on that
		// one core (it could use 2): 1 + 4 + 8 = 13 after a's 11.
		{2, 1 + 12 + 2, 1 + 10 + 2},
		// 16 cores: a and b on a core each, c on the 14 left (8/14 s);
		// all end by a: the critical path.
		{16, 1 + 10 + 2, 1 + 10 + 2},
	} {
		r, err := Run(steps, c.cores)
		if err != nil {
			t.Fatal(err)
		}
		if !near(r.Makespan, c.makespan) || !near(r.CriticalPath, c.critical) {
			t.Errorf("%d cores: makespan %v critical %v, want %v %v", c.cores, r.Makespan, r.CriticalPath, c.makespan, c.critical)
		}
		if strings.Join(r.Path, ",") != "fetch,a,link" || !near(r.SerialSum, 21) || !near(r.WorkBound, 25/float64(c.cores)) {
			t.Errorf("%d cores: path %v serial %v work bound %v", c.cores, r.Path, r.SerialSum, r.WorkBound)
		}
		if r.Makespan < r.CriticalPath-1e-9 || r.Makespan < r.WorkBound-1e-9 {
			t.Errorf("%d cores: makespan %v under a lower bound", c.cores, r.Makespan)
		}
	}
}

// TestLoneStepTakesIdleCores: a chain of mostly parallel steps (a ninth
// serial: nine cores at better than 50% efficiency) with nothing beside it
// runs each step on all 64 cores, as make -j64 would with the budget to
// itself: the makespan is the critical path, not the nine-core time.
func TestLoneStepTakesIdleCores(t *testing.T) {
	steps := []Step{
		{ID: "configure", Wall: 10, CPU: 18, Jobs: 2},
		{ID: "compile", Needs: []string{"configure"}, Wall: 10, CPU: 18, Jobs: 2},
	}
	if u := steps[0].Useful(64); u != 9 {
		t.Fatalf("useful cores %d, want 9: the profile does not say what the test is about", u)
	}
	r, err := Run(steps, 64)
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.Makespan, r.CriticalPath) || !near(r.CriticalPath, 2*steps[0].Time(64)) {
		t.Errorf("makespan %v critical path %v, want both %v", r.Makespan, r.CriticalPath, 2*steps[0].Time(64))
	}
}

// TestIdleCoresGoBack: a step given idle cores (the last one ready) gives
// back what a step that becomes ready later uses well, instead of keeping
// them to its end while that step crawls on the one core freed.
func TestIdleCoresGoBack(t *testing.T) {
	// B uses 4 cores well (a quarter serial); D is serial and comes first
	// (B waits for it), so A, alone ready then, takes the other 63.
	steps := []Step{
		{ID: "A", Wall: 100, CPU: 160, Jobs: 2},
		{ID: "B", Needs: []string{"D"}, Wall: 100, CPU: 160, Jobs: 2},
		{ID: "D", Wall: 2, CPU: 2, Jobs: 2},
	}
	if u := steps[1].Useful(64); u != 4 {
		t.Fatalf("B uses %d cores well, the test wants 4", u)
	}
	r, err := Run(steps, 64)
	if err != nil {
		t.Fatal(err)
	}
	// B from t=2 on 4 cores: 2 + Time(4); on the one core D freed it
	// would end at 2 + Time(1).
	if want := 2 + steps[1].Time(4); math.Abs(r.Makespan-want) > 1e-6 {
		t.Errorf("makespan %v, want %v (B on the 4 cores it uses well; %v on one)", r.Makespan, want, 2+steps[1].Time(1))
	}
}

// TestBadProfiles: a missing step, a cycle (named alone, not the steps
// after it), a duplicate, times that are no measurement, negative jobs, a
// step with no id, no cores.
func TestBadProfiles(t *testing.T) {
	for want, steps := range map[string][]Step{
		"needs x, which the profile does not hold": {{ID: "a", Needs: []string{"x"}}},
		"form a cycle: a → b → a":                  {{ID: "a", Needs: []string{"b"}}, {ID: "b", Needs: []string{"a"}}},
		"form a cycle: b → b": {{ID: "a"}, {ID: "b", Needs: []string{"a", "b"}},
			{ID: "c", Needs: []string{"b"}}, {ID: "d", Needs: []string{"c"}}},
		"in the profile twice":            {{ID: "a"}, {ID: "a"}},
		"want times from 0 to":            {{ID: "a", Wall: math.NaN()}},
		"CPU 1e+308 s: want":              {{ID: "a", Wall: 1, CPU: 1e308}},
		"wall -5 s":                       {{ID: "a", Wall: -5}},
		"at -5 jobs: want 1":              {{ID: "a", Wall: 1, Jobs: -5}},
		"step 2 of the profile has no id": {{ID: "a"}, {Wall: 1}},
	} {
		if _, err := Run(steps, 4); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q", steps, err, want)
		}
	}
	// A step that took no time takes none, whatever CPU time rounding left.
	if r, err := Run([]Step{{ID: "a", Wall: 0, CPU: 3, Jobs: 2}}, 4); err != nil || r.Makespan != 0 {
		t.Errorf("a step of 0 s wall: makespan %v, %v; want 0", r, err)
	}
	if _, err := Run(nil, 0); err == nil {
		t.Error("0 cores accepted")
	}
	if r, err := Run(nil, 4); err != nil || r.Makespan != 0 {
		t.Errorf("no steps: %+v %v", r, err)
	}
}

// BenchmarkScheduleFanOut: 100,000 steps that all need one, on 64 cores
// (the ready list re-sorted after every event made this quadratic: 20,000
// steps took 1.45 s, 294,000 several minutes).
func BenchmarkScheduleFanOut(b *testing.B) {
	steps := []Step{{ID: "root", Wall: 1, CPU: 2, Jobs: 2}}
	for i := range 100000 {
		steps = append(steps, Step{ID: fmt.Sprintf("s%06d", i), Needs: []string{"root"}, Wall: float64(1 + i%7), CPU: float64(2 + i%5), Jobs: 2})
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Run(steps, 64); err != nil {
			b.Fatal(err)
		}
	}
}
