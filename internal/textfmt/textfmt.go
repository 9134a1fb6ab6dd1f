// Package textfmt writes what commands print for people and programs:
// aligned tables and indented JSON.
package textfmt

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// Table writes rows as columns aligned two spaces apart, with no trailing
// blanks. Cells are measured in columns on a terminal (width), not in
// bytes: a cell holding "—" or "ü" is as wide as it looks.
func Table(w io.Writer, rows [][]string) {
	widths := map[int]int{}
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], width(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-width(c)+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// width is how many columns s takes on a terminal: its runes (each taken
// as one column, as text/tabwriter and fmt's widths take them; the East
// Asian wide characters that take two do not occur in what dorisarm
// prints), not counting the colour escapes Paint adds.
func width(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if end := csiEnd(s, i); end > i {
			i = end
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return n
}

// Fit cuts s to fewer than cols columns (an ellipsis ends what was cut),
// for a line a terminal rewrites in place: one that fills the row, or
// wraps, leaves a copy of itself in the scrollback at every update.
// Colour escapes count no columns and are kept; cols under 2 leaves s.
func Fit(s string, cols int) string {
	if cols < 2 || width(s) < cols {
		return s
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		if end := csiEnd(s, i); end > i {
			b.WriteString(s[i:end])
			i = end
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		if n == cols-2 {
			b.WriteString("…")
			if strings.Contains(s, "\033[") {
				b.WriteString("\033[0m")
			}
			return b.String()
		}
		b.WriteString(s[i : i+size])
		i += size
		n++
	}
	return b.String()
}

// TerminalWidth is how many columns the terminal f shows: its size as
// the kernel says (TIOCGWINSZ), else $COLUMNS, else 80.
func TerminalWidth(f *os.File, getenv func(string) string) int {
	if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
		return w
	}
	if c, err := strconv.Atoi(getenv("COLUMNS")); err == nil && c > 0 {
		return c
	}
	return 80
}

// csiEnd is where the CSI escape sequence at s[i] ends (its parameters,
// then one final byte in @..~), or i when none starts there.
func csiEnd(s string, i int) int {
	if !strings.HasPrefix(s[i:], "\033[") {
		return i
	}
	j := i + 2
	for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
		j++
	}
	return min(j+1, len(s))
}

// JSON writes v indented: what --output json prints. Every list and map in
// it is written as [] or {} when empty, never null: a consumer can iterate
// any list field without a null check.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(NoNulls(v))
}

// NoNulls returns v with every nil slice and map it reaches through
// exported fields, pointers, slices, arrays and maps made empty (in place
// where v holds pointers; v itself is copied when it is not one).
func NoNulls(v any) any {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return v
	}
	if rv.Kind() != reflect.Pointer {
		cp := reflect.New(rv.Type())
		cp.Elem().Set(rv)
		fillEmpty(cp.Elem(), 0)
		return cp.Elem().Interface()
	}
	fillEmpty(rv, 0)
	return v
}

var marshaler = reflect.TypeFor[json.Marshaler]()

// maxFillDepth bounds the walk (the project's output types nest a few levels).
const maxFillDepth = 64

func fillEmpty(v reflect.Value, depth int) {
	if depth > maxFillDepth {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			fillEmpty(v.Elem(), depth+1)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanSet() {
				fillEmpty(f, depth+1)
			}
		}
	case reflect.Slice:
		if v.Type().Implements(marshaler) {
			return // its own encoding (json.RawMessage: nil is null, empty is invalid)
		}
		if v.IsNil() {
			if v.CanSet() { // a []byte becomes "", as JSON writes bytes as a string
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			fillEmpty(v.Index(i), depth+1)
		}
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fillEmpty(v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.Type().Implements(marshaler) {
			return
		}
		if v.IsNil() {
			if v.CanSet() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			return
		}
		it := v.MapRange()
		for it.Next() {
			val := it.Value()
			switch val.Kind() {
			case reflect.Pointer, reflect.Interface:
				fillEmpty(val, depth+1)
			case reflect.Struct, reflect.Slice, reflect.Map, reflect.Array:
				cp := reflect.New(val.Type()).Elem()
				cp.Set(val)
				fillEmpty(cp, depth+1)
				v.SetMapIndex(it.Key(), cp)
			}
		}
	}
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
