package isa

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"unsafe"
)

// expand returns a group's whole table, entry k the class of key k.
func (g *groupTable) expand() []byte {
	bits := 0
	for _, r := range g.keyBits {
		bits += r[0] - r[1] + 1
	}
	out := make([]byte, 1<<bits)
	for k := range out {
		out[k] = g.class(uint32(k))
	}
	return out
}

// TestGroupsTable: the embedded groups.bin is sound (every key of every
// group has an entry naming one of the group's classes), and loading it
// copies nothing: the index and blocks are slices of the embedded bytes.
func TestGroupsTable(t *testing.T) {
	tb := Default()
	if len(tb.groups) != 2 {
		t.Fatalf("%d groups, want sve and sme", len(tb.groups))
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(groupsData)))
	hi := lo + uintptr(len(groupsData))
	for _, g := range tb.groups {
		classes := 1
		for classes < len(g.feats) && g.feats[classes] != 0 {
			classes++
		}
		for i := 0; i+1 < len(g.index); i += 2 {
			if b := int(binary.LittleEndian.Uint16(g.index[i:])); (b+1)*BlockKeys > len(g.blocks) {
				t.Fatalf("group %s: keys from %#x use block %d of %d", g.name, i/2*BlockKeys, b, len(g.blocks)/BlockKeys)
			}
		}
		for k, c := range g.expand() {
			if int(c) >= classes {
				t.Fatalf("group %s: key %#x has class %d; the group names %d", g.name, k, c, classes-1)
			}
		}
		for _, s := range [][]byte{g.index, g.blocks} {
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(s))); p < lo || p+uintptr(len(s)) > hi {
				t.Errorf("group %s: table copied out of the embedded data", g.name)
			}
		}
	}
}

// groupsDigest is the sha256 of each group's line and whole table (one byte
// per key) in the groups.bin that internal/isa/gen wrote,
// before tables were stored as blocks. The blocks must give the same
// classes; a regenerated table changes it (update it with the new value).
const groupsDigest = "f5e7a642dfd6f38ecab7fc4c6593b7db88b85a17e1f4b88c13464119c1e45658"

// TestGroupsSameClasses: every key of the stored tables has the class the
// generator gave it.
func TestGroupsSameClasses(t *testing.T) {
	h := sha256.New()
	rest := groupsData[len("DAGT2\n"):]
	for _, g := range Default().groups {
		nl := bytes.IndexByte(rest, '\n')
		h.Write(rest[:nl+1])
		rest = rest[nl+1+8+len(g.index)+len(g.blocks):]
		h.Write(g.expand())
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != groupsDigest {
		t.Errorf("the group tables' classes have digest %s, want %s: the stored tables no longer say what the generator found", got, groupsDigest)
	}
}

// TestPackGroup: a packed table gives back every key's class, for tables of
// repeating blocks, random ones and the extremes; lookups outside the table
// are unallocated.
func TestPackGroup(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, c := range []struct {
		name string
		keys int
		gen  func(k int) byte
	}{
		{"zeros", 1 << 10, func(int) byte { return 0 }},
		{"one block", BlockKeys, func(k int) byte { return byte(k) }},
		{"repeating", 1 << 14, func(k int) byte { return byte(k%BlockKeys) ^ byte(k/BlockKeys%3) }},
		{"random", 1 << 12, func(int) byte { return byte(rng.Intn(4)) }},
	} {
		table := make([]byte, c.keys)
		for k := range table {
			table[k] = c.gen(k)
		}
		p, err := PackGroup(table)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		bits := 0
		for 1<<bits < c.keys {
			bits++
		}
		file := fmt.Sprintf("DAGT2\nx 0 0 %d:0 a,b,c\n", bits-1)
		tb := &Table{Features: []string{""}, index: map[string]uint8{"": 0}}
		if err := tb.loadGroups(append([]byte(file), p...)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		g := tb.groups[0]
		if got := g.expand(); !bytes.Equal(got, table) {
			t.Errorf("%s: the packed table gives other classes back", c.name)
		}
		if g.class(uint32(c.keys)) != 0 || g.class(1<<31) != 0 {
			t.Errorf("%s: a key past the table is not unallocated", c.name)
		}
	}
	for _, n := range []int{0, BlockKeys + 1} {
		if _, err := PackGroup(make([]byte, n)); err == nil {
			t.Errorf("%d keys: packed; want an error", n)
		}
	}
	// One block more than a uint16 index can name.
	many := make([]byte, (1<<16+1)*BlockKeys)
	for b := 0; b <= 1<<16; b++ {
		many[b*BlockKeys], many[b*BlockKeys+1], many[b*BlockKeys+2] = byte(b), byte(b>>8), byte(b>>16)
	}
	if _, err := PackGroup(many); err == nil || !strings.Contains(err.Error(), "distinct blocks") {
		t.Errorf("%d distinct blocks: %v; want an error saying so", 1<<16+1, err)
	}
	if _, err := PackGroup(many[:(1<<16)*BlockKeys]); err != nil {
		t.Errorf("%d distinct blocks: %v; want them packed", 1<<16, err)
	}
}

// TestGroupsTableErrors: damaged tables are refused with what is wrong, and
// a block number past the blocks reads as unallocated, not out of bounds.
func TestGroupsTableErrors(t *testing.T) {
	good := string(groupsData[:200])
	for _, c := range []struct{ data, want string }{
		{"\x1f\x8b\x08", "bad header"},
		{"DAGT1\nsve 1e000000 04000000 31:29 sve\n\x08\x00\x00\x00", "bad header"},
		{"DAGT2\nsve 1e000000 04000000 31:29", "without a newline"},
		{"DAGT2\nsve 1e000000\n", "bad group line"},
		{"DAGT2\nsve 1e00000g 04000000 31:29 sve\n", "not hex words"},
		{"DAGT2\nsve 1e000000 04000000 31:x sve\n", "bad key bit range"},
		{"DAGT2\nsve 1e000000 04000000 31:0 sve\n", "at most 24 bits"},
		{"DAGT2\nsve 1e000000 04000000 31:29 sve\n\x01", "truncated before its table sizes"},
		{"DAGT2\nsve 1e000000 04000000 31:29 sve\n\x40\x00\x00\x00\x01\x00\x00\x00", "64 keys for a 3-bit key"},
		{"DAGT2\nsve 1e000000 04000000 31:26 sve\n\x40\x00\x00\x00\x01\x00\x00\x00\x00\x00", "truncated?"},
		{good, "truncated?"},
	} {
		tb := &Table{Features: []string{""}, index: map[string]uint8{"": 0}}
		err := tb.loadGroups([]byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want an error saying %q", c.data[:min(len(c.data), 40)], err, c.want)
		}
	}
	// An index naming block 5 of 1: loads (the sizes agree), reads as 0.
	data := "DAGT2\nsve 1e000000 04000000 31:26 sve\n\x40\x00\x00\x00\x01\x00\x00\x00\x05\x00" + strings.Repeat("\x01", BlockKeys)
	tb := &Table{Features: []string{""}, index: map[string]uint8{"": 0}}
	if err := tb.loadGroups([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if c := tb.groups[0].class(3); c != 0 {
		t.Errorf("a key of a block past the blocks has class %d, want 0 (unallocated)", c)
	}
}
