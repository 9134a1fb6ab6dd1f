package build

import (
	"context"
	"fmt"
	"strings"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/plan"
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

// RunAll builds every input in turn. A failed cell does not stop the
// others: it is an outcome, and the returned error (a failed gate) names
// every failed target. An interruption stops everything. done is called
// after each cell.
func RunAll(ctx context.Context, ins []Input, opts Options, done func(Outcome)) ([]Outcome, error) {
	outs := []Outcome{}
	var failed []string
	for _, in := range ins {
		c := in.Plan.Cell
		o := Outcome{Target: c.Target, Doris: c.Doris, Dir: Dir(opts.Out, c.Doris, c.Target)}
		rec, err := Run(ctx, in, opts)
		switch {
		case err != nil && ctx.Err() != nil:
			return outs, fault.Gatef("interrupted; the cache keeps every finished step, run again to resume")
		case err != nil:
			o.State, o.Error = "failed", err.Error()
			failed = append(failed, c.Target)
		default:
			o.State = "built"
			if rec.UpToDate {
				o.State = "up to date"
			}
			o.Compiler = rec.Compiler.Name + " " + rec.Compiler.Version
			o.Steps, o.Seconds = len(rec.Steps), rec.Seconds
			o.CacheHits, o.CacheSteps = len(rec.Cache.Hits), len(rec.Cache.Hits)+len(rec.Cache.Misses)
		}
		outs = append(outs, o)
		if done != nil {
			done(o)
		}
	}
	if len(failed) > 0 {
		return outs, fault.Gatef("build failed for %s", strings.Join(failed, ", "))
	}
	return outs, nil
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
		ins = append(ins, Input{Plan: p.Plan, Recipe: req.Recipe, Tree: req.Tree, Series: p.Series, TC: p.Toolchain, Lock: p.Lock, Policy: pol})
	}
	return ins, nil
}
