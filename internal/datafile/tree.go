package datafile

import (
	"encoding/binary"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// tree is a YAML node tree in flat form, what the decoder reads: the same
// form whether it was just parsed or comes from a snapshot, where it is
// read in place from the bytes built into the binary (no tree to allocate).
type tree struct {
	recs  string // recSize bytes a node, node 0 the document
	edges string // 4 bytes a child; a node's children are a run of them
	strs  string // the tags and values
}

// node is a node's number in its tree.
type node int32

// A node's record: little-endian uint32 fields at these offsets.
const (
	fKind   = 0
	fLine   = 4
	fCol    = 8
	fTagOff = 12
	fTagLen = 16
	fValOff = 20
	fValLen = 24
	fFirst  = 28 // the first child's place in edges; for an alias, its target
	fCount  = 32 // how many children
	recSize = 36
)

func u32(s string, i int) int {
	return int(uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24)
}

func (t *tree) field(n node, f int) int { return u32(t.recs, int(n)*recSize+f) }
func (t *tree) nodes() int              { return len(t.recs) / recSize }
func (t *tree) kind(n node) yaml.Kind   { return yaml.Kind(t.field(n, fKind)) }
func (t *tree) line(n node) int         { return t.field(n, fLine) }
func (t *tree) col(n node) int          { return t.field(n, fCol) }
func (t *tree) len(n node) int          { return t.field(n, fCount) }
func (t *tree) alias(n node) node       { return node(t.field(n, fFirst)) }

func (t *tree) tag(n node) string {
	off := t.field(n, fTagOff)
	return t.strs[off : off+t.field(n, fTagLen)]
}

func (t *tree) value(n node) string {
	off := t.field(n, fValOff)
	return t.strs[off : off+t.field(n, fValLen)]
}

// child is n's i-th child.
func (t *tree) child(n node, i int) node { return node(u32(t.edges, (t.field(n, fFirst)+i)*4)) }

// check makes sure every field points inside the tree, so that reading it
// cannot go out of bounds or loop: an alias targets a node that is not an
// alias, and children come after their parent.
func (t *tree) check() error {
	n := t.nodes()
	if n == 0 || len(t.recs)%recSize != 0 || len(t.edges)%4 != 0 {
		return fmt.Errorf("bad tree sizes")
	}
	ne := len(t.edges) / 4
	for i := range n {
		x := node(i)
		if t.field(x, fTagOff)+t.field(x, fTagLen) > len(t.strs) || t.field(x, fValOff)+t.field(x, fValLen) > len(t.strs) {
			return fmt.Errorf("node %d: a string outside the table", i)
		}
		if t.kind(x) == yaml.AliasNode {
			if a := int(t.alias(x)); a >= n || t.kind(node(a)) == yaml.AliasNode {
				return fmt.Errorf("node %d: bad alias", i)
			}
			continue
		}
		first, count := t.field(x, fFirst), t.len(x)
		if first > ne || count > ne-first {
			return fmt.Errorf("node %d: children outside the tree", i)
		}
		for j := range count {
			if c := int(t.child(x, j)); c <= i || c >= n {
				return fmt.Errorf("node %d: bad child", i)
			}
		}
	}
	return nil
}

// flatten turns a parsed tree into its flat form: nodes numbered in
// pre-order (a parent before its children). intern stores equal strings
// once (for snapshots, where size matters more than time).
func flatten(root *yaml.Node, intern bool) (*tree, error) {
	count := 0
	var size func(n *yaml.Node)
	size = func(n *yaml.Node) {
		count++
		for _, c := range n.Content {
			size(c)
		}
	}
	size(root)
	recs := make([]byte, count*recSize)
	var edges, strs []byte
	interned := map[string]int{}
	str := func(s string) (off, n int) {
		if !intern {
			strs = append(strs, s...)
			return len(strs) - len(s), len(s)
		}
		if o, ok := interned[s]; ok {
			return o, len(s)
		}
		o := len(strs)
		strs = append(strs, s...)
		interned[s] = o
		return o, len(s)
	}
	anchors := map[*yaml.Node]int{} // aliases point at anchored nodes
	type alias struct {
		rec    int
		target *yaml.Node
	}
	var aliases []alias
	next := 0
	var stack []int
	var number func(n *yaml.Node) int
	number = func(n *yaml.Node) int {
		i := next
		next++
		if n.Anchor != "" {
			anchors[n] = i
		}
		tagOff, tagLen := str(n.Tag)
		valOff, valLen := str(n.Value)
		first, kids := 0, 0
		switch {
		case n.Kind == yaml.AliasNode:
			aliases = append(aliases, alias{i, n.Alias})
		case len(n.Content) > 0:
			base := len(stack) // the children's numbers, above the callers'
			for _, c := range n.Content {
				k := number(c)
				stack = append(stack, k)
			}
			first, kids = len(edges)/4, len(n.Content)
			for _, c := range stack[base:] {
				edges = binary.LittleEndian.AppendUint32(edges, uint32(c))
			}
			stack = stack[:base]
		}
		r := recs[i*recSize : (i+1)*recSize]
		for k, v := range []int{int(n.Kind), n.Line, n.Column, tagOff, tagLen, valOff, valLen, first, kids} {
			binary.LittleEndian.PutUint32(r[4*k:], uint32(v))
		}
		return i
	}
	number(root)
	for _, a := range aliases {
		t, ok := anchors[a.target]
		if !ok || a.target.Kind == yaml.AliasNode {
			return nil, fmt.Errorf("line %d: an alias to no anchored node", u32(string(recs[a.rec*recSize:]), fLine))
		}
		binary.LittleEndian.PutUint32(recs[a.rec*recSize+fFirst:], uint32(t))
	}
	return &tree{recs: string(recs), edges: string(edges), strs: string(strs)}, nil
}
