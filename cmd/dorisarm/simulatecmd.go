package main

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/simulate"
)

func newSimulateCmd(g *globals) *cobra.Command {
	var (
		format string
		cores  []string
	)
	cmd := &cobra.Command{
		Use:   "simulate DIR...",
		Short: "Replay published builds' measured step profiles on machines with more cores",
		Long: `simulate reads the build records of published builds (dorisarm build --out
directories, <out>/<doris>/<target>; several builds of one target, a long
package list built in parts, merge) and replays their steps on machines with
the --cores given: each step's wall and CPU time, measured at the build's
--jobs, says how much of it is serial (Amdahl's law); steps run as soon as
the steps they need have ended, longest remaining path first, each on the
cores it uses at better than 50% efficiency (the last one ready on all that
are free, as make -j uses a budget nothing else wants, until another step is
ready: it then gives back what that one uses well, and its end moves).

It prints, per machine, the simulated makespan; the critical path (the
longest chain of steps, each on all the cores: no schedule is shorter); the
total work over the cores (no schedule is shorter either); and the measured
wall times added up (the build as it ran, one step after another). A step
restored from the cache counts with the times it took when it ran. Steps
without a CPU time (records of dorisarm before step profiles, or steps that
run no program) are simulated as serial, and counted. Records of several Doris
versions keep their steps apart (named <target>@<doris>/<step>); each record is
checked on its own first, so an error names its file.`,
		Example: `  dorisarm simulate --cores 2,16,64 out/2.1.7-rc01/kunpeng920 out/2.1.7-rc01/graviton3`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			ns, err := parseCores(cores)
			if err != nil {
				return fault.Input(err)
			}
			steps, builds, err := loadProfiles(dirs)
			if err != nil {
				return fault.Input(err)
			}
			out := simulation{Builds: builds, Steps: len(steps)}
			for _, n := range ns {
				r, err := simulate.Run(steps, n)
				if err != nil {
					return fault.Input(err)
				}
				out.Machines = append(out.Machines, *r)
			}
			if format == "json" {
				return printJSON(g.stdout, out)
			}
			return out.text(g.stdout)
		},
	}
	formatFlag(cmd, &format, "output format: text or json", "text", "json")
	cmd.Flags().StringSliceVar(&cores, "cores", []string{"16", "64"}, "the machines to simulate, by number of cores")
	return cmd
}

