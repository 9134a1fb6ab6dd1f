package matrix

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-version"
)

// Cell is one build: a Doris release series built for one target, with every
// reference resolved.
type Cell struct {
	Doris  *DorisRange
	Target *Target
	CPU    *CPU
	OS     *OS
	ISA    *ISA
	Qemu   *QemuModel
	// Enabled is what the target's -march lets the compiler emit; Allowed is
	// what the CPU has (the scanner's allow-list).
	Enabled []string
	Allowed []string
}

// PageSize is the page size binaries of the cell must be aligned for.
func (c Cell) PageSize() int {
	if c.ISA.PageSize > 0 {
		return c.ISA.PageSize
	}
	return c.OS.PageSize
}

// Name is "<series>/<target>".
func (c Cell) Name() string { return c.Doris.Series + "/" + c.Target.Name }

// TargetNames returns the target names in order.
func (m *Matrix) TargetNames() []string { return slices.Sorted(maps.Keys(m.Targets)) }

// SeriesNames returns the Doris series in version order.
func (m *Matrix) SeriesNames() []string {
	names := slices.Sorted(maps.Keys(m.Doris))
	sort.SliceStable(names, func(i, j int) bool {
		a, ea := version.NewVersion(names[i])
		b, eb := version.NewVersion(names[j])
		if ea != nil || eb != nil {
			return names[i] < names[j]
		}
		return a.LessThan(b)
	})
	return names
}

// Target returns the named target or an error listing the known ones.
func (m *Matrix) Target(name string) (*Target, error) {
	t, ok := m.Targets[name]
	if !ok {
		return nil, fmt.Errorf("unknown target %q in %s (known: %s)", name, m.File, strings.Join(m.TargetNames(), ", "))
	}
	return t, nil
}

// SeriesFor returns the Doris series whose range contains version v.
func (m *Matrix) SeriesFor(v string) (*DorisRange, error) {
	ver, err := version.NewVersion(v)
	if err != nil {
		return nil, fmt.Errorf("doris version %q is not a version (e.g. 2.1.8)", v)
	}
	for _, s := range m.SeriesNames() {
		d := m.Doris[s]
		cs, err := version.NewConstraint(d.Versions)
		if err == nil && cs.Check(ver.Core()) {
			return d, nil
		}
	}
	return nil, fmt.Errorf("doris %s is not in any supported series of %s (supported: %s)", v, m.File, strings.Join(m.SeriesNames(), ", "))
}

// Cell resolves the cell for a Doris series and a target.
func (m *Matrix) Cell(series, target string) (Cell, error) {
	d, ok := m.Doris[series]
	if !ok {
		return Cell{}, fmt.Errorf("unknown doris series %q in %s (known: %s)", series, m.File, strings.Join(m.SeriesNames(), ", "))
	}
	c, err := m.Platform(target)
	if err != nil {
		return Cell{}, err
	}
	c.Doris = d
	if t := c.Target; t.March != "" {
		mm, err := m.ParseMarch(t.March)
		if err != nil {
			return Cell{}, err
		}
		c.Enabled = mm.Extensions.Sorted()
	}
	return c, nil
}

// Platform is what a target runs on, the part of its cells no Doris series
// changes: the target, its CPU (and the extensions that CPU has, implied
// ones included), OS, ISA and qemu model. Doris and Enabled are unset.
func (m *Matrix) Platform(target string) (Cell, error) {
	t, err := m.Target(target)
	if err != nil {
		return Cell{}, err
	}
	cpu := m.CPUs[t.CPU]
	return Cell{Target: t, CPU: cpu, OS: m.OSes[t.OS], ISA: m.ISAs[cpu.ISA], Qemu: m.QemuModels[cpu.Qemu], Allowed: m.Closure(cpu.Extensions).Sorted()}, nil
}

// Supports reports whether the target builds this Doris version.
func (t *Target) Supports(v *version.Version) bool {
	if t.Doris == "" {
		return true
	}
	cs, err := version.NewConstraint(t.Doris)
	return err == nil && cs.Check(v.Core())
}

// Cells expands the matrix: every series × every target that supports it.
func (m *Matrix) Cells() []Cell {
	var out []Cell
	for _, s := range m.SeriesNames() {
		base, _ := version.NewVersion(s + ".0")
		for _, t := range m.TargetNames() {
			if base != nil && !m.Targets[t].Supports(base) {
				continue
			}
			c, err := m.Cell(s, t)
			if err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
