package datafile

import (
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Snapshots spare a process parsing the YAML files dorisarm is built with.
//
// snapshots.bin holds, for each file snapshots.list names, the YAML node
// tree yaml.v3 parses from it (kinds, tags, values, lines and columns,
// aliases), keyed by the sha256 of the exact bytes it came from. Decode
// uses a tree only when the bytes it is given hash to that key, so an
// edited file is parsed as before and a stale snapshot is never used; the
// decoder then runs on the tree as on a parsed one, so values, positions
// and error messages are the same either way. The tree does not depend on
// the Go types it is decoded into, so a changed struct cannot make a
// snapshot wrong either. TestSnapshotsFresh fails when snapshots.bin is out
// of date with the files (or with yaml.v3, should an upgrade parse them
// differently); `go generate ./internal/datafile` rewrites it.
//
//go:generate go run ./gensnap
//go:embed snapshots.bin
var snapshotBlob string

// snapshotMagic starts the file; bump its number when the format changes.
const snapshotMagic = "dorisarm datafile snapshot 2\n"

// snapshotEntry is one file's tree in the blob.
type snapshotEntry struct {
	name string   // the file's path in the repository, for the tests
	size int      // of the YAML bytes
	sum  [32]byte // sha256 of the YAML bytes
	tree tree     // read in place from the blob
	// checked checks the tree once, when it is first used.
	checked func() error
}

var snapshotIndex = sync.OnceValue(func() []snapshotEntry {
	es, err := parseSnapshots(snapshotBlob)
	if err != nil {
		return nil // a bad blob means parsing, never wrong values
	}
	return es
})

// snapshotTree returns the tree of data's snapshot, or false when there is
// none for these exact bytes.
func snapshotTree(data []byte) (*tree, bool) {
	var sum *[32]byte
	es := snapshotIndex()
	for i := range es {
		if es[i].size != len(data) {
			continue
		}
		if sum == nil {
			s := sha256Sum(data)
			sum = &s
		}
		if es[i].sum == *sum {
			e := &es[i]
			if err := e.checked(); err != nil {
				return nil, false // a damaged blob means parsing, never wrong values
			}
			return &e.tree, true
		}
	}
	return nil, false
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

// reader reads the blob; a read past its end sets bad.
type reader struct {
	s   string
	bad bool
}

func (r *reader) uvarint() int {
	var x uint64
	for shift := 0; shift < 64; shift += 7 {
		if len(r.s) == 0 {
			r.bad = true
			return 0
		}
		b := r.s[0]
		r.s = r.s[1:]
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			if x > 1<<31 {
				r.bad = true
				return 0
			}
			return int(x)
		}
	}
	r.bad = true
	return 0
}

func (r *reader) bytes(n int) string {
	if n < 0 || n > len(r.s) {
		r.bad = true
		return ""
	}
	b := r.s[:n]
	r.s = r.s[n:]
	return b
}

func (r *reader) str() string { return r.bytes(r.uvarint()) }

// parseSnapshots reads the blob's entries; each tree is checked when it is
// first used.
func parseSnapshots(blob string) ([]snapshotEntry, error) {
	if len(blob) < len(snapshotMagic) || blob[:len(snapshotMagic)] != snapshotMagic {
		return nil, fmt.Errorf("not a snapshot file of this version")
	}
	r := &reader{s: blob[len(snapshotMagic):]}
	n := r.uvarint()
	var es []snapshotEntry
	for i := 0; i < n && !r.bad; i++ {
		var e snapshotEntry
		e.name = r.str()
		e.size = r.uvarint()
		copy(e.sum[:], r.bytes(32))
		e.tree = tree{recs: r.str(), edges: r.str(), strs: r.str()}
		es = append(es, e)
	}
	if r.bad || len(r.s) != 0 {
		return nil, fmt.Errorf("snapshot file is truncated or has trailing bytes")
	}
	for i := range es {
		es[i].checked = sync.OnceValue(es[i].tree.check)
	}
	return es, nil
}

// Source is a data file to snapshot: its path in the repository and bytes.
type Source struct {
	Name string
	Data []byte
}

// EncodeSnapshots makes the contents of snapshots.bin from the files. A
// file that does not parse as YAML is an error: fix it first.
func EncodeSnapshots(files []Source) ([]byte, error) {
	out := []byte(snapshotMagic)
	out = binary.AppendUvarint(out, uint64(len(files)))
	for _, f := range files {
		var root yaml.Node
		if err := yaml.Unmarshal(f.Data, &root); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, syntaxError(f.Name, err))
		}
		if root.Kind == 0 {
			return nil, fmt.Errorf("%s: the file is empty; leave it out of snapshots.list", f.Name)
		}
		t, err := flatten(&root, true)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		sum := sha256Sum(f.Data)
		out = appendString(out, f.Name)
		out = binary.AppendUvarint(out, uint64(len(f.Data)))
		out = append(out, sum[:]...)
		out = appendString(out, t.recs)
		out = appendString(out, t.edges)
		out = appendString(out, t.strs)
	}
	return out, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// ListSources reads a snapshots.list: one glob a line, relative to root (the
// repository), "#" starts a comment. Every glob must match a file, so that a
// renamed file is noticed; the files come sorted by name.
func ListSources(root, list string) ([]Source, error) {
	text, err := os.ReadFile(list)
	if err != nil {
		return nil, err
	}
	var names []string
	for i, line := range strings.Split(string(text), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(line)))
		if err != nil || len(m) == 0 {
			return nil, fmt.Errorf("%s:%d: %q matches no file (fix or remove the line)", list, i+1, line)
		}
		for _, f := range m {
			rel, err := filepath.Rel(root, f)
			if err != nil {
				return nil, err
			}
			names = append(names, filepath.ToSlash(rel))
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]Source, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(n)))
		if err != nil {
			return nil, err
		}
		out = append(out, Source{Name: n, Data: b})
	}
	return out, nil
}