func parseCores(list []string) ([]int, error) {
	if len(list) == 0 {
		return nil, fmt.Errorf("--cores is empty: give the machines to simulate, by number of cores (--cores 16,64)")
	}
	var ns []int
	for _, c := range list {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("--cores %q: want whole numbers from 1 to 4096, comma-separated (--cores 16,64)", c)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// simulation is simulate's output.
type simulation struct {
	Builds   []string          `json:"builds"`
	Steps    int               `json:"steps"`
	Machines []simulate.Result `json:"machines"`
}

func (s simulation) text(w io.Writer) error {
	fmt.Fprintf(w, "profile: %d steps from %s\n", s.Steps, strings.Join(s.Builds, ", "))
	if len(s.Machines) == 0 {
		return nil
	}
	m0 := s.Machines[0]
	if m0.Unmeasured > 0 {
		fmt.Fprintf(w, "%d steps have no CPU time and are simulated as serial\n", m0.Unmeasured)
	}
	fmt.Fprintf(w, "measured, one step after another: %.0f s\n\n", m0.SerialSum)
	fmt.Fprintf(w, "%6s %12s %15s %12s %19s\n", "cores", "makespan", "critical path", "work/cores", "makespan/critical")
	for _, m := range s.Machines {
		ratio := 0.0
		if m.CriticalPath > 0 {
			ratio = m.Makespan / m.CriticalPath
		}
		fmt.Fprintf(w, "%6d %10.0f s %13.0f s %10.0f s %19.2f\n", m.Cores, m.Makespan, m.CriticalPath, m.WorkBound, ratio)
	}
	last := s.Machines[len(s.Machines)-1]
	_, err := fmt.Fprintf(w, "\ncritical path on %d cores: %s\n", last.Cores, strings.Join(last.Path, " → "))
	return err
}

// maxSimSteps bounds the steps of one simulation (a Doris build has a few
// hundred per target).
const maxSimSteps = 500_000

// loadProfiles reads the records in dirs and returns their steps as one
// profile, each step named <target>/<step> (<target>@<doris>/<step> when
// the records are of more than one Doris version: their steps are other
// steps). Builds of one cell merge: a step that ran in one and came from
// the cache in another counts once, with the times it ran. Each record is
// checked on its own first, so an error names the file it is in.
func loadProfiles(dirs []string) ([]simulate.Step, []string, error) {
	type loaded struct {
		dir, path string
		rec       *build.Record
	}
	var recs []loaded
	versions := map[string]bool{}
	total := 0
	for _, dir := range dirs {
		path := filepath.Join(dir, build.RecordFile)
		rec, err := build.ReadRecord(path)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w (is %s a dorisarm build --out directory, <out>/<doris>/<target>?)", path, err, dir)
		}
		if len(rec.Steps) == 0 {
			return nil, nil, fmt.Errorf("%s records no steps: give the directory of a build that ran (dorisarm build --out)", path)
		}
		if total += len(rec.Steps); total > maxSimSteps {
			return nil, nil, fmt.Errorf("%s: the records given hold more than %d steps: simulate fewer builds at once", path, maxSimSteps)
		}
		edges := 0
		for _, s := range rec.Steps {
			edges += len(s.Needs)
		}
		if len(rec.Steps) > 1 && edges == 0 {
			return nil, nil, fmt.Errorf("%s records no step edges: it was written by a dorisarm from before step profiles; build again (a build from the cache is enough) to record them", path)
		}
		recs = append(recs, loaded{dir, path, rec})
		versions[rec.Cell.Doris] = true
	}
	byID := map[string]simulate.Step{}
	ran := map[string]bool{}
	var builds []string
	for _, l := range recs {
		rec := l.rec
		prefix := rec.Cell.Target + "/"
		if len(versions) > 1 {
			prefix = rec.Cell.Target + "@" + rec.Cell.Doris + "/"
		}
		held := map[string]bool{}
		for _, s := range rec.Steps {
			held[s.ID] = true
		}
		// own is the record's steps for the check of the record alone: a
		// need it does not hold is left to the merged profile (a package
		// list built in parts: the part that built a package is another
		// record), except in a record of a complete build.
		var own, all []simulate.Step
		for _, s := range rec.Steps {
			st := simulate.Step{ID: prefix + s.ID, Wall: s.Seconds, CPU: s.CPUSeconds, Jobs: rec.Jobs}
			if s.Cached {
				st.Wall, st.CPU = s.RanSeconds, s.RanCPUSeconds
			}
			for _, n := range s.Needs {
				st.Needs = append(st.Needs, prefix+n)
			}
			all = append(all, st)
			mine := st
			if rec.Partial != nil {
				mine.Needs = nil
				for _, n := range s.Needs {
					if held[n] {
						mine.Needs = append(mine.Needs, prefix+n)
					}
				}
			}
			own = append(own, mine)
		}
		if err := simulate.Check(own); err != nil {
			return nil, nil, fmt.Errorf("%s: %w; the record is damaged or not dorisarm's: build again to write it anew", l.path, err)
		}
		builds = append(builds, fmt.Sprintf("%s (%s, --jobs %d)", l.dir, strings.TrimSuffix(prefix, "/"), rec.Jobs))
		for i, st := range all {
			cached := rec.Steps[i].Cached
			if _, seen := byID[st.ID]; seen && (ran[st.ID] || cached) {
				continue // the run that measured it wins
			}
			byID[st.ID], ran[st.ID] = st, !cached
		}
	}
	steps := make([]simulate.Step, 0, len(byID))
	for _, s := range byID {
		steps = append(steps, s)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].ID < steps[j].ID })
	if err := simulate.Check(steps); err != nil {
		return nil, nil, fmt.Errorf("the records of %s do not merge into one profile: %w (are they builds of one plan?)", strings.Join(dirs, ", "), err)
	}
	return steps, builds, nil
}
