package report

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

//go:embed report.html.tmpl
var tmplFS embed.FS

// Bytes formats a size for people: 12.7 MB (decimal units, as registries show them).
func Bytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// Seconds formats a duration in seconds.
func Seconds(s float64) string { return fmt.Sprintf("%.1f s", s) }

// Percent formats a share.
func Percent(p float64) string { return fmt.Sprintf("%.1f%%", p) }

func (r *Report) title() string {
	return "Doris " + strings.Join(r.Doris, ", ") + " release report"
}

func pgoLTO(t Target) string {
	var parts []string
	switch {
	case t.PGO:
		parts = append(parts, "PGO")
	case t.PGONone != "":
		parts = append(parts, "PGO: none ("+t.PGONone+")")
	}
	if t.LTO != "" {
		parts = append(parts, "LTO "+t.LTO)
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, " + ")
}

func glibc(t Target) string {
	need := t.Glibc
	if need == "" {
		need = "none"
	}
	s := need + " / " + t.GlibcMax
	if t.GlibcState() == "waived" {
		s += " (waived)"
	}
	switch {
	case t.SysrootWaiver != "":
		s += "; no sysroot (waived)"
	case t.Sysroot != "":
		s += "; sysroot " + t.Sysroot
	}
	return s
}

func scanState(t Target) string {
	switch {
	case !t.Scanned:
		return "not scanned"
	case t.Clean:
		return "clean"
	}
	return fmt.Sprintf("%d violation(s)", t.Violations)
}

func shortDigest(d string) string {
	if _, h, ok := strings.Cut(d, ":"); ok && len(h) > 12 {
		return "sha256:" + h[:12]
	}
	return d
}

