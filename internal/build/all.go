package build

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/scan"
)

// Outcome is what building one cell came to.
type Outcome struct {
	Target     string  `json:"target"`
	Doris      string  `json:"doris"`
	Dir        string  `json:"dir"`
	State      string  `json:"state"` // built, up to date, failed
	Compiler   string  `json:"compiler,omitempty"`
	Steps      int     `json:"steps,omitempty"`
	CacheHits  int     `json:"cache_hits"`
	CacheSteps int     `json:"cache_steps"`
	Seconds    float64 `json:"seconds"`
	Error      string  `json:"error,omitempty"`
	// Err is the error Error says, for its kind (fault.IsEnv: the machine
	// failed the cell, not its build).
	Err error `json:"-"`
	// Rejected is the compiler the toolchain step found unable to build
	// for the sysroot: planning again takes the target's next one.
	Rejected string `json:"-"`
}

// String is the outcome as build prints it.
func (o Outcome) String() string {
	switch o.State {
	case "up to date":
		return fmt.Sprintf("%s  %s  up to date (the published build matches the plan)", o.Dir, o.Target)
	case "failed":
		return fmt.Sprintf("%s  %s  failed: %s", o.Dir, o.Target, o.Error)
	}
	rate := 0.0
	if o.CacheSteps > 0 {
		rate = 100 * float64(o.CacheHits) / float64(o.CacheSteps)
	}
	return fmt.Sprintf("%s  %s  %s  %d steps; cache: %d of %d cacheable steps (%.0f%%); %.1fs",
		o.Dir, o.Target, o.Compiler, o.Steps, o.CacheHits, o.CacheSteps, rate, o.Seconds)
}

// RunAll builds every input. Cells run at once within the --jobs budget
// (Share): each running cell gets an equal part of Options.Jobs for its
// steps. Steps that do not depend on the target (fetch, unpack, the Doris
// patches) have one cache key in every cell: the first cell to reach one
// makes it, the others wait and restore it. A failed cell does not stop the
// others: it is an outcome, and the returned error (a failed gate) names
// every failed target. An interruption stops everything. done is called
// after each cell, one call at a time; the outcomes are in the inputs'
// order.
func RunAll(ctx context.Context, ins []Input, opts Options, done func(Outcome)) ([]Outcome, error) {
	cells, jobs := Share(opts.Jobs, len(ins))
	if opts.Pulls == nil {
		opts.Pulls = &Pulls{}
	}
	opts.Jobs = jobs
	outs := make([]Outcome, len(ins))
	finished := make([]bool, len(ins))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, cells)
start:
	for i, in := range ins {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break start
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			o, ok := runCellReplanning(ctx, in, opts)
			mu.Lock()
			defer mu.Unlock()
			outs[i], finished[i] = o, ok
			if ok && done != nil {
				done(o)
			}
		}()
	}
	wg.Wait()
	got := []Outcome{}
	for i, o := range outs {
		if finished[i] {
			got = append(got, o)
		}
	}
	if ctx.Err() != nil {
		return got, fault.Gatef("interrupted; the cache keeps every finished step, run again to resume")
	}
	return got, Failed(got)
}

// Failed is the error of outcomes that failed: a failed gate naming the
// targets (each said its error as it ended), whose causes keep their kind,
// so a cell that the machine failed (a full disk, the network) makes the
// whole a failure of the machine (fault.IsEnv). Nil when none failed.
func Failed(outs []Outcome) error {
	var failed []string
	var causes []error
	for _, o := range outs {
		if o.State != "failed" {
			continue
		}
		failed = append(failed, o.Target)
		if o.Err != nil {
			causes = append(causes, o.Err)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fault.Because(fault.Gatef("build failed for %s", strings.Join(failed, ", ")), causes...)
}

// Share divides a --jobs budget among n cells: how many run at once, and
// the jobs each of them gives its steps (at least one). A budget under one
// is the default, 2.
func Share(budget, n int) (cells, jobs int) {
	if budget <= 0 {
		budget = 2
	}
	cells = min(max(n, 1), budget)
	return cells, max(budget/cells, 1)
}

// runCellReplanning builds one cell and, while its toolchain step rejects
// its compiler, plans it again with the target's next one
// (Options.Replan) and builds that at once, in the same slot: the other
// cells need not finish first.
func runCellReplanning(ctx context.Context, in Input, opts Options) (Outcome, bool) {
	o, ok := runCell(ctx, in, opts)
	var tried []string
	var rejected []Rejection
	for ok && o.Rejected != "" && opts.Replan != nil && ctx.Err() == nil {
		tried = append(tried, o.Rejected)
		// The record says the cache by name, not this machine's path.
		why := o.Error
		if opts.Cache != "" {
			if abs, err := filepath.Abs(opts.Cache); err == nil {
				why = strings.ReplaceAll(why, abs, "$CACHE")
			}
		}
		rejected = append(rejected, Rejection{Compiler: o.Rejected, Why: why})
		next, err := opts.Replan(ctx, o, tried)
		if err != nil {
			again := Outcome{Target: o.Target, Doris: o.Doris, Dir: o.Dir, State: "failed"}
			again.Err = fmt.Errorf("%s: planning again after %s was rejected: %w", o.Target, o.Rejected, err)
			again.Error = registry.Text(again.Err)
			return again, true
		}
		next.Rejected = slices.Clone(rejected)
		o, ok = runCell(ctx, *next, opts)
	}
	return o, ok
}

// runCell builds one cell; ok is false when the build was interrupted.
func runCell(ctx context.Context, in Input, opts Options) (o Outcome, ok bool) {
	c := in.Plan.Cell
	o = Outcome{Target: c.Target, Doris: c.Doris, Dir: Dir(opts.Out, c.Doris, c.Target)}
	rec, err := Run(ctx, in, opts)
	switch {
	case err != nil && ctx.Err() != nil:
		return o, false
	case err != nil:
		o.State, o.Err, o.Error = "failed", err, registry.Text(err)
		var rej *CompilerRejected
		if errors.As(err, &rej) {
			o.Rejected = rej.Compiler
		}
	default:
		o.State = "built"
		if rec.UpToDate {
			o.State = "up to date"
		}
		o.Compiler = rec.Compiler.Name + " " + rec.Compiler.Version
		o.Steps, o.Seconds = len(rec.Steps), rec.Seconds
		o.CacheHits, o.CacheSteps = len(rec.Cache.Hits), len(rec.Cache.Hits)+len(rec.Cache.Misses)
	}
	return o, true
}

// Inputs pair each planned cell of req with its scan policy: what RunAll
// builds. A plan known to fail (Plan.Unbuildable) is bad input.
func Inputs(req *plan.Request, ps []plan.Planned) ([]Input, error) {
	var ins []Input
	for _, p := range ps {
		if why := p.Plan.Unbuildable; why != "" {
			// Known to fail: refused before any target starts.
			return nil, fault.Inputf("%s: %s", p.Plan.Cell.Target, why)
		}
		pol, err := scan.PolicyFor(req.Matrix, p.Plan.Cell.Target)
		if err != nil {
			return nil, fault.Input(err)
		}
		ins = append(ins, Input{Plan: p.Plan, Recipe: req.Recipe, Tree: req.Tree, Series: p.Series, TC: p.Toolchain, Lock: p.Lock, Policy: pol,
			MakeSysroot: p.MakeSysroot, ProbeCache: p.ProbeCache, Runtime: p.Runtime})
	}
	return ins, nil
}
