// Package packgen writes the blobs internal/packed reads, and the Go code
// that decodes them: both are derived from the Go types of the value by
// reflection. The blob holds the values; the generated code holds only
// the types' structure (which field comes next and of what type), so it
// carries no fact of the data. It is used by generators (go generate),
// never linked into dorisarm.
package packgen

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"go/format"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/packed"
)

var (
	posType    = reflect.TypeFor[datafile.Pos]()
	stringType = reflect.TypeFor[string]()
)

// usesPool says whether a slice type takes its elements from the blob's
// pool of strings (Reader.Strs).
func usesPool(t reflect.Type) bool { return t.Kind() == reflect.Slice && t.Elem() == stringType }

// check says why t cannot be packed, or nil; it walks every type t holds.
func check(t reflect.Type, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return nil
	case reflect.Struct:
		if t == posType {
			return nil
		}
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				if err := check(f.Type, seen); err != nil {
					return fmt.Errorf("%s.%s: %w", t, f.Name, err)
				}
			}
		}
		return nil
	case reflect.Pointer:
		if t.Elem().Kind() != reflect.Struct || t.Elem() == posType {
			return fmt.Errorf("%s: pointers to structs only", t)
		}
		return check(t.Elem(), seen)
	case reflect.Slice:
		return check(t.Elem(), seen)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return fmt.Errorf("%s: maps with string keys only", t)
		}
		if err := check(t.Key(), seen); err != nil {
			return err
		}
		return check(t.Elem(), seen)
	}
	return fmt.Errorf("%s: cannot be packed", t)
}

// Layout is a digest of the structure of the type root (a struct) and of
// every type it holds, and of the format's version: a blob is read only by
// a decoder generated for the same layout.
func Layout(root reflect.Type) string {
	var b strings.Builder
	fmt.Fprintf(&b, "packed %d\n", packed.Version)
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		fmt.Fprintf(&b, "%s %s %s", t.PkgPath(), t, t.Kind())
		if t.Kind() == reflect.Struct && t != posType {
			for i := range t.NumField() {
				if f := t.Field(i); f.IsExported() {
					fmt.Fprintf(&b, " %s:%s", f.Name, f.Type)
				}
			}
		}
		b.WriteByte('\n')
		switch t.Kind() {
		case reflect.Struct:
			if t != posType {
				for i := range t.NumField() {
					if f := t.Field(i); f.IsExported() {
						walk(f.Type)
					}
				}
			}
		case reflect.Pointer, reflect.Slice:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		}
	}
	walk(root)
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// Encode writes the blob of *v (v a pointer to a struct), made from data
// with the digest sum. Every datafile.Pos in it must be in file, or have
// no file: a reader gives them the name of the file it is reading.
func Encode(v any, sum [packed.SumSize]byte, file string) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("packgen: Encode takes a pointer to a struct, not %T", v)
	}
	if err := check(rv.Elem().Type(), map[reflect.Type]bool{}); err != nil {
		return nil, err
	}
	e := &encoder{file: file, seen: map[uintptr]bool{}}
	e.value(rv.Elem())
	if e.err != nil {
		return nil, e.err
	}
	out := append([]byte(nil), sum[:]...)
	out = binary.AppendUvarint(out, packed.Version)
	out = appendString(out, Layout(rv.Elem().Type()))
	out = binary.AppendUvarint(out, uint64(e.pool))
	return append(out, e.body...), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type encoder struct {
	file string
	body []byte
	pool int // []string elements
	seen map[uintptr]bool
	err  error
}

func (e *encoder) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf("packgen: "+format, args...)
	}
}

func (e *encoder) uvarint(x uint64) { e.body = binary.AppendUvarint(e.body, x) }

func (e *encoder) str(s string) { e.body = appendString(e.body, s) }

func (e *encoder) bool(b bool) {
	if b {
		e.body = append(e.body, 1)
	} else {
		e.body = append(e.body, 0)
	}
}

