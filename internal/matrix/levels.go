package matrix

import (
	"maps"
	"slices"
	"sort"
)

// DefaultLevel is the architecture level of isa that extends no other: what
// its compilers target when no -march or -mcpu says otherwise.
func (m *Matrix) DefaultLevel(isa string) string {
	var roots []string
	for name, l := range m.ArchLevels {
		if l.ISA == isa && l.Extends == "" {
			roots = append(roots, name)
		}
	}
	sort.Strings(roots)
	if len(roots) == 0 {
		return ""
	}
	return roots[0]
}

// LevelWithin reports whether architecture level a is b or a level b
// extends, directly or not (armv8-a is within armv8.2-a).
func (m *Matrix) LevelWithin(a, b string) bool {
	seen := map[string]bool{}
	for l := b; l != "" && !seen[l]; l = m.levelParent(l) {
		if l == a {
			return true
		}
		seen[l] = true
	}
	return false
}

func (m *Matrix) levelParent(l string) string {
	if al, ok := m.ArchLevels[l]; ok {
		return al.Extends
	}
	return ""
}

// CPUByMcpu finds the CPU of isa that some compiler spells name in -mcpu
// (tsv110, neoverse-v1); nil when the matrix knows none.
func (m *Matrix) CPUByMcpu(isa, name string) *CPU {
	for _, id := range slices.Sorted(maps.Keys(m.CPUs)) {
		c := m.CPUs[id]
		if c.ISA != isa {
			continue
		}
		for _, mc := range c.Mcpu {
			if mc != nil && mc.Name == name {
				return c
			}
		}
	}
	return nil
}
