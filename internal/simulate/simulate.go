// Package simulate replays a build's recorded step profiles on a machine
// with another number of cores: what a 16- or 64-core runner would take for
// the steps a 2-core machine measured, given the steps' edges.
//
// A step's profile is its wall time, the CPU time its programs used, and
// the cores it had (--jobs). Its speed-up on k cores follows Amdahl's law
// with the serial share the profile implies: a step that kept 1.9 of 2
// cores busy is almost all parallel (a compile), one that kept 1.0 busy is
// serial (a configure script, a link). The scheduler is list scheduling by
// longest remaining path; a step gets the cores it can use at better than
// 50% efficiency, and the last ready one all that are free, until another
// is ready and takes back what it uses well (the step's end moves).
package simulate

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Step is one step's measured profile.
type Step struct {
	ID    string   `json:"id"`
	Needs []string `json:"needs,omitempty"`
	Wall  float64  `json:"wall"` // seconds, as measured
	CPU   float64  `json:"cpu"`  // user+system seconds; 0: not measured
	Jobs  int      `json:"jobs"` // the cores it was given when measured
}

// serial returns the step's total work (seconds on one core) and the
// serial share of it, from its profile: W = T1·(s + (1−s)/J) with T1 the
// CPU time. A step that used no more than one core on average, or whose
// CPU time was not measured, is serial.
func (s Step) serial() (work, share float64) {
	if s.Wall == 0 {
		return 0, 1 // took no time: whatever CPU time rounding left is noise
	}
	if s.CPU <= s.Wall || s.Jobs <= 1 {
		return s.Wall, 1
	}
	p := s.CPU / s.Wall // average cores busy
	j := float64(s.Jobs)
	share = (1/p - 1/j) / (1 - 1/j)
	return s.CPU, math.Min(1, math.Max(0, share))
}

// Time is how long the step takes on k cores.
func (s Step) Time(k int) float64 {
	work, share := s.serial()
	return work * (share + (1-share)/float64(max(k, 1)))
}

// Useful is the most cores the step uses at better than 50% efficiency
// (efficiency 1/(k·s + 1 − s) > ½ ⇔ k < (1+s)/s), at most n: a serial
// step one, a step with a third serial three.
func (s Step) Useful(n int) int {
	_, share := s.serial()
	if share <= 0 {
		return n
	}
	return max(1, min(n, int(math.Floor((1+share)/share-1e-9))))
}

// Result is one simulated machine.
type Result struct {
	Cores int `json:"cores"`
	// Makespan is the simulated wall time of the whole graph.
	Makespan float64 `json:"makespan"`
	// CriticalPath is the longest chain of steps, each on all the cores
	// (no schedule can be shorter), and Path its steps.
	CriticalPath float64  `json:"critical_path"`
	Path         []string `json:"path"`
	// SerialSum is the measured wall times added up: the steps one after
	// another, as measured.
	SerialSum float64 `json:"serial_sum"`
	// WorkBound is the total work over the cores (no schedule can be
	// shorter either).
	WorkBound float64 `json:"work_bound"`
	// Unmeasured counts steps with no CPU time, simulated as serial.
	Unmeasured int `json:"unmeasured,omitempty"`
}