func (e *encoder) value(v reflect.Value) {
	t := v.Type()
	switch t.Kind() {
	case reflect.String:
		e.str(v.String())
	case reflect.Bool:
		e.bool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x := v.Int()
		e.uvarint(uint64(x<<1) ^ uint64(x>>63))
	case reflect.Struct:
		if t == posType {
			e.pos(v.Interface().(datafile.Pos))
			return
		}
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				if !v.Field(i).IsZero() {
					e.fail("%s.%s: an unexported field cannot be packed", t, t.Field(i).Name)
				}
				continue
			}
			e.value(v.Field(i))
		}
	case reflect.Pointer:
		e.bool(!v.IsNil())
		if v.IsNil() {
			return
		}
		if e.seen[v.Pointer()] {
			e.fail("%s: the same value is reached twice; only trees can be packed", t)
			return
		}
		e.seen[v.Pointer()] = true
		e.value(v.Elem())
	case reflect.Slice:
		if v.IsNil() {
			e.uvarint(0)
			return
		}
		e.uvarint(uint64(v.Len()) + 1)
		if usesPool(t) {
			e.pool += v.Len()
		}
		for i := range v.Len() {
			e.value(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			e.uvarint(0)
			return
		}
		e.uvarint(uint64(v.Len()) + 1)
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			e.value(k)
			e.value(v.MapIndex(k))
		}
	default:
		e.fail("%s: cannot be packed", t)
	}
}

func (e *encoder) pos(p datafile.Pos) {
	if p.File != "" && p.File != e.file {
		e.fail("a position in %q, not %q", p.File, e.file)
		return
	}
	if p.Line < 0 || p.Col < 0 {
		e.fail("a negative position %v", p)
		return
	}
	lf := uint64(p.Line) << 1
	if p.File != "" {
		lf |= 1
	}
	e.uvarint(lf)
	e.uvarint(uint64(p.Col))
}

// Options name what the generated decoder declares.
type Options struct {
	// Package is the name of the package the code is in; PkgPath its
	// import path (root's package: its types are named without qualifier).
	Package, PkgPath string
	// Prefix starts every name the file declares: <Prefix>Layout, the
	// layout the blob must have; <Prefix>Read(r *packed.Reader, v *Root),
	// which reads the value; the type <Prefix>Decoder.
	Prefix string
	// Build, when set, is the file's build constraint (without //go:build).
	Build string
	// Generator names the command that writes the file, for its header.
	Generator string
}

// Decoder returns Go source that reads a blob of root (a struct type) that
// Encode wrote, field by field, with a packed.Reader.
func Decoder(root reflect.Type, o Options) ([]byte, error) {
	if root.Kind() != reflect.Struct {
		return nil, fmt.Errorf("packgen: the root must be a struct type, not %s", root)
	}
	if err := check(root, map[reflect.Type]bool{}); err != nil {
		return nil, err
	}
	g := &gen{o: o, done: map[string]bool{}, imports: map[string]bool{"github.com/dorisarm/dorisarm/internal/packed": true}}
	g.queue = append(g.queue, method{name: g.fillName(root), t: root, fill: true})
	g.done[g.fillName(root)] = true
	for len(g.queue) > 0 {
		m := g.queue[0]
		g.queue = g.queue[1:]
		g.emit(m)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by %s; DO NOT EDIT.\n\n", o.Generator)
	if o.Build != "" {
		fmt.Fprintf(&b, "//go:build %s\n\n", o.Build)
	}
	fmt.Fprintf(&b, "package %s\n\nimport (\n", o.Package)
	for _, p := range slices.Sorted(maps.Keys(g.imports)) {
		fmt.Fprintf(&b, "\t%q\n", p)
	}
	fmt.Fprintf(&b, ")\n\n")
	fmt.Fprintf(&b, "// %sLayout is the layout of the types this file reads (packgen.Layout).\n", o.Prefix)
	fmt.Fprintf(&b, "const %sLayout = %q\n\n", o.Prefix, Layout(root))
	fmt.Fprintf(&b, "// %sDecoder reads the values of a blob, in the order packgen.Encode wrote them.\n", o.Prefix)
	fmt.Fprintf(&b, "type %sDecoder struct{ r *packed.Reader }\n\n", o.Prefix)
	fmt.Fprintf(&b, "// %sRead reads a %s from r into v.\n", o.Prefix, g.typeName(root))
	fmt.Fprintf(&b, "func %sRead(r *packed.Reader, v *%s) { %sDecoder{r}.%s(v) }\n", o.Prefix, g.typeName(root), o.Prefix, g.fillName(root))
	b.WriteString(g.body.String())
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("packgen: the generated source does not parse: %w\n%s", err, b.Bytes())
	}
	return out, nil
}

type method struct {
	name string
	t    reflect.Type
	fill bool // a struct filled in place: func (d) name(v *T)
}

type gen struct {
	o       Options
	body    strings.Builder
	queue   []method
	done    map[string]bool
	imports map[string]bool
}

