package patch

import (
	"strings"

	goversion "github.com/hashicorp/go-version"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

// Query picks patches of a series by what they apply to. Empty fields
// match everything.
type Query struct {
	// Component and Version: one component's patches for its version.
	Component, Version string
	// Doris is a Doris version: it picks the matrix series whose cell a
	// target is judged in, and the version of component doris.
	Doris string
	// Target keeps the patches selected for this target.
	Target string
}

// Query returns the patches q selects, in series order. A target is judged
// in the cell of q.Doris's series; without q.Doris, in every series' cell,
// and it is an error (bad input, asking for the Doris version) when the
// series disagree about a patch.
func (s *Series) Query(m *matrix.Matrix, q Query) ([]*Patch, error) {
	if q.Version != "" {
		if _, err := goversion.NewVersion(q.Version); err != nil {
			return nil, fault.Inputf("--version %q is not a version (e.g. 0.5.1)", q.Version)
		}
	}
	var cells []matrix.Cell
	if q.Target != "" {
		t, err := m.Target(q.Target)
		if err != nil {
			return nil, fault.Input(err)
		}
		series := m.SeriesNames()
		if q.Doris != "" {
			d, err := m.SeriesFor(q.Doris)
			if err != nil {
				return nil, fault.Input(err)
			}
			series = []string{d.Series}
		}
		for _, sr := range series {
			c, err := m.Cell(sr, t.Name)
			if err != nil {
				return nil, fault.Input(err)
			}
			cells = append(cells, c)
		}
	}
	var out []*Patch
	for _, p := range s.Patches {
		if q.Component != "" && p.Component != q.Component {
			continue
		}
		if q.Version != "" && !p.MatchesVersion(q.Version) {
			continue
		}
		if q.Doris != "" && p.Component == "doris" && !p.MatchesVersion(q.Doris) {
			continue
		}
		if len(cells) > 0 {
			var in, notIn []string
			for _, c := range cells {
				if p.MatchesTarget(m, c) {
					in = append(in, c.Doris.Series)
				} else {
					notIn = append(notIn, c.Doris.Series)
				}
			}
			if len(in) > 0 && len(notIn) > 0 {
				return nil, fault.Inputf("%s is selected for %s in Doris %s but not in %s: pass --doris VERSION", p.ID(), q.Target, strings.Join(in, ", "), strings.Join(notIn, ", "))
			}
			if len(in) == 0 {
				continue
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// LoadFor loads the series in dir and checks its Targets terms against
// the matrix: a series a build can use.
func LoadFor(dir string, m *matrix.Matrix) (*Series, error) {
	s, err := LoadSeries(dir)
	if err != nil {
		return nil, fault.Input(err)
	}
	if err := s.CheckTargets(m); err != nil {
		return nil, fault.Input(err)
	}
	return s, nil
}
