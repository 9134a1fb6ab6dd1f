// Package datafile decodes the YAML data files maintainers edit (matrix.yaml,
// recipes) strictly: unknown keys, wrong types and duplicate keys are errors,
// and every error names the file, line and column it is about.
//
// Structs receive the position of their mapping in a field of type Pos, and
// the position of every key's value in a field of type Keys, so that later
// validation can point at the exact place a wrong value sits.
//
// The files built into dorisarm are not parsed at run time: their parsed
// form is built in too (see snapshot.go), used only for their exact bytes.
package datafile

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// Pos is a place in a data file. Line and Col start at 1; zero means unknown.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	default:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	}
}

// Keys holds the position of each key's value in a mapping.
type Keys map[string]Pos

// At returns the position of key, or fallback when the key was absent.
func (k Keys) At(key string, fallback Pos) Pos {
	if p, ok := k[key]; ok {
		return p
	}
	return fallback
}

// Error is one problem at one place in a data file.
type Error struct {
	Pos Pos
	Msg string
	// Err is the cause, when the problem is an error from elsewhere (a file
	// that cannot be read); Msg already says it, Unwrap lets errors.Is see it.
	Err error
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every data-file error bad input (fault.ErrInput).
func (e *Error) Is(target error) bool { return target == fault.ErrInput }

// Errorf makes an Error at p. It formats like fmt.Sprintf (no %w): the
// message is the problem in the file; set Err to keep a cause for errors.Is.
func Errorf(p Pos, format string, args ...any) *Error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// List is several errors, reported together so a maintainer fixes them in one go.
type List []*Error

func (l List) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Is makes a list of data-file errors bad input (fault.ErrInput).
func (l List) Is(target error) bool { return target == fault.ErrInput }

// Err returns nil for an empty list and the list otherwise.
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	l.Sort()
	return l
}

// Sort orders the errors by file, line and column.
func (l List) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Pos, l[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

var (
	posType  = reflect.TypeOf(Pos{})
	keysType = reflect.TypeOf(Keys{})
)

// Bounds on what one data file may cost. Data files are small and hand
// edited; these only stop hostile ones (an alias "billion laughs", a file
// of a million unknown keys) from taking minutes and gigabytes.
const (
	// MaxSize is the largest data file Decode reads.
	MaxSize = 8 << 20
	// MaxValues is how many YAML values Decode visits, counting every
	// expansion of an alias: a real matrix.yaml has a few thousand.
	MaxValues = 200_000
	// MaxErrors is how many errors one file reports; the rest are counted.
	MaxErrors = 50
)

// Decode parses data (the contents of file) into v, which must be a pointer.
func Decode(file string, data []byte, v any) error {
	if len(data) > MaxSize {
		return List{Errorf(Pos{File: file}, "the file is %d bytes; data files are at most %d (is it the right file?)", len(data), MaxSize)}
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("datafile.Decode: need a non-nil pointer, got %T", v)
	}
	t, ok := snapshotTree(data)
	if !ok {
		var err error
		if t, err = parse(file, data); err != nil {
			return err
		}
	}
	return decodeTree(file, t, rv)
}

// parse parses data with yaml.v3 and flattens the tree.
func parse(file string, data []byte) (*tree, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil && err != io.EOF {
		return nil, syntaxError(file, err)
	}
	// A second document would be ignored, and with it whatever a reader
	// of the file takes for part of it.
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == io.EOF:
	case err != nil:
		return nil, syntaxError(file, err)
	case len(next.Content) > 0 && next.Content[0].Tag != "!!null":
		return nil, List{Errorf(Pos{File: file, Line: next.Content[0].Line, Col: 1}, "a second YAML document (after ---) starts here; a data file holds one: remove the rest or move it to a file of its own")}
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, List{Errorf(Pos{File: file, Line: 1, Col: 1}, "file is empty; it needs a mapping at the top level")}
	}
	t, err := flatten(&root, false)
	if err != nil {
		return nil, List{Errorf(Pos{File: file}, "%v", err)}
	}
	return t, nil
}

// decodeTree decodes t, the tree of file, into the value rv points to.
func decodeTree(file string, t *tree, rv reflect.Value) error {
	if t.len(0) == 0 {
		return List{Errorf(Pos{File: file, Line: 1, Col: 1}, "file is empty; it needs a mapping at the top level")}
	}
	d := &decoder{file: file, t: t}
	d.decode(t.child(0, 0), rv.Elem())
	if d.over != nil {
		// Alone: the other errors may be echoes of the same aliases.
		return List{d.over}
	}
	if d.dropped > 0 {
		d.errs.Sort()
		return append(d.errs, Errorf(Pos{File: file}, "… and %d more errors (only the first %d are shown)", d.dropped, MaxErrors))
	}
	return d.errs.Err()
}

