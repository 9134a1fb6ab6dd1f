package isa

import (
	"strings"
	"testing"
	"unsafe"
)

// TestGroupsTable: the embedded groups.bin is sound (every key of every
// group has a table entry naming one of the group's classes), and loading
// it copies nothing: the tables are slices of the embedded bytes.
func TestGroupsTable(t *testing.T) {
	tb := Default()
	if len(tb.groups) != 2 {
		t.Fatalf("%d groups, want sve and sme", len(tb.groups))
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(groupsData)))
	hi := lo + uintptr(len(groupsData))
	for _, g := range tb.groups {
		bits := 0
		for _, r := range g.keyBits {
			bits += r[0] - r[1] + 1
		}
		if len(g.table) != 1<<bits {
			t.Errorf("group %s: %d entries for a %d-bit key", g.name, len(g.table), bits)
		}
		classes := 1
		for classes < len(g.feats) && g.feats[classes] != 0 {
			classes++
		}
		for k, c := range g.table {
			if int(c) >= classes {
				t.Fatalf("group %s: key %#x has class %d; the group names %d", g.name, k, c, classes-1)
			}
		}
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(g.table))); p < lo || p+uintptr(len(g.table)) > hi {
			t.Errorf("group %s: table copied out of the embedded data", g.name)
		}
	}
}

// TestGroupsTableErrors: damaged tables are refused with what is wrong.
func TestGroupsTableErrors(t *testing.T) {
	good := string(groupsData[:200])
	for _, c := range []struct{ data, want string }{
		{"\x1f\x8b\x08", "bad header"},
		{"DAGT1\nsve 1e000000 04000000 31:29", "without a newline"},
		{"DAGT1\nsve 1e000000\n", "bad group line"},
		{"DAGT1\nsve 1e00000g 04000000 31:29 sve\n\x00\x00\x00\x00", "not hex words"},
		{"DAGT1\nsve 1e000000 04000000 31:x sve\n\x00\x00\x00\x00", "bad key bit range"},
		{"DAGT1\nsve 1e000000 04000000 31:29 sve\n\x01", "truncated before its table length"},
		{good, "truncated?"},
	} {
		tb := &Table{Features: []string{""}, index: map[string]uint8{"": 0}}
		err := tb.loadGroups([]byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want an error saying %q", c.data[:min(len(c.data), 40)], err, c.want)
		}
	}
}
