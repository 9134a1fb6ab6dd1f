package build

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/plan"

	"github.com/dorisarm/dorisarm/internal/simulate"
)

// etaModel is what each step of a cell's plan is expected to take: a step
// in the cache next to nothing, others what the last published build of
// the cell (or its partial build) recorded for them. A step this cell never
// timed takes what it took in the other targets' cells of the same Doris
// version under the same cache (the longest; borrowed: a package's first
// build for a new target is estimated from the targets built before).
// Steps none of these says anything about are unknown.
type etaModel struct {
	steps    []simulate.Step
	known    map[string]bool
	borrowed map[string]bool
	cores    int
	planned  int
}

func (r *runner) etaModel() *etaModel {
	p := r.in.Plan
	prev := map[string]StepRecord{}
	jobs := map[string]int{}
	dir := Dir(r.opts.Out, p.Cell.Doris, p.Cell.Target)
	for _, d := range []string{dir + PartialSuffix, dir} { // the full build's, where both are
		rec, err := ReadRecord(filepath.Join(d, RecordFile))
		if err != nil {
			continue
		}
		for _, s := range rec.Steps {
			prev[s.ID] = s
			jobs[s.ID] = rec.Jobs
		}
	}
	// Steps the published build did not run (a key changed since) may
	// have run in an earlier build of the cell: its work directory keeps
	// the last time of each step by name.
	for id, t := range r.loadTimes() {
		if _, ok := prev[id]; !ok {
			prev[id] = StepRecord{ID: id, Seconds: t.Wall, CPUSeconds: t.CPU}
			jobs[id] = t.Jobs
		}
	}
	others := r.otherTargetsTimes()
	m := &etaModel{known: map[string]bool{}, borrowed: map[string]bool{}, cores: r.opts.Jobs, planned: len(p.Steps)}
	for _, s := range p.Steps {
		st := simulate.Step{ID: s.ID, Needs: s.Needs, Jobs: r.opts.Jobs}
		if s.Kind.Cacheable() {
			if _, ok := r.cache.Get(s.Key); ok {
				st.Wall, m.known[s.ID] = 0.1, true
				m.steps = append(m.steps, st)
				continue
			}
		}
		if ps, ok := prev[s.ID]; ok {
			st.Wall, st.CPU, st.Jobs = ps.Seconds, ps.CPUSeconds, max(jobs[s.ID], 1)
			if ps.Cached {
				st.Wall, st.CPU = ps.RanSeconds, ps.RanCPUSeconds
			}
			m.known[s.ID] = st.Wall > 0
		}
		if t, ok := others[s.ID]; ok && !m.known[s.ID] {
			st.Wall, st.CPU, st.Jobs = t.Wall, t.CPU, max(t.Jobs, 1)
			m.known[s.ID], m.borrowed[s.ID] = true, true
		}
		m.steps = append(m.steps, st)
	}
	return m
}

// otherTargetsTimes is, for each step name, its last time in the cells of
// the other targets of this Doris version under the cache: the longest
// where several have one (a whole profile, wall, CPU and jobs, from one
// cell, so the step's parallelism stays what was measured).
func (r *runner) otherTargetsTimes() map[string]stepTime {
	doris := r.in.Plan.Cell.Doris
	cells, _ := filepath.Glob(filepath.Join(r.opts.Cache, "work", "*-"+doris))
	out := map[string]stepTime{}
	for _, dir := range cells {
		if filepath.Clean(dir) == filepath.Clean(r.work) {
			continue
		}
		for id, t := range readTimes(filepath.Join(dir, timesFile)) {
			if t.Wall > 0 && t.Wall > out[id].Wall {
				out[id] = t
			}
		}
	}
	return out
}