// Run simulates steps on a machine with the given number of cores.
func Run(steps []Step, cores int) (*Result, error) {
	if cores < 1 {
		return nil, fmt.Errorf("%d cores: want at least 1", cores)
	}
	g, err := newGraph(steps)
	if err != nil {
		return nil, err
	}
	res := &Result{Cores: cores}
	var work float64
	for _, s := range steps {
		res.SerialSum += s.Wall
		w, _ := s.serial()
		work += w
		if s.CPU == 0 && s.Wall > 0 {
			res.Unmeasured++
		}
	}
	res.WorkBound = work / float64(cores)
	// Longest path to the end from each step, each step on all cores:
	// the critical path and the scheduler's priority.
	rest := make([]float64, len(steps))
	next := make([]int, len(steps))
	for i := len(g.order) - 1; i >= 0; i-- {
		n := g.order[i]
		next[n] = -1
		for _, m := range g.users[n] {
			if next[n] < 0 || rest[m] > rest[next[n]] {
				next[n] = m
			}
		}
		rest[n] = steps[n].Time(cores)
		if next[n] >= 0 {
			rest[n] += rest[next[n]]
		}
	}
	start := -1
	for n := range steps {
		if g.indeg[n] == 0 && (start < 0 || rest[n] > rest[start]) {
			start = n
		}
	}
	for n := start; n >= 0; n = next[n] {
		res.Path = append(res.Path, steps[n].ID)
	}
	if start >= 0 {
		res.CriticalPath = rest[start]
	}
	res.Makespan = schedule(steps, g, rest, cores)
	return res, nil
}

type graph struct {
	users [][]int // the steps that need each step
	indeg []int
	order []int // a topological order
}

// MaxSeconds bounds a step's wall and CPU time (about 116 days): a record
// with more is not a measurement.
const MaxSeconds = 1e7

// Check says whether steps form a profile Run can replay: unique IDs,
// finite times within MaxSeconds, no negative jobs, needs that name steps
// of the profile, no cycle. The error names the step and what to fix.
func Check(steps []Step) error {
	_, err := newGraph(steps)
	return err
}

func newGraph(steps []Step) (*graph, error) {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		if s.ID == "" {
			return nil, fmt.Errorf("step %d of the profile has no id", i+1)
		}
		if _, dup := index[s.ID]; dup {
			return nil, fmt.Errorf("step %s is in the profile twice", s.ID)
		}
		for _, t := range []float64{s.Wall, s.CPU} {
			if !(t >= 0 && t <= MaxSeconds) { // NaN fails both
				return nil, fmt.Errorf("step %s: wall %v s, CPU %v s: want times from 0 to %.0f s (is the record a real measurement?)", s.ID, s.Wall, s.CPU, MaxSeconds)
			}
		}
		if s.Jobs < 0 {
			return nil, fmt.Errorf("step %s: measured at %d jobs: want 1 or more (0: not recorded)", s.ID, s.Jobs)
		}
		index[s.ID] = i
	}
	g := &graph{users: make([][]int, len(steps)), indeg: make([]int, len(steps))}
	for i, s := range steps {
		for _, need := range s.Needs {
			j, ok := index[need]
			if !ok {
				return nil, fmt.Errorf("step %s needs %s, which the profile does not hold", s.ID, need)
			}
			g.users[j] = append(g.users[j], i)
			g.indeg[i]++
		}
	}
	indeg := append([]int(nil), g.indeg...)
	var queue []int
	for i := range steps {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		g.order = append(g.order, n)
		for _, m := range g.users[n] {
			if indeg[m]--; indeg[m] == 0 {
				queue = append(queue, m)
			}
		}
	}
	if len(g.order) != len(steps) {
		return nil, errors.New("the steps' needs form a cycle: " + strings.Join(cycle(steps, index, indeg), " → "))
	}
	return g, nil
}

// cycle finds one cycle among the steps a topological sort left (indeg >
// 0): from any of them, following needs that were left too must come back
// to a step already on the walk. The steps that merely come after a cycle
// are not on it.
func cycle(steps []Step, index map[string]int, indeg []int) []string {
	start := -1
	for i := range steps {
		if indeg[i] > 0 {
			start = i
			break
		}
	}
	at := map[int]int{} // step → its place on the walk
	var walk []int
	for n := start; n >= 0; {
		if k, seen := at[n]; seen {
			var ids []string
			for _, m := range walk[k:] {
				ids = append(ids, steps[m].ID)
			}
			return append(ids, steps[n].ID)
		}
		at[n] = len(walk)
		walk = append(walk, n)
		next := -1
		for _, need := range steps[n].Needs {
			if j := index[need]; indeg[j] > 0 {
				next = j
				break
			}
		}
		n = next
	}
	return nil // not reached: a step left by the sort has a need left too
}

