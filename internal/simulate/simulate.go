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
// 50% efficiency, and the last ready one all that are free.
package simulate

import (
	"errors"
	"fmt"
	"math"
	"sort"
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

func newGraph(steps []Step) (*graph, error) {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		if _, dup := index[s.ID]; dup {
			return nil, fmt.Errorf("step %s is in the profile twice", s.ID)
		}
		if s.Wall < 0 || s.CPU < 0 || math.IsNaN(s.Wall) || math.IsNaN(s.CPU) || math.IsInf(s.Wall, 0) || math.IsInf(s.CPU, 0) {
			return nil, fmt.Errorf("step %s: wall %v s, CPU %v s: want finite times of 0 or more", s.ID, s.Wall, s.CPU)
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
		var cyc []string
		for i := range steps {
			if indeg[i] > 0 {
				cyc = append(cyc, steps[i].ID)
			}
		}
		return nil, errors.New("the steps' needs form a cycle among " + strings.Join(cyc, ", "))
	}
	return g, nil
}

// schedule runs the list scheduler and returns the makespan. Ready steps
// start in order of their longest remaining path (ties by ID), each with
// the cores it can use well, or all that are free.
func schedule(steps []Step, g *graph, rest []float64, cores int) float64 {
	type run struct {
		n     int
		end   float64
		cores int
	}
	indeg := append([]int(nil), g.indeg...)
	var ready []int
	for n := range steps {
		if indeg[n] == 0 {
			ready = append(ready, n)
		}
	}
	var running []run
	free, now, done := cores, 0.0, 0
	for done < len(steps) {
		sort.Slice(ready, func(a, b int) bool {
			ra, rb := rest[ready[a]], rest[ready[b]]
			if ra != rb {
				return ra > rb
			}
			return steps[ready[a]].ID < steps[ready[b]].ID
		})
		for len(ready) > 0 && free > 0 {
			n := ready[0]
			ready = ready[1:]
			// The cores it uses well; the last ready step also takes the
			// rest, as make -j does with a budget nothing else wants
			// (idle cores shorten no step).
			k := min(free, steps[n].Useful(cores))
			if len(ready) == 0 {
				k = free
			}
			free -= k
			running = append(running, run{n, now + steps[n].Time(k), k})
		}
		// The next step to end.
		first := 0
		for i, r := range running {
			if r.end < running[first].end || r.end == running[first].end && steps[r.n].ID < steps[running[first].n].ID {
				first = i
			}
		}
		r := running[first]
		running = append(running[:first], running[first+1:]...)
		now, free = r.end, free+r.cores
		done++
		for _, m := range g.users[r.n] {
			if indeg[m]--; indeg[m] == 0 {
				ready = append(ready, m)
			}
		}
	}
	return now
}
