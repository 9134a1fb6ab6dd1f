package datafile

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const repoRoot = "../.."

// TestSnapshotsFresh fails when snapshots.bin is not what the files in
// snapshots.list make today (a stale snapshot is never used, but then it
// spares nothing).
func TestSnapshotsFresh(t *testing.T) {
	files, err := ListSources(repoRoot, "snapshots.list")
	if err != nil {
		t.Fatal(err)
	}
	want, err := EncodeSnapshots(files)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) == snapshotBlob {
		return
	}
	have, _ := parseSnapshots(snapshotBlob)
	byName := map[string]snapshotEntry{}
	for _, e := range have {
		byName[e.name] = e
	}
	var stale []string
	for _, f := range files {
		e, ok := byName[f.Name]
		if !ok || e.size != len(f.Data) || !bytes.Equal(e.sum[:], sum(f.Data)) {
			stale = append(stale, f.Name)
		}
		delete(byName, f.Name)
	}
	for n := range byName {
		stale = append(stale, n+" (no longer listed)")
	}
	t.Errorf("internal/datafile/snapshots.bin is out of date (%s): run `go generate ./internal/datafile` and commit snapshots.bin", strings.Join(stale, ", "))
}

func sum(b []byte) []byte {
	s := sha256Sum(b)
	return s[:]
}

// TestSnapshotTreesMatchParse: each snapshot rebuilds the tree yaml.v3
// parses from its file, in everything the decoder reads.
func TestSnapshotTreesMatchParse(t *testing.T) {
	files, err := ListSources(repoRoot, "snapshots.list")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("snapshots.list names %d files", len(files))
	}
	for _, f := range files {
		got, ok := snapshotTree(f.Data)
		if !ok {
			t.Errorf("%s: no snapshot for its bytes (see TestSnapshotsFresh)", f.Name)
			continue
		}
		var want yaml.Node
		if err := yaml.Unmarshal(f.Data, &want); err != nil {
			t.Fatal(err)
		}
		n := compareTrees(t, f.Name, got, 0, &want, map[node]*yaml.Node{})
		if n < 3 {
			t.Errorf("%s: only %d nodes compared", f.Name, n)
		}
	}
}

// compareTrees compares got's node g with want and returns how many nodes
// it saw; seen maps got's nodes to want's, so aliases must point at the
// same place.
func compareTrees(t *testing.T, file string, got *tree, g node, want *yaml.Node, seen map[node]*yaml.Node) int {
	t.Helper()
	seen[g] = want
	if got.kind(g) != want.Kind || got.tag(g) != want.Tag || got.value(g) != want.Value || got.line(g) != want.Line || got.col(g) != want.Column {
		t.Errorf("%s:%d:%d: snapshot node {%v %s %q %d:%d}, parsed {%v %s %q %d:%d}", file, want.Line, want.Column,
			got.kind(g), got.tag(g), got.value(g), got.line(g), got.col(g), want.Kind, want.Tag, want.Value, want.Line, want.Column)
		return 1
	}
	if want.Kind == yaml.AliasNode {
		if seen[got.alias(g)] != want.Alias {
			t.Errorf("%s:%d:%d: the alias points elsewhere", file, want.Line, want.Column)
		}
		return 1
	}
	if got.len(g) != len(want.Content) {
		t.Errorf("%s:%d:%d: %d children in the snapshot, %d parsed", file, want.Line, want.Column, got.len(g), len(want.Content))
		return 1
	}
	n := 1
	for i := range want.Content {
		n += compareTrees(t, file, got, got.child(g, i), want.Content[i], seen)
	}
	return n
}

// A changed file is parsed, never served from the snapshot of its old bytes.
func TestSnapshotOnlyForItsBytes(t *testing.T) {
	data, err := os.ReadFile(repoRoot + "/matrix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snapshotTree(data); !ok {
		t.Fatal("matrix.yaml has no snapshot (see TestSnapshotsFresh)")
	}
	for name, edit := range map[string][]byte{
		"one byte changed": bytes.Replace(data, []byte("schema: 1"), []byte("schema: 2"), 1),
		"same size":        append(bytes.Clone(data[:len(data)-1]), ' '),
		"longer":           append(bytes.Clone(data), "\n# more\n"...),
		"shorter":          data[:len(data)-1],
	} {
		if bytes.Equal(edit, data) {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if _, ok := snapshotTree(edit); ok {
			t.Errorf("%s: a snapshot was used for bytes it was not made from", name)
		}
	}
}

// A damaged blob is refused, not decoded into a wrong tree.
func TestSnapshotBlobDamage(t *testing.T) {
	es, err := parseSnapshots(snapshotBlob)
	if err != nil || len(es) == 0 {
		t.Fatalf("the embedded blob: %v (%d entries)", err, len(es))
	}
	for _, cut := range []int{1, 10, len(snapshotBlob) / 2, len(snapshotBlob) - 1} {
		if _, err := parseSnapshots(snapshotBlob[:cut]); err == nil {
			t.Errorf("a blob cut at %d bytes was accepted", cut)
		}
	}
	if _, err := parseSnapshots(strings.Replace(snapshotBlob, snapshotMagic, "dorisarm datafile snapshot 0\n", 1)); err == nil {
		t.Error("another format version was accepted")
	}
	damaged := func(what string, edit func(*tree)) {
		tr := es[0].tree
		edit(&tr)
		if err := tr.check(); err == nil {
			t.Errorf("a tree with %s passed the check", what)
		}
	}
	damaged("a record cut short", func(tr *tree) { tr.recs = tr.recs[:len(tr.recs)-1] })
	damaged("a child list cut short", func(tr *tree) { tr.edges = tr.edges[:len(tr.edges)-4] })
	damaged("its strings cut short", func(tr *tree) { tr.strs = tr.strs[:len(tr.strs)/2] })
	damaged("a child pointing back", func(tr *tree) { tr.edges = "\x00\x00\x00\x00" + tr.edges[4:] })
	if err := es[0].tree.check(); err != nil {
		t.Errorf("the embedded tree: %v", err)
	}
}

// FuzzSnapshotSameAsParse: for any YAML, decoding its snapshot gives the
// value and errors decoding the parsed file gives.
func FuzzSnapshotSameAsParse(f *testing.F) {
	for _, s := range []string{"items:\n  a:\n    name: x\n    count: 3\n", "list: [{name: y, tags: [a]}]", "&a [*a]",
		"items: {a: &x {env: {x: y}}, b: *x}", "items:\n  a: {nmae: 1, count: two}\n", "list:\n  - name: [1]\n", "items: !!map {a: {on: yes}}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		blob, err := EncodeSnapshots([]Source{{Name: "fuzz.yaml", Data: data}})
		if err != nil {
			return // no snapshot of a file that does not parse
		}
		es, err := parseSnapshots(string(blob))
		if err != nil || len(es) != 1 {
			t.Fatalf("reading back the snapshot: %v", err)
		}
		if err := es[0].tree.check(); err != nil {
			t.Fatalf("the snapshot's tree: %v", err)
		}
		var a, b outer
		errA := Decode("fuzz.yaml", data, &a)
		errB := decodeTree("fuzz.yaml", &es[0].tree, reflect.ValueOf(&b))
		if fmt.Sprint(errA) != fmt.Sprint(errB) || !reflect.DeepEqual(a, b) {
			t.Errorf("parsed: %+v, %v\nsnapshot: %+v, %v", a, errA, b, errB)
		}
	})
}
