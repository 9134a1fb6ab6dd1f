package scan

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/textfmt"
)

// Formats a report can be written in.
var Formats = []string{"table", "json", "sarif", "markdown"}

// Write renders the report.
func Write(w io.Writer, r *Report, format string) error {
	switch format {
	case "json":
		return textfmt.JSON(w, r)
	case "sarif":
		return textfmt.JSON(w, sarif(r))
	case "markdown":
		return markdown(w, r)
	case "table", "":
		return table(w, r)
	}
	return fmt.Errorf("unknown format %q (one of %s)", format, strings.Join(Formats, ", "))
}

func featureList(f File) string {
	var names []string
	for k := range f.Features {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		s := fmt.Sprintf("%s %d", k, f.Features[k])
		if g := f.Guarded[k]; g > 0 {
			s += fmt.Sprintf(" (%d guarded)", g)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func (r *Report) summaryLine() string {
	s := r.Summary
	line := fmt.Sprintf("%d files, %d ELF, %.1f MB of code", s.Files, s.ELF, float64(s.TextBytes)/1e6)
	if r.Policy == nil {
		line += fmt.Sprintf("; machines %s; features %s; glibc up to %s", mapList(s.Machines), mapList(s.Features), orDash(s.GlibcMax))
		if s.Unreadable > 0 {
			line += fmt.Sprintf("; %d unreadable", s.Unreadable)
		}
		if s.LinksOutside > 0 {
			line += fmt.Sprintf("\n%d link(s) point outside the scanned tree and were not followed: %s", s.LinksOutside, r.outsideLinks(3))
		}
		return line
	}
	if s.Clean {
		line += ": clean for " + r.Target
		if s.LinksOutside > 0 {
			line += " (what is in the tree)"
		}
	} else {
		line += fmt.Sprintf(": %d violation(s) for %s (%s)", s.Violations, r.Target, mapList(s.ByKind))
	}
	if s.Allowed > 0 {
		line += fmt.Sprintf(", %d allowed by exceptions", s.Allowed)
	}
	if len(s.Warned) > 0 {
		line += fmt.Sprintf(", warnings: %s", mapList(s.Warned))
	}
	if s.LinksOutside > 0 {
		line += fmt.Sprintf("\n%d link(s) point outside the scanned tree and were not followed: %s", s.LinksOutside, r.outsideLinks(3))
	}
	if sc := r.scopeLine(); sc != "" {
		line += "\n" + sc
	}
	if fl := s.Flags.line(); fl != "" {
		line += "\n" + fl
	}
	return line
}

// scopeLine says how many files each set of checks judged, when not every
// file got every check; "" when they did.
func (r *Report) scopeLine() string {
	sc := r.Summary.Scopes
	others := sc[ScopeNotShipped] + sc[ScopeObject]
	if others == 0 {
		return ""
	}
	var why []string
	if n := sc[ScopeNotShipped]; n > 0 {
		why = append(why, fmt.Sprintf("%d not shipped", n))
	}
	if n := sc[ScopeObject]; n > 0 {
		why = append(why, fmt.Sprintf("%d relocatable object(s), judged where they are linked", n))
	}
	return fmt.Sprintf("scope: deployment checks on %d file(s); ISA and foreign-object checks only on %d (%s)", sc[ScopeDeployment], others, strings.Join(why, ", "))
}

// scopeHeader says what the policy ships and which checks judge only that.
func (p *Policy) scopeHeader() string {
	if len(p.Ships) == 0 || len(p.DeploymentChecks) == 0 {
		return ""
	}
	return fmt.Sprintf("ships %s: %s judge these alone", strings.Join(p.Ships, ", "), strings.Join(p.DeploymentChecks, ", "))
}

func mapList(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// outsideLinks names the first n links out of the tree, and how many more.
func (r *Report) outsideLinks(n int) string {
	var names []string
	for _, f := range r.Findings {
		if f.Kind == KindLinkOutside {
			names = append(names, f.Path+" -> "+f.Feature)
		}
	}
	if len(names) > n {
		names = append(names[:n], fmt.Sprintf("and %d more", len(names)-n))
	}
	return strings.Join(names, ", ")
}

func label(f Finding) string {
	switch {
	case f.Allowed != "":
		return "allowed"
	case f.Severity == SevError:
		return "ERROR"
	case f.Severity == SevWarning:
		return "warning"
	}
	return "info"
}

func table(w io.Writer, r *Report) error {
	scope := map[string]string{}
	for _, f := range r.Files {
		scope[f.Path] = f.Scope
	}
	if r.Policy != nil {
		fmt.Fprintf(w, "target %s\n", r.Policy)
		if h := r.Policy.scopeHeader(); h != "" {
			fmt.Fprintln(w, h)
		}
	}
	byPath := map[string][]Finding{}
	var paths []string
	for _, f := range r.Findings {
		if _, ok := byPath[f.Path]; !ok {
			paths = append(paths, f.Path)
		}
		byPath[f.Path] = append(byPath[f.Path], f)
	}
	if r.Policy == nil {
		for _, f := range r.Files {
			fmt.Fprintf(w, "%s  %s %s", f.Path, f.Machine, orDash(f.Type))
			if f.GlibcMax != "" {
				fmt.Fprintf(w, "  glibc %s", f.GlibcMax)
			}
			if fl := featureList(f); fl != "" {
				fmt.Fprintf(w, "  %s", fl)
			}
			fmt.Fprintln(w)
		}
	}
	for _, p := range paths {
		if sc := scope[p]; sc != "" && sc != ScopeDeployment {
			fmt.Fprintf(w, "%s  (%s)\n", p, sc)
		} else {
			fmt.Fprintln(w, p)
		}
		for _, f := range byPath[p] {
			where := ""
			if f.Function != "" {
				where = " in " + f.Function
			}
			feat := ""
			if f.Feature != "" {
				feat = " " + f.Feature
			}
			fmt.Fprintf(w, "  %-7s %s%s%s: %s", label(f), f.Kind, feat, where, f.Detail)
			if f.Allowed != "" {
				fmt.Fprintf(w, " [allowed: %s]", f.Allowed)
			}
			fmt.Fprintln(w)
		}
	}
	for _, a := range r.Allowed {
		fmt.Fprintf(w, "exception %s (%s %s) used %d time(s): %s\n", a.Exception, a.Kind, a.Path, a.Matched, a.Reason)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintln(w, "warning: "+warn)
	}
	_, err := fmt.Fprintln(w, r.summaryLine())
	return err
}

func markdown(w io.Writer, r *Report) error {
	title := "dorisarm scan"
	if r.Target != "" {
		title += " for " + r.Target
	}
	fmt.Fprintf(w, "### %s\n\n", title)
	if r.Summary.Clean && r.Policy != nil {
		fmt.Fprintf(w, "**Clean.** %s\n\n", r.summaryLine())
	} else {
		fmt.Fprintf(w, "%s\n\n", r.summaryLine())
	}
	if r.Policy != nil {
		if h := r.Policy.scopeHeader(); h != "" {
			fmt.Fprintf(w, "%s.\n\n", h)
		}
	}
	var rows []Finding
	for _, f := range r.Findings {
		if f.Severity == SevError || f.Severity == SevWarning {
			rows = append(rows, f)
		}
	}
	if len(rows) > 0 {
		fmt.Fprintln(w, "| | kind | path | feature | function | detail |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
		for _, f := range rows {
			fmt.Fprintf(w, "| %s | %s | `%s` | %s | %s | %s |\n", label(f), f.Kind, f.Path, f.Feature, f.Function, strings.ReplaceAll(f.Detail, "|", "\\|"))
		}
		fmt.Fprintln(w)
	}
	if fs := r.Summary.Flags; fs != nil && fs.Objects > 0 {
		fmt.Fprintf(w, "Compile flags read back from %d object(s): requested `-march=%s`, %.0f%% landed at it.\n\n| landed | objects |\n|---|---|\n", fs.Objects, fs.Requested, 100*fs.AtTarget)
		for _, k := range sortedByCount(fs.Landed) {
			fmt.Fprintf(w, "| `%s` | %d |\n", k, fs.Landed[k])
		}
		fmt.Fprintln(w)
	}
	if len(r.Files) > 0 {
		fmt.Fprintln(w, "<details><summary>Files</summary>\n\n| path | machine | scope | glibc | features | flags |\n|---|---|---|---|---|---|")
		for _, f := range r.Files {
			fl := "-"
			if f.Flags != nil {
				fl = f.Flags.Verdict
				if f.Flags.Flags != "" {
					fl += ": `" + f.Flags.Flags + "`"
				}
			}
			fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s | %s |\n", f.Path, f.Machine, orDash(f.Scope), orDash(f.GlibcMax), featureList(f), fl)
		}
		fmt.Fprintln(w, "\n</details>")
	}
	return nil
}

var ruleText = map[string]string{
	KindForeignArch:     "Code for another CPU architecture",
	KindISA:             "Instruction the target CPU does not have",
	KindGlibc:           "glibc symbol version newer than the target OS",
	KindGlibcxx:         "libstdc++ symbol version newer than the target OS",
	KindOpenSSLStatic:   "OpenSSL linked statically where the policy wants it shared",
	KindOpenSSLShared:   "OpenSSL linked dynamically where the policy wants it static",
	KindJNIMissing:      "Jar without a native library for the target platform",
	KindPageSize:        "LOAD segments aligned below the target's page size",
	KindUnreadable:      "Input that could not be read",
	KindHeaders:         "ELF section headers that disagree with the program headers",
	KindLinkOutside:     "Symbolic link out of the scanned tree, not followed",
	KindFlagsBeyond:     "Object compiled for extensions the target CPU lacks",
	KindLostTuning:      "Object compiled for a weaker architecture than the target's flags",
	KindFlagsUnresolved: "Recorded compile flags that cannot be resolved",
	KindUnrecorded:      "Compiled object that records no compile flags",
}

// sortedByCount orders keys by count, largest first, then by name.
func sortedByCount(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

func sarif(r *Report) map[string]any {
	var kinds []string
	for k := range ruleText {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var rules []map[string]any
	for _, k := range kinds {
		rules = append(rules, map[string]any{"id": k, "name": k, "shortDescription": map[string]string{"text": ruleText[k]}})
	}
	results := []map[string]any{}
	for _, f := range r.Findings {
		level := "note"
		switch {
		case f.Violation():
			level = "error"
		case f.Severity == SevWarning && f.Allowed == "":
			level = "warning"
		}
		msg := f.Detail
		if f.Function != "" {
			msg += " (function " + f.Function + ")"
		}
		res := map[string]any{
			"ruleId":  f.Kind,
			"level":   level,
			"message": map[string]string{"text": msg},
			"locations": []map[string]any{{"physicalLocation": map[string]any{
				"artifactLocation": map[string]string{"uri": sarifURI(f.Path)}}}},
		}
		if f.Allowed != "" {
			res["suppressions"] = []map[string]string{{"kind": "external", "justification": f.Allowed}}
		}
		results = append(results, res)
	}
	return map[string]any{
		"$schema": "https://json.schemastore.org/sarif-2.1.0.json",
		"version": "2.1.0",
		"runs": []map[string]any{{
			"tool":    map[string]any{"driver": map[string]any{"name": "dorisarm scan", "informationUri": "https://github.com/dorisarm/dorisarm", "rules": rules}},
			"results": results,
		}},
	}
}

// sarifURI keeps the path of the outermost file (code scanning links to it).
func sarifURI(p string) string {
	if i := strings.IndexAny(p, "!("); i > 0 {
		return p[:i]
	}
	return p
}