func (g *gen) typeName(t reflect.Type) string {
	if t.Name() != "" {
		if t.PkgPath() == g.o.PkgPath || t.PkgPath() == "" {
			return t.Name()
		}
		g.imports[t.PkgPath()] = true
		return t.String()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + g.typeName(t.Elem())
	case reflect.Slice:
		return "[]" + g.typeName(t.Elem())
	case reflect.Map:
		return "map[" + g.typeName(t.Key()) + "]" + g.typeName(t.Elem())
	}
	return t.String()
}

// ident spells t as part of a Go identifier.
func (g *gen) ident(t reflect.Type) string {
	if t.Name() != "" {
		s := t.Name()
		if t.PkgPath() != "" && t.PkgPath() != g.o.PkgPath {
			pkg := t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:]
			s = strings.ToUpper(pkg[:1]) + pkg[1:] + s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "Ptr" + g.ident(t.Elem())
	case reflect.Slice:
		return "List" + g.ident(t.Elem())
	case reflect.Map:
		return "Map" + g.ident(t.Key()) + "To" + g.ident(t.Elem())
	}
	return strings.ToUpper(t.String()[:1]) + t.String()[1:]
}

func (g *gen) fillName(t reflect.Type) string { return "fill" + g.ident(t) }

// need queues the method name for t unless it is there already.
func (g *gen) need(name string, t reflect.Type, fill bool) string {
	if !g.done[name] {
		g.done[name] = true
		g.queue = append(g.queue, method{name: name, t: t, fill: fill})
	}
	return name
}

// expr is a Go expression that reads a value of type t.
func (g *gen) expr(t reflect.Type) string {
	conv := func(call, basic string) string {
		if t.Name() == basic && t.PkgPath() == "" {
			return call
		}
		return g.typeName(t) + "(" + call + ")"
	}
	switch t.Kind() {
	case reflect.String:
		return conv("d.r.Str()", "string")
	case reflect.Bool:
		return conv("d.r.Bool()", "bool")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return conv("d.r.Int()", "int")
	case reflect.Struct:
		if t == posType {
			return "d.r.Pos()"
		}
		g.need(g.fillName(t), t, true)
		return "d." + g.need("read"+g.ident(t), t, false) + "()"
	case reflect.Slice:
		if usesPool(t) {
			return conv("d.r.Strs()", "")
		}
	}
	return "d." + g.need("read"+g.ident(t), t, false) + "()"
}

func (g *gen) emit(m method) {
	b := &g.body
	t, tn := m.t, g.typeName(m.t)
	if m.fill {
		fmt.Fprintf(b, "\nfunc (d %sDecoder) %s(v *%s) {\n", g.o.Prefix, m.name, tn)
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Type.Kind() == reflect.Struct && f.Type != posType {
				fmt.Fprintf(b, "\td.%s(&v.%s)\n", g.need(g.fillName(f.Type), f.Type, true), f.Name)
				continue
			}
			fmt.Fprintf(b, "\tv.%s = %s\n", f.Name, g.expr(f.Type))
		}
		b.WriteString("}\n")
		return
	}
	fmt.Fprintf(b, "\nfunc (d %sDecoder) %s() %s {\n", g.o.Prefix, m.name, tn)
	switch t.Kind() {
	case reflect.Struct:
		fmt.Fprintf(b, "\tvar v %s\n\td.%s(&v)\n\treturn v\n", tn, g.fillName(t))
	case reflect.Pointer:
		fill := g.need(g.fillName(t.Elem()), t.Elem(), true)
		fmt.Fprintf(b, "\tif !d.r.Bool() {\n\t\treturn nil\n\t}\n\tv := new(%s)\n\td.%s(v)\n\treturn v\n", g.typeName(t.Elem()), fill)
	case reflect.Slice:
		fmt.Fprintf(b, "\tn, ok := d.r.Len()\n\tif !ok {\n\t\treturn nil\n\t}\n\ts := make(%s, n)\n", tn)
		fmt.Fprintf(b, "\tfor i := range s {\n\t\ts[i] = %s\n\t}\n\treturn s\n", g.expr(t.Elem()))
	case reflect.Map:
		fmt.Fprintf(b, "\tn, ok := d.r.Len()\n\tif !ok {\n\t\treturn nil\n\t}\n\tm := make(%s, n)\n", tn)
		// Values are allocated one by one: in a fresh process, one array
		// of them (one allocation) costs more page faults than it saves.
		fmt.Fprintf(b, "\tfor range n {\n\t\tk := %s\n\t\tm[k] = %s\n\t}\n\treturn m\n", g.expr(t.Key()), g.expr(t.Elem()))
	}
	b.WriteString("}\n")
}
