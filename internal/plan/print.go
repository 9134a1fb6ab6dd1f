package plan

import (
	"fmt"
	"io"
	"strings"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/textfmt"
)

// Formats are the formats Write prints, each the same bytes for the same
// plans.
var Formats = []string{"table", "json"}

// Write prints plans in format (one of Formats): one plan's canonical JSON,
// a list of them, or each plan's table.
func Write(w io.Writer, plans []*Plan, format string) error {
	switch format {
	case "json":
		if len(plans) != 1 {
			return textfmt.JSON(w, plans)
		}
		b, err := plans[0].JSON()
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "table":
		for i, p := range plans {
			if i > 0 {
				fmt.Fprintln(w)
			}
			p.WriteTable(w)
		}
		return nil
	}
	return fault.Inputf("--output/--format %q: use one of %s", format, strings.Join(Formats, ", "))
}

// WriteTable prints the plan for people: the cell, compiler, sysroot,
// flags, patches, then one row per step with its key.
func (p *Plan) WriteTable(w io.Writer) {
	c := p.Cell
	fmt.Fprintf(w, "plan %s/%s  doris %s  cpu %s  os %s (glibc %s, %dK pages)\n", c.Series, c.Target, c.Doris, c.CPU, c.OS, c.Glibc, c.PageSize/1024)
	id := p.Toolchain.Compiler
	fmt.Fprintf(w, "  compiler  %s %s (%s)\n", id.Name, id.Version, id.Banner)
	if sr := c.Sysroot; sr != nil && sr.Digest == "" {
		fmt.Fprintf(w, "  sysroot   %s: for %s (glibc %s), key %s; the build's sysroot step makes it\n", sr.Name, c.OS, c.Glibc, ShortDigest(sr.Key))
	} else if sr != nil {
		fmt.Fprintf(w, "  sysroot   %s: glibc %s (%s's is %s), %s, %s\n", sr.Name, sr.Glibc, c.OS, c.Glibc, ShortDigest(sr.Digest), sr.Source)
	} else {
		fmt.Fprintf(w, "  sysroot   none, WAIVED: %s\n", c.SysrootWaiver)
	}
	fmt.Fprintf(w, "  flags     %s\n", strings.Join(p.Phases[PhaseRelease], " "))
	if f, ok := p.Phases[PhaseInstrument]; ok {
		fmt.Fprintf(w, "  pgo-gen   %s\n", strings.Join(f, " "))
	}
	if f, ok := p.Phases[PhasePGO]; ok {
		fmt.Fprintf(w, "  pgo-use   %s\n", strings.Join(f, " "))
	}
	if c.PGONone != "" {
		fmt.Fprintf(w, "  pgo       none (%s)\n", c.PGONone)
	}
	if len(p.Toolchain.Emulator) > 0 {
		fmt.Fprintf(w, "  emulator  %s\n", strings.Join(p.Toolchain.Emulator, " "))
	}
	fmt.Fprintf(w, "  allowed   %s\n", strings.Join(c.Allowed, " "))
	for _, pt := range p.Patches {
		fmt.Fprintf(w, "  patch     %s  %s\n", pt.ID, pt.Why)
	}
	for _, nu := range p.NotUsed {
		built := ""
		if nu.Built {
			built = " (built all the same)"
		}
		fmt.Fprintf(w, "  not used  %s %s%s: %s (%s)\n", nu.Entry, nu.Version, built, nu.Why, nu.Where)
	}
	for _, wn := range p.Warnings {
		fmt.Fprintf(w, "  warning   %s\n", wn)
	}
	rows := [][]string{{"  STEP", "KIND", "PHASE", "KEY", "COMMAND"}}
	for _, s := range p.Steps {
		rows = append(rows, []string{"  " + s.ID, string(s.Kind), s.Phase, s.Key[:12], s.Describe()})
	}
	textfmt.Table(w, rows)
	fmt.Fprintf(w, "  %d steps\n", len(p.Steps))
}
