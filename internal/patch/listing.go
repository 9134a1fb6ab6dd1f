package patch

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/textfmt"
)

// Row is a patch as patch list shows it.
type Row struct {
	ID        string   `json:"id"`
	Component string   `json:"component"`
	AppliesTo string   `json:"applies_to"`
	Targets   []string `json:"targets"`
	Why       string   `json:"why"`
	SHA256    string   `json:"sha256"`
}

// Rows are patches as patch list shows them.
type Rows []Row

// RowsOf describe ps.
func RowsOf(ps []*Patch) Rows {
	rows := Rows{}
	for _, p := range ps {
		targets := p.Targets
		if len(targets) == 0 {
			targets = []string{"all"}
		}
		rows = append(rows, Row{p.ID(), p.Component, p.Component + " " + p.AppliesTo, targets, p.Summary(), p.SHA256})
	}
	return rows
}

// WriteText prints the rows as a table.
func (rows Rows) WriteText(w io.Writer) error {
	out := [][]string{{"PATCH", "COMPONENT", "APPLIES-TO", "TARGETS", "WHY"}}
	for _, r := range rows {
		out = append(out, []string{r.ID, r.Component, r.AppliesTo, strings.Join(r.Targets, ","), r.Why})
	}
	textfmt.Table(w, out)
	return nil
}

// ApplyTo applies (or, with dryRun, tries) the patches q selects for one
// component version to the tree at source, all or nothing. It returns nil
// and no error when no patch applies; a hunk that fails is a failed gate.
func (s *Series) ApplyTo(m *matrix.Matrix, q Query, source string, dryRun bool) (*Result, error) {
	switch {
	case source == "":
		return nil, fault.Inputf("--source is required (the unpacked source of the component)")
	case q.Component == "":
		return nil, fault.Inputf("--component is required (the directory name under the patch dir, e.g. bitshuffle or doris)")
	case q.Version == "":
		return nil, fault.Inputf("--version is required (the component's version, e.g. 0.5.1)")
	}
	if st, err := os.Stat(source); err != nil || !st.IsDir() {
		return nil, fault.Inputf("--source %s: not a directory", source)
	}
	if q.Component == "doris" {
		q.Doris = q.Version
	}
	sel, err := s.Query(m, q)
	if err != nil || len(sel) == 0 {
		return nil, err
	}
	var skipped []string
	sel = slices.DeleteFunc(sel, func(p *Patch) bool {
		miss, why := p.Missing(source)
		if miss != "" {
			skipped = append(skipped, fmt.Sprintf("%s: the tree has no %s (Needs-Path%s)", p.ID(), miss, whyNot(why)))
		}
		return miss != ""
	})
	o := DefaultOptions()
	o.DryRun = dryRun
	res, err := Apply(source, sel, o)
	if err != nil {
		return nil, fault.Input(err)
	}
	res.Skipped = skipped
	if !res.OK() {
		what := "did not apply; the source tree was left untouched"
		if dryRun {
			what = "would not apply"
		}
		return res, fault.Gatef("%d hunk(s) %s", len(res.Failed()), what)
	}
	return res, nil
}