// eta is the simulated time the steps not yet done take on the cell's
// budget, how many of them no earlier build timed (counted as nothing: the
// estimate is then a lower bound) and how many were timed only in other
// targets' cells.
func (m *etaModel) eta(done func(id string) bool) (seconds float64, unknown, borrowed int) {
	var rest []simulate.Step
	left := map[string]bool{}
	for _, s := range m.steps {
		if !done(s.ID) {
			left[s.ID] = true
		}
	}
	for _, s := range m.steps {
		if !left[s.ID] {
			continue
		}
		if !m.known[s.ID] {
			unknown++
		}
		if m.borrowed[s.ID] {
			borrowed++
		}
		t := s
		t.Needs = nil
		for _, n := range s.Needs {
			if left[n] {
				t.Needs = append(t.Needs, n)
			}
		}
		rest = append(rest, t)
	}
	res, err := simulate.Run(rest, max(m.cores, 1))
	if err != nil {
		return 0, len(rest), 0
	}
	return res.Makespan, unknown, borrowed
}

// priorities are each step's longest chain of work to the end of the plan
// (the step's own expected time, or one second for a package step no
// build timed, plus the longest chain of the steps that need it).
func (m *etaModel) priorities(p *plan.Plan) []float64 {
	index := make(map[string]int, len(p.Steps))
	for i, s := range p.Steps {
		index[s.ID] = i
	}
	users := make([][]int, len(p.Steps))
	for i, s := range p.Steps {
		for _, n := range s.Needs {
			if j, ok := index[n]; ok {
				users[j] = append(users[j], i)
			}
		}
	}
	wall := map[string]float64{}
	for _, s := range m.steps {
		if m.known[s.ID] {
			wall[s.ID] = s.Wall
		}
	}
	prio := make([]float64, len(p.Steps))
	// The plan is in a topological order: users come after what they need.
	for i := len(p.Steps) - 1; i >= 0; i-- {
		s := p.Steps[i]
		w, ok := wall[s.ID]
		if !ok && s.Kind == plan.KindThirdparty {
			w = 1
		}
		var after float64
		for _, u := range users[i] {
			after = max(after, prio[u])
		}
		prio[i] = w + after
	}
	return prio
}

// stepTime is how long a step last ran in a cell's work directory.
type stepTime struct {
	Wall float64 `json:"wall"`
	CPU  float64 `json:"cpu,omitempty"`
	Jobs int     `json:"jobs"`
}

// timesFile keeps the last run time of each step of a cell, by step name,
// across builds whose keys changed (the cell's work lock guards it).
const timesFile = "step-times.json"

// maxTimes bounds the times file read back.
const maxTimes = 4 << 20

func (r *runner) loadTimes() map[string]stepTime {
	return readTimes(filepath.Join(r.work, timesFile))
}

// readTimes reads a cell's times file; nil when it is missing or unreadable
// (it only feeds an estimate). Only a regular file of at most maxTimes
// bytes is read: another cell's work directory may hold anything.
func readTimes(path string) map[string]stepTime {
	data, err := fsutil.ReadFile(path, maxTimes)
	if err != nil {
		return nil
	}
	var t map[string]stepTime
	if json.Unmarshal(data, &t) != nil {
		return nil
	}
	return t
}

// saveTimes adds the steps this build ran to the cell's times file. It is
// an estimate's input only: a failure to write it is ignored.
func (r *runner) saveTimes() {
	t := r.loadTimes()
	if t == nil {
		t = map[string]stepTime{}
	}
	r.shared.mu.Lock()
	for _, s := range r.rec.Steps {
		// A sysroot or toolchain step found in its store still took its time.
		if (!s.Cached || r.isSetup(s.ID)) && s.Seconds > 0 {
			t[s.ID] = stepTime{Wall: s.Seconds, CPU: s.CPUSeconds, Jobs: r.rec.Jobs}
		}
	}
	r.shared.mu.Unlock()
	data, err := json.Marshal(t)
	if err != nil || len(data) > maxTimes {
		return
	}
	tmp := filepath.Join(r.work, timesFile+".tmp")
	if os.WriteFile(tmp, data, 0o644) == nil {
		os.Rename(tmp, filepath.Join(r.work, timesFile))
	}
}

// isSetup says whether a step of the plan is a sysroot or toolchain step.
func (r *runner) isSetup(id string) bool {
	i, ok := r.shared.index[id]
	if !ok {
		return false
	}
	k := r.in.Plan.Steps[i].Kind
	return k == plan.KindSysroot || k == plan.KindToolchain
}