// queue is a heap (container/heap) of items ordered by less.
type queue[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (q *queue[T]) Len() int           { return len(q.items) }
func (q *queue[T]) Less(a, b int) bool { return q.less(q.items[a], q.items[b]) }
func (q *queue[T]) Swap(a, b int)      { q.items[a], q.items[b] = q.items[b], q.items[a] }
func (q *queue[T]) Push(x any)         { q.items = append(q.items, x.(T)) }
func (q *queue[T]) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}

type run struct {
	n     int
	end   float64
	cores int
	// done is the share of the step's work finished at time at: a step
	// given idle cores gives back those beyond its useful ones when
	// another becomes ready, and its end moves.
	done, at float64
}

// schedule runs the list scheduler and returns the makespan. Ready steps
// start in order of their longest remaining path (ties by ID), each with
// the cores it can use well, or all that are free. Both queues are heaps:
// a profile of many steps takes O(n log n).
func schedule(steps []Step, g *graph, rest []float64, cores int) float64 {
	indeg := append([]int(nil), g.indeg...)
	// Ready steps by longest remaining path, running ones by when they
	// end; ties by ID.
	ready := &queue[int]{less: func(a, b int) bool {
		if rest[a] != rest[b] {
			return rest[a] > rest[b]
		}
		return steps[a].ID < steps[b].ID
	}}
	for n := range steps {
		if indeg[n] == 0 {
			ready.items = append(ready.items, n)
		}
	}
	heap.Init(ready)
	running := &queue[run]{less: func(a, b run) bool {
		if a.end != b.end {
			return a.end < b.end
		}
		return steps[a.n].ID < steps[b.n].ID
	}}
	free, now, done := cores, 0.0, 0
	for done < len(steps) {
		// The ready steps want the cores they use well; what they lack is
		// taken from steps that hold more than that.
		want := 0
		for _, n := range ready.items {
			if want += steps[n].Useful(cores); want >= cores {
				break
			}
		}
		if need := min(want, cores) - free; need > 0 {
			free += reclaim(running, steps, cores, now, need)
		}
		for ready.Len() > 0 && free > 0 {
			n := heap.Pop(ready).(int)
			// The cores it uses well; the last ready step also takes the
			// rest, as make -j does with a budget nothing else wants
			// (idle cores shorten no step), until another is ready.
			k := min(free, steps[n].Useful(cores))
			if ready.Len() == 0 {
				k = free
			}
			free -= k
			heap.Push(running, run{n: n, end: now + steps[n].Time(k), cores: k, at: now})
		}
		r := heap.Pop(running).(run) // the next step to end
		now, free = r.end, free+r.cores
		done++
		for _, m := range g.users[r.n] {
			if indeg[m]--; indeg[m] == 0 {
				heap.Push(ready, m)
			}
		}
	}
	return now
}

// reclaim takes back, at time now, up to need cores from running steps
// that hold more than they use well (given them while nothing else was
// ready), moving their ends to what the rest of their work takes on fewer
// cores. It returns the cores freed.
func reclaim(running *queue[run], steps []Step, cores int, now float64, need int) int {
	freed := 0
	for i := range running.items {
		if freed >= need {
			break
		}
		r := &running.items[i]
		extra := r.cores - steps[r.n].Useful(cores)
		if extra <= 0 {
			continue
		}
		if t := steps[r.n].Time(r.cores); t > 0 {
			r.done = min(1, r.done+(now-r.at)/t)
		}
		take := min(extra, need-freed)
		freed += take
		r.cores, r.at = r.cores-take, now
		r.end = now + (1-r.done)*steps[r.n].Time(r.cores)
	}
	if freed > 0 {
		heap.Init(running)
	}
	return freed
}
