// Package golit writes a decoded data value (structs, pointers to them,
// maps with string keys, slices, strings, numbers, booleans) as a Go
// composite literal, for generated files that spare a process decoding data
// built into it. Every datafile.Pos in the value must be in one file; it is
// written with a variable in its place, so the literal fits any file name
// that holds the same bytes.
package golit

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

var posType = reflect.TypeFor[datafile.Pos]()

// Writer writes literals of values of the package pkg (its import path):
// its types are named without a qualifier, others as reflect spells them
// ("datafile.Pos"), so the file must import those packages.
type Writer struct {
	Pkg string
	// File is the file every Pos must name; FileVar what stands for it.
	File, FileVar string

	b    strings.Builder
	seen map[uintptr]bool // pointers: the value must be a tree
	err  error
}

// Literal returns v as a Go expression.
func (w *Writer) Literal(v any) (string, error) {
	w.b.Reset()
	w.seen = map[uintptr]bool{}
	w.err = nil
	w.value(reflect.ValueOf(v), 0, true)
	return w.b.String(), w.err
}

func (w *Writer) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
	}
}

func (w *Writer) typeName(t reflect.Type) string {
	if t.Name() != "" {
		if t.PkgPath() == w.Pkg {
			return t.Name()
		}
		return t.String()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + w.typeName(t.Elem())
	case reflect.Slice:
		return "[]" + w.typeName(t.Elem())
	case reflect.Map:
		return "map[" + w.typeName(t.Key()) + "]" + w.typeName(t.Elem())
	}
	return t.String()
}

func (w *Writer) indent(depth int) {
	w.b.WriteByte('\n')
	for range depth {
		w.b.WriteByte('\t')
	}
}

// value writes v; typed says whether the literal needs its type (false
// inside a slice or map literal, where Go infers it).
func (w *Writer) value(v reflect.Value, depth int, typed bool) {
	t := v.Type()
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			w.b.WriteString("nil")
			return
		}
		if w.seen[v.Pointer()] {
			w.fail("%s: the same value is reached twice; golit writes trees only", t)
			return
		}
		w.seen[v.Pointer()] = true
		if t.Elem().Kind() != reflect.Struct {
			w.fail("%s: pointers to structs only", t)
			return
		}
		if typed {
			w.b.WriteByte('&')
		}
		w.value(v.Elem(), depth, typed)
	case reflect.Struct:
		if t == posType {
			w.pos(v.Interface().(datafile.Pos), typed)
			return
		}
		if typed {
			w.b.WriteString(w.typeName(t))
		}
		w.b.WriteByte('{')
		n := 0
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				if !v.Field(i).IsZero() {
					w.fail("%s.%s: unexported fields cannot be written", t, f.Name)
				}
				continue
			}
			if v.Field(i).IsZero() {
				continue
			}
			n++
			w.indent(depth + 1)
			w.b.WriteString(f.Name)
			w.b.WriteString(": ")
			w.value(v.Field(i), depth+1, true)
			w.b.WriteByte(',')
		}
		if n > 0 {
			w.indent(depth)
		}
		w.b.WriteByte('}')
	case reflect.Map:
		if v.IsNil() {
			w.b.WriteString("nil")
			return
		}
		if t.Key().Kind() != reflect.String {
			w.fail("%s: maps with string keys only", t)
			return
		}
		w.b.WriteString(w.typeName(t))
		w.b.WriteByte('{')
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		for _, k := range keys {
			w.indent(depth + 1)
			w.b.WriteString(strconv.Quote(k))
			w.b.WriteString(": ")
			w.value(v.MapIndex(reflect.ValueOf(k).Convert(t.Key())), depth+1, false)
			w.b.WriteByte(',')
		}
		if len(keys) > 0 {
			w.indent(depth)
		}
		w.b.WriteByte('}')
	case reflect.Slice:
		if v.IsNil() {
			w.b.WriteString("nil")
			return
		}
		w.b.WriteString(w.typeName(t))
		w.b.WriteByte('{')
		for i := range v.Len() {
			if i > 0 {
				w.b.WriteString(", ")
			}
			w.value(v.Index(i), depth+1, false)
		}
		w.b.WriteByte('}')
	case reflect.String:
		w.scalar(t, strconv.Quote(v.String()), typed)
	case reflect.Bool:
		w.scalar(t, strconv.FormatBool(v.Bool()), typed)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.scalar(t, strconv.FormatInt(v.Int(), 10), typed)
	default:
		w.fail("%s: cannot be written as a literal", t)
	}
}

// scalar writes a basic value, converted when its type is a named one.
func (w *Writer) scalar(t reflect.Type, lit string, typed bool) {
	if t.PkgPath() != "" && typed {
		lit = w.typeName(t) + "(" + lit + ")"
	}
	w.b.WriteString(lit)
}

func (w *Writer) pos(p datafile.Pos, typed bool) {
	if p.File != w.File {
		w.fail("a position in %q, not %q", p.File, w.File)
		return
	}
	if typed {
		w.b.WriteString(w.typeName(posType))
	}
	fmt.Fprintf(&w.b, "{File: %s, Line: %d, Col: %d}", w.FileVar, p.Line, p.Col)
}
