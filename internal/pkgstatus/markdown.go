package pkgstatus

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Markdown writes the table: one row per package, one column per target,
// then the archives it was made from.
func (t *Table) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| package | version |")
	for _, tg := range t.Targets {
		if c := t.Compilers[tg]; c != "" {
			fmt.Fprintf(&b, " %s (%s) |", tg, c)
		} else {
			fmt.Fprintf(&b, " %s |", tg)
		}
	}
	b.WriteString("\n|---|---|")
	b.WriteString(strings.Repeat("---|", len(t.Targets)))
	b.WriteString("\n")
	built, notUsed := map[string]int{}, map[string]int{}
	earlier := false
	for _, r := range t.Rows {
		fmt.Fprintf(&b, "| %s | %s |", r.Package, cell(r.Version))
		for _, tg := range t.Targets {
			res := r.Results[tg]
			if res != nil && res.Status == Built {
				built[tg]++
			}
			if res != nil && res.Status == NotUsed {
				notUsed[tg]++
			}
			mark := ""
			if res != nil && res.Earlier {
				mark, earlier = " †", true
			}
			fmt.Fprintf(&b, " %s%s |", res.text(), mark)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	if earlier {
		b.WriteString("† from the earlier table merged in (`--previous`): these builds did not try that package on that target.\n\n")
	}
	for _, tg := range t.Targets {
		fmt.Fprintf(&b, "%s: %d of %d packages built", tg, built[tg], countTried(t, tg))
		if notUsed[tg] > 0 {
			fmt.Fprintf(&b, " (%d more not used there)", notUsed[tg])
		}
		b.WriteString(". ")
	}
	fmt.Fprintf(&b, "\n\nDoris %s, built from tree digest(s) %s.", t.Doris, strings.Join(t.Sources, ", "))
	b.WriteString("\n\n| package | archive | md5 | sha256 |\n|---|---|---|---|\n")
	for _, r := range t.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.Package, cell(r.Archive), r.MD5, cell(r.SHA256))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// countTried counts the packages a build of target tried (not those its
// product does not use).
func countTried(t *Table, target string) int {
	n := 0
	for _, r := range t.Rows {
		if res := r.Results[target]; res != nil && res.Status != NotUsed {
			n++
		}
	}
	return n
}

// text is one table cell.
func (r *Result) text() string {
	if r == nil {
		return "not tried"
	}
	if r.Text != "" {
		return cell(r.Text)
	}
	switch r.Status {
	case Failed:
		return cell(fmt.Sprintf("**failed** in %s: %s", r.Step, r.Cause))
	case Skipped:
		return cell("not built: needs " + r.Cause)
	case SourceOnly:
		return fmt.Sprintf("source only (unpacked %.0f s; no build step of its own)", r.Seconds)
	case NotUsed:
		return cell(fmt.Sprintf("not used on %s: %s", r.ISA, r.Cause))
	}
	parts := []string{fmt.Sprintf("built %.0f s", r.Seconds)}
	switch {
	case r.Cached && r.TimeUnknown:
		parts[0] = "built (from the cache, its build time not recorded)"
	case r.Cached:
		parts[0] = fmt.Sprintf("built %.0f s (from the cache)", r.Seconds)
	}
	if !r.Scanned {
		return cell(parts[0] + ", install not scanned (built by a dorisarm without package scans: rebuild with an empty --cache)")
	}
	parts = append(parts, fmt.Sprintf("%d files, %d ELF", r.Files, r.ELF))
	if r.Foreign > 0 {
		parts = append(parts, fmt.Sprintf("**%d foreign**", r.Foreign))
	}
	var fs []string
	for f, n := range r.Features {
		fs = append(fs, fmt.Sprintf("%s %d", f, n))
	}
	sort.Strings(fs)
	parts = append(parts, fs...)
	if r.FlagObjects > 0 {
		parts = append(parts, fmt.Sprintf("%.0f%% at target flags", 100*r.AtTarget))
	}
	if r.Violations > 0 {
		parts = append(parts, fmt.Sprintf("%d scan findings", r.Violations))
	} else {
		parts = append(parts, "scan clean")
	}
	return cell(strings.Join(parts, ", "))
}

// cell makes s safe in a Markdown table cell.
func cell(s string) string {
	if s == "" {
		return "—"
	}
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
