// Package datafile decodes the YAML data files maintainers edit (matrix.yaml,
// recipes) strictly: unknown keys, wrong types and duplicate keys are errors,
// and every error names the file, line and column it is about.
//
// Structs receive the position of their mapping in a field of type Pos, and
// the position of every key's value in a field of type Keys, so that later
// validation can point at the exact place a wrong value sits.
package datafile

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

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
	root, ok := snapshotTree(data)
	if !ok {
		root = new(yaml.Node)
		if err := yaml.Unmarshal(data, root); err != nil {
			return syntaxError(file, err)
		}
	}
	d := &decoder{file: file}
	if root.Kind == 0 || len(root.Content) == 0 {
		return List{Errorf(Pos{File: file, Line: 1, Col: 1}, "file is empty; it needs a mapping at the top level")}
	}
	d.decode(root.Content[0], rv.Elem(), nil)
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
	errs    List
	dropped int    // errors past MaxErrors
	values  int    // values visited, aliases expanded
	over    *Error // set when values passed MaxValues: decoding stops
}

func (d *decoder) pos(n *yaml.Node) Pos { return Pos{File: d.file, Line: n.Line, Col: n.Column} }

func (d *decoder) fail(n *yaml.Node, format string, args ...any) {
	if len(d.errs) >= MaxErrors {
		d.dropped++
		return
	}
	d.errs = append(d.errs, Errorf(d.pos(n), format, args...))
}

// visit counts one value and reports whether decoding may go on.
func (d *decoder) visit(n *yaml.Node) bool {
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

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing (null)"
		}
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "an unsupported YAML node"
}

// path is where a value sits ("items.a.tags[2]"), kept as a chain of its
// steps and spelled out only for an error: most values have none.
type path struct {
	parent *path
	key    string // a mapping key, or
	index  int    // a list index
	isList bool
}

func (p *path) String() string {
	if p == nil {
		return ""
	}
	var steps []*path
	for q := p; q != nil; q = q.parent {
		steps = append(steps, q)
	}
	var b strings.Builder
	for i := len(steps) - 1; i >= 0; i-- {
		q := steps[i]
		switch {
		case !q.isList && b.Len() > 0:
			b.WriteByte('.')
			b.WriteString(q.key)
		case !q.isList:
			b.WriteString(q.key)
		default:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(q.index))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func where(p *path) string {
	if p == nil {
		return "at the top level"
	}
	return "at " + p.String()
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, p *path) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if !d.visit(n) {
		return
	}
	if v.Kind() == reflect.Pointer {
		if n.Tag == "!!null" {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), p)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, p)
	case reflect.Map:
		d.decodeMap(n, v, p)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, "%s: expected a list, found %s", where(p), kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), &path{parent: p, index: i, isList: true})
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			d.fail(n, "%s: expected a string, found %s", where(p), kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.fail(n, "%s: expected true or false, found %s", where(p), kindName(n))
			return
		}
		b, _ := strconv.ParseBool(strings.ToLower(n.Value))
		v.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			d.fail(n, "%s: expected a whole number, found %s", where(p), kindName(n))
			return
		}
		i, err := strconv.ParseInt(n.Value, 0, 64)
		if err != nil {
			d.fail(n, "%s: %q is not a whole number", where(p), n.Value)
			return
		}
		v.SetInt(i)
	default:
		d.fail(n, "%s: cannot decode into %s", where(p), v.Type())
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, p *path) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, "%s: expected a mapping, found %s", where(p), kindName(n))
		return
	}
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		d.fail(n, "%s: cannot decode into %s", where(p), t)
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(t, len(n.Content)/2))
	}
	elemType := t.Elem()
	plainKey := t.Key() == stringType
	d.pairs(n, p, func(k, val *yaml.Node) {
		elem := reflect.New(elemType).Elem()
		d.decode(val, elem, &path{parent: p, key: k.Value})
		key := reflect.ValueOf(k.Value)
		if !plainKey {
			key = key.Convert(t.Key())
		}
		v.SetMapIndex(key, elem)
	})
}

var stringType = reflect.TypeOf("")

// pairs calls fn with each key and value of a mapping, in order: keys
// must be plain names and appear once; expansion is bounded (visit).
func (d *decoder) pairs(n *yaml.Node, p *path, fn func(k, val *yaml.Node)) {
	var seen map[string]bool // for long mappings; short ones look back
	const lookBack = 16
	if len(n.Content) > 2*lookBack {
		seen = make(map[string]bool, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !d.visit(k) {
			return
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k, "%s: keys must be plain names", where(p))
			continue
		}
		if d.seenKey(n.Content[:i], k, seen) {
			d.fail(k, "%s: key %q appears twice; keep one", where(p), k.Value)
			continue
		}
		fn(k, val)
	}
}

// seenKey reports whether k was among the earlier keys (the even entries
// of before); with a map it records k there instead of looking back.
func (d *decoder) seenKey(before []*yaml.Node, k *yaml.Node, seen map[string]bool) bool {
	if seen != nil {
		if seen[k.Value] {
			return true
		}
		seen[k.Value] = true
		return false
	}
	for j := 0; j+1 < len(before); j += 2 {
		if b := before[j]; b.Kind == yaml.ScalarNode && b.Value == k.Value {
			return true
		}
	}
	return false
}

// structInfo is what decoding needs of a struct type, worked out once.
type structInfo struct {
	fields  map[string]int // YAML key → field index
	known   string         // the keys, sorted and joined, for errors
	posIdx  int            // the Pos field, or -1
	keysIdx int            // the Keys field, or -1
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
	}
	si.known = strings.Join(slices.Sorted(maps.Keys(si.fields)), ", ")
	actual, _ := structInfos.LoadOrStore(t, si)
	return actual.(*structInfo)
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, p *path) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, "%s: expected a mapping, found %s", where(p), kindName(n))
		return
	}
	si := infoOf(v.Type())
	if si.posIdx >= 0 {
		v.Field(si.posIdx).Set(reflect.ValueOf(d.pos(n)))
	}
	var keys Keys
	if si.keysIdx >= 0 {
		keys = make(Keys, len(n.Content)/2)
	}
	d.pairs(n, p, func(k, val *yaml.Node) {
		idx, ok := si.fields[k.Value]
		if !ok {
			d.fail(k, "%s: unknown key %q (known keys: %s)", where(p), k.Value, si.known)
			return
		}
		vn := val
		for vn.Kind == yaml.AliasNode {
			vn = vn.Alias
		}
		if keys != nil {
			keys[k.Value] = d.pos(val)
		}
		d.decode(vn, v.Field(idx), &path{parent: p, key: k.Value})
	})
	if si.keysIdx >= 0 {
		v.Field(si.keysIdx).Set(reflect.ValueOf(keys))
	}
}