// syntaxError turns a yaml.v3 error ("yaml: line 3: ...") into a positioned Error.
func syntaxError(file string, err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if strings.HasPrefix(msg, "line ") {
		rest := msg[len("line "):]
		if i := strings.Index(rest, ":"); i > 0 {
			if n, convErr := strconv.Atoi(rest[:i]); convErr == nil {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return List{Errorf(Pos{File: file, Line: line, Col: 1}, "YAML syntax error: %s", msg)}
}

type decoder struct {
	file    string
	t       *tree
	path    []step // to the value being decoded
	errs    List
	dropped int    // errors past MaxErrors
	values  int    // values visited, aliases expanded
	over    *Error // set when values passed MaxValues: decoding stops
	// hint says what the innermost field with a shape tag holds, for
	// errors about a value of the wrong kind inside it.
	hint string
}

func (d *decoder) pos(n node) Pos { return Pos{File: d.file, Line: d.t.line(n), Col: d.t.col(n)} }

func (d *decoder) fail(n node, format string, args ...any) {
	if len(d.errs) >= MaxErrors {
		d.dropped++
		return
	}
	d.errs = append(d.errs, Errorf(d.pos(n), format, args...))
}

// failKind is fail for a value of the wrong kind: it also says what the
// field it is in holds, when the field's shape tag says so.
func (d *decoder) failKind(n node, want string) {
	if d.hint != "" {
		d.fail(n, "%s: expected %s, found %s (%s)", d.where(), want, d.kindName(n), d.hint)
		return
	}
	d.fail(n, "%s: expected %s, found %s", d.where(), want, d.kindName(n))
}

// visit counts one value and reports whether decoding may go on.
func (d *decoder) visit(n node) bool {
	if d.over != nil {
		return false
	}
	d.values++
	if d.values > MaxValues {
		d.over = Errorf(d.pos(n), "the file expands to more than %d values (YAML aliases, *name, repeat what their anchor holds); write the values out or use fewer aliases", MaxValues)
		return false
	}
	return true
}

func (d *decoder) kindName(n node) string {
	switch d.t.kind(n) {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if d.t.tag(n) == "!!null" {
			return "nothing (null)"
		}
		return fmt.Sprintf("the value %q", d.t.value(n))
	}
	return "an unsupported YAML node"
}

// step is one step of the path to the value being decoded: a mapping key
// or a list index. The decoder keeps the steps on a stack and spells the
// path ("items.a.tags[2]") only for an error: most values have none.
type step struct {
	key    string
	index  int
	isList bool
}

func (d *decoder) push(s step) { d.path = append(d.path, s) }
func (d *decoder) pop()        { d.path = d.path[:len(d.path)-1] }

// where says where the value being decoded sits.
func (d *decoder) where() string {
	if len(d.path) == 0 {
		return "at the top level"
	}
	var b strings.Builder
	b.WriteString("at ")
	for i, s := range d.path {
		switch {
		case s.isList:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case i > 0:
			b.WriteByte('.')
			b.WriteString(s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}

func (d *decoder) decode(n node, v reflect.Value) {
	t := d.t
	if t.kind(n) == yaml.AliasNode {
		n = t.alias(n) // never another alias (tree.check)
	}
	if !d.visit(n) {
		return
	}
	kind, tag := t.kind(n), t.tag(n)
	if v.Kind() == reflect.Pointer {
		if tag == "!!null" {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem())
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v)
	case reflect.Map:
		d.decodeMap(n, v)
	case reflect.Slice:
		if kind != yaml.SequenceNode {
			d.failKind(n, "a list")
			return
		}
		s := reflect.MakeSlice(v.Type(), t.len(n), t.len(n))
		for i := range t.len(n) {
			d.push(step{index: i, isList: true})
			d.decode(t.child(n, i), s.Index(i))
			d.pop()
		}
		v.Set(s)
	case reflect.String:
		if kind != yaml.ScalarNode || tag == "!!null" {
			d.failKind(n, "a string")
			return
		}
		v.SetString(t.value(n))
	case reflect.Bool:
		if kind != yaml.ScalarNode || tag != "!!bool" {
			d.failKind(n, "true or false")
			return
		}
		b, _ := strconv.ParseBool(strings.ToLower(t.value(n)))
		v.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		if kind != yaml.ScalarNode || tag != "!!int" {
			d.failKind(n, "a whole number")
			return
		}
		i, err := strconv.ParseInt(t.value(n), 0, 64)
		if err != nil {
			d.fail(n, "%s: %q is not a whole number", d.where(), t.value(n))
			return
		}
		v.SetInt(i)
	default:
		d.fail(n, "%s: cannot decode into %s", d.where(), v.Type())
	}
}

func (d *decoder) decodeMap(n node, v reflect.Value) {
	if d.t.kind(n) != yaml.MappingNode {
		d.failKind(n, "a mapping")
		return
	}
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		d.fail(n, "%s: cannot decode into %s", d.where(), t)
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(t, d.t.len(n)/2))
	}
	// One key and one element, reused: SetMapIndex copies both.
	key := reflect.New(t.Key()).Elem()
	elem := reflect.New(t.Elem()).Elem()
	d.pairs(n, func(k string, _, val node) {
		elem.SetZero()
		d.push(step{key: k})
		d.decode(val, elem)
		d.pop()
		key.SetString(k)
		v.SetMapIndex(key, elem)
	})
}

// pairs calls fn with each key and value of a mapping, in order: keys
// must be plain names and appear once; expansion is bounded (visit).
func (d *decoder) pairs(n node, fn func(key string, k, val node)) {
	t := d.t
	count := t.len(n)
	var seen map[string]bool // for long mappings; short ones look back
	const lookBack = 16
	if count > 2*lookBack {
		seen = make(map[string]bool, count/2)
	}
	for i := 0; i+1 < count; i += 2 {
		k, val := t.child(n, i), t.child(n, i+1)
		if !d.visit(k) {
			return
		}
		if t.kind(k) != yaml.ScalarNode {
			d.fail(k, "%s: keys must be plain names", d.where())
			continue
		}
		key := t.value(k)
		if d.seenKey(n, i, key, seen) {
			d.fail(k, "%s: key %q appears twice; keep one", d.where(), key)
			continue
		}
		fn(key, k, val)
	}
}

// seenKey reports whether key was among the keys of mapping n before its
// i-th child; with a map it records key there instead of looking back.
func (d *decoder) seenKey(n node, i int, key string, seen map[string]bool) bool {
	if seen != nil {
		if seen[key] {
			return true
		}
		seen[key] = true
		return false
	}
	for j := 0; j < i; j += 2 {
		if b := d.t.child(n, j); d.t.kind(b) == yaml.ScalarNode && d.t.value(b) == key {
			return true
		}
	}
	return false
}

// structInfo is what decoding needs of a struct type, worked out once.
type structInfo struct {
	fields  map[string]int    // YAML key → field index
	shapes  map[string]string // YAML key → its shape tag: what it holds, for errors
	known   string            // the keys, sorted and joined, for errors
	posIdx  int               // the Pos field, or -1
	keysIdx int               // the Keys field, or -1
}

var structInfos sync.Map // reflect.Type → *structInfo

func infoOf(t reflect.Type) *structInfo {
	if si, ok := structInfos.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{fields: map[string]int{}, posIdx: -1, keysIdx: -1}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		switch f.Type {
		case posType:
			si.posIdx = i
			continue
		case keysType:
			si.keysIdx = i
			continue
		}
		tag := f.Tag.Get("yaml")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		si.fields[name] = i
		if sh := f.Tag.Get("shape"); sh != "" {
			if si.shapes == nil {
				si.shapes = map[string]string{}
			}
			si.shapes[name] = sh
		}
	}
	si.known = strings.Join(slices.Sorted(maps.Keys(si.fields)), ", ")
	actual, _ := structInfos.LoadOrStore(t, si)
	return actual.(*structInfo)
}

func (d *decoder) decodeStruct(n node, v reflect.Value) {
	if d.t.kind(n) != yaml.MappingNode {
		d.failKind(n, "a mapping")
		return
	}
	si := infoOf(v.Type())
	if si.posIdx >= 0 {
		if f := v.Field(si.posIdx); f.CanAddr() {
			*f.Addr().Interface().(*Pos) = d.pos(n) // without boxing a Pos
		} else {
			f.Set(reflect.ValueOf(d.pos(n)))
		}
	}
	var keys Keys
	if si.keysIdx >= 0 {
		keys = make(Keys, d.t.len(n)/2)
	}
	d.pairs(n, func(key string, k, val node) {
		idx, ok := si.fields[key]
		if !ok {
			d.fail(k, "%s: unknown key %q (known keys: %s)", d.where(), key, si.known)
			return
		}
		if keys != nil {
			keys[key] = d.pos(val)
		}
		d.push(step{key: key})
		hint := d.hint
		if sh, ok := si.shapes[key]; ok {
			d.hint = d.where()[len("at "):] + " " + sh
		}
		d.decode(val, v.Field(idx))
		d.hint = hint
		d.pop()
	})
	if si.keysIdx >= 0 {
		v.Field(si.keysIdx).Set(reflect.ValueOf(keys))
	}
}
