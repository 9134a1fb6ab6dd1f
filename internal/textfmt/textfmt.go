// Package textfmt writes what commands print for people and programs:
// aligned tables and indented JSON.
package textfmt

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Table writes rows as columns aligned two spaces apart, with no trailing
// blanks.
func Table(w io.Writer, rows [][]string) {
	widths := map[int]int{}
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-len(c)+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// JSON writes v indented: what --output json prints.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// UseColor decides whether to colour: mode always or never wins; auto
// colours a terminal unless NO_COLOR is set to anything (no-color.org) or
// TERM is dumb. ok is false for an unknown mode.
func UseColor(mode string, getenv func(string) string, tty bool) (color, ok bool) {
	switch mode {
	case "always":
		return true, true
	case "never":
		return false, true
	case "auto", "":
		return tty && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb", true
	}
	return false, false
}

// Paint colours a status word green (ok) or red when on.
func Paint(on, ok bool, word string) string {
	if !on {
		return word
	}
	c := "\033[32m"
	if !ok {
		c = "\033[31m"
	}
	return c + word + "\033[0m"
}

// IsTerminal reports whether f is a terminal that takes escapes (TERM is
// not dumb).
func IsTerminal(f *os.File, getenv func(string) string) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && getenv("TERM") != "dumb"
}