// Markdown writes the report as GitHub-flavoured Markdown.
func (r *Report) Markdown(w io.Writer) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# %s\n\n", r.title())
	p("From `%s`", r.From)
	if r.Images != "" && r.Images != r.From {
		p(", images in `%s`", r.Images)
	}
	if r.Trust != "" {
		p(", signatures checked against %s", r.Trust)
	}
	p(".\n\n")
	if m := r.Made; m != nil {
		p("Made by dorisarm %s on %s", m.Dorisarm, m.Date)
		if len(m.Matrix) > 0 {
			p("; matrix %s", strings.Join(m.Matrix, ", "))
		}
		p(".\n\n")
	}
	t := r.Totals
	p("**%d targets · %d/%d scans clean", t.Targets, t.Clean, t.Targets)
	if r.Images != "" {
		p(" · %d/%d signed · %d/%d attested · images %s", t.Signed, t.Targets, t.Attested, t.Targets, Bytes(t.ImageBytes))
	}
	p(" · cache %d/%d steps (%s) · build %s**\n\n", t.CacheHits, t.CacheSteps, Percent(t.HitRate()), Seconds(t.Seconds))
	p("| target | CPU | OS | -march | flags landed | tune | compiler | PGO/LTO | patches | glibc need / OS | scan | cache | time |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.Targets {
		tune := "—"
		if x.Tune != "" {
			tune = "`" + x.Tune + "`"
		}
		p("| %s | %s | %s | `%s` | %s | %s | %s %s | %s | %d | %s%s | %s | %s | %s |\n", x.Target, x.CPU, x.OS, x.March, x.LandedText(), tune,
			x.Compiler, x.CompilerVersion+fallback(x), pgoLTO(x), len(x.Patches), glibc(x), okMark(x.GlibcOK()), scanState(x),
			Percent(x.HitRate()), Seconds(x.Seconds))
	}
	if r.Images != "" {
		p("\n## Images\n\n| image | digest | size | signature | attestations |\n|---|---|---|---|---|\n")
		for _, x := range r.Targets {
			if x.Image != nil {
				p("| `%s` | `%s` | %s | %s | %s |\n", x.Image.Ref, shortDigest(x.Image.Digest), Bytes(x.Image.Size), x.Image.Signature.State, x.Image.Attestations.State)
			}
		}
		for _, s := range r.Shared {
			p("| `%s` | `%s` | %s | %s | %s |\n", s.Ref, shortDigest(s.Digest), Bytes(s.Size), s.Signature.State, s.Attestations.State)
		}
	}
	p("\n## ISA extensions used versus allowed\n\n")
	p("Instructions found per extension: unguarded (runs on every CPU it is shipped to), guarded (behind a run-time check), waived (allow file). ✗ marks an extension the CPU lacks in unguarded code.\n\n")
	for _, x := range r.Targets {
		p("### %s (%s)\n\n", x.Target, x.CPU)
		if x.Description != "" {
			p("%s.\n\n", x.Description)
		}
		p("Flags: `%s`\n\n", x.Flags)
		if len(x.Patches) > 0 {
			p("Patches: %s\n\n", "`"+strings.Join(x.Patches, "`, `")+"`")
		}
		if len(x.Extensions) == 0 {
			p("No ISA extension counts: the scanner classifies AArch64 instructions only.\n")
		} else {
			p("| extension | on CPU | in -march | unguarded | guarded | waived |\n|---|---|---|---|---|---|\n")
		}
		for _, e := range x.Extensions {
			mark := ""
			if e.Bad() {
				mark = " ✗"
			}
			p("| %s%s | %s | %s | %d | %d | %d |\n", e.Name, mark, yesNo(e.Allowed), yesNo(e.Enabled), e.Unguarded, e.Guarded, e.Waived)
		}
		for _, pr := range x.Problems {
			p("\n> ⚠ %s\n", pr)
		}
		p("\n")
	}
	var waived, lost []Target
	for _, x := range r.Targets {
		if x.SysrootWaiver != "" {
			waived = append(waived, x)
		}
		if x.LostTuning != "" {
			lost = append(lost, x)
		}
	}
	if len(waived) > 0 || len(lost) > 0 {
		p("## Waivers\n\n")
	}
	if len(waived) > 0 {
		p("Built without the target OS's sysroot (against the build machine's libraries), with the glibc gate waived:\n\n")
		for _, x := range waived {
			p("- %s %s: %s\n", x.Doris, x.Target, x.SysrootWaiver)
		}
		p("\n")
	}
	if len(lost) > 0 {
		p("BE built at the -march its tree fixes, not the target's (lost tuning accepted):\n\n")
		for _, x := range lost {
			p("- %s %s: %s\n", x.Doris, x.Target, x.LostTuning)
		}
		p("\n")
	}
	if len(r.Problems) > 0 {
		p("## Problems\n\n")
		for _, pr := range r.Problems {
			p("- %s\n", pr)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func okMark(ok bool) string {
	if ok {
		return ""
	}
	return " ✗"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// HTML writes the report as one self-contained page: inline style, no
// scripts, no external resources.
func (r *Report) HTML(w io.Writer) error {
	t, err := template.New("report.html.tmpl").Funcs(template.FuncMap{
		"bytes": Bytes, "seconds": Seconds, "percent": Percent, "pgolto": pgoLTO, "glibc": glibc, "scan": scanState,
		"short": shortDigest, "join": strings.Join, "yesno": yesNo, "title": r.title,
		// bar is one segment of an extension's stacked bar: the bar is
		// log-scaled to the target's largest count, split linearly.
		"bar": func(part int, e Extension, maxN int) string {
			if e.Total() == 0 {
				return "0"
			}
			return fmt.Sprintf("%.1f", barWidth(e.Total(), maxN)*float64(part)/float64(e.Total()))
		},
		"maxcount": func(es []Extension) int {
			m := 0
			for _, e := range es {
				m = max(m, e.Total())
			}
			return m
		},
	}).ParseFS(tmplFS, "report.html.tmpl")
	if err != nil {
		return err
	}
	return t.Execute(w, r)
}

// barWidth is a log-scaled share (0-100) so that 3 and 3000 instructions both show.
func barWidth(n, maxN int) float64 {
	if n <= 0 || maxN <= 0 {
		return 0
	}
	return 100 * math.Log1p(float64(n)) / math.Log1p(float64(maxN))
}

// fallback says which compilers a target's build fell back from.
func fallback(t Target) string {
	if len(t.Rejected) == 0 {
		return ""
	}
	return " (" + strings.Join(t.Rejected, ", ") + " rejected)"
}
