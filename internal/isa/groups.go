package isa

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// groups.bin holds, for the SVE and SME encoding groups, which feature each
// encoding needs or that it is unallocated. It is generated from llvm-mc-16 by
// internal/isa/gen (see there for how, and how well it agrees). It is kept
// uncompressed (git compresses it; the binary grows by its 4.7 MB) so that
// the tables are used where they lie: loading it copies nothing.
//
//go:embed groups.bin
var groupsData []byte

// groupTable refines a whole encoding group.
type groupTable struct {
	name        string
	mask, value uint32
	keyBits     [][2]int
	// feats maps a class index to a feature id (0: unallocated); classes the
	// file does not name (a corrupt table) are unallocated.
	feats [256]uint8
	table []byte // key → class index; a slice of groupsData
}

func (g *groupTable) lookup(w uint32) uint8 {
	var k uint32
	for _, r := range g.keyBits {
		width := r[0] - r[1] + 1
		k = k<<width | (w>>r[1])&(1<<width-1)
	}
	if int(k) >= len(g.table) {
		return 0
	}
	return g.feats[g.table[k]]
}

// loadGroups parses groups.bin, adding feature names to t as needed. The
// tables stay in data: the groups slice them.
//
// The format: the line "DAGT1", then per group a line
// "name mask value hi:lo,… feature,…" (hex mask and value, the key's bit
// ranges, the feature of each class from 1), a little-endian uint32 n and n
// bytes, the class of each key.
func (t *Table) loadGroups(data []byte) error {
	const magic = "DAGT1\n"
	if !bytes.HasPrefix(data, []byte(magic)) {
		return fmt.Errorf("groups table: bad header %q (want %q; regenerate it with go run ./internal/isa/gen)", data[:min(len(data), len(magic))], magic)
	}
	rest := data[len(magic):]
	for len(rest) > 0 {
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			return fmt.Errorf("groups table: group line without a newline at byte %d", len(data)-len(rest))
		}
		line := string(rest[:nl])
		rest = rest[nl+1:]
		f := strings.Fields(line)
		if len(f) < 4 {
			return fmt.Errorf("groups table: bad group line %q", line)
		}
		g := &groupTable{name: f[0]}
		m, err1 := strconv.ParseUint(f[1], 16, 32)
		v, err2 := strconv.ParseUint(f[2], 16, 32)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("groups table: group %s: mask %q / value %q are not hex words", f[0], f[1], f[2])
		}
		g.mask, g.value = uint32(m), uint32(v)
		for _, r := range strings.Split(f[3], ",") {
			hi, lo, _ := strings.Cut(r, ":")
			h, err1 := strconv.Atoi(hi)
			l, err2 := strconv.Atoi(lo)
			if err1 != nil || err2 != nil || l < 0 || h < l || h > 31 {
				return fmt.Errorf("groups table: group %s: bad key bit range %q", f[0], r)
			}
			g.keyBits = append(g.keyBits, [2]int{h, l})
		}
		if len(f) > 4 {
			names := strings.Split(f[4], ",")
			if len(names) > 255 {
				return fmt.Errorf("groups table: group %s: %d classes, at most 255", f[0], len(names))
			}
			for i, name := range names {
				if _, ok := t.index[name]; !ok && len(t.Features) == 255 {
					return fmt.Errorf("groups table: group %s: too many features", f[0])
				}
				g.feats[i+1] = t.featureID(name)
			}
		}
		if len(rest) < 4 {
			return fmt.Errorf("groups table: group %s: truncated before its table length", f[0])
		}
		n := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return fmt.Errorf("groups table: group %s: table of %d bytes, %d left (truncated?)", f[0], n, len(rest))
		}
		g.table = rest[:n:n]
		rest = rest[n:]
		t.groups = append(t.groups, g)
	}
	return nil
}

func (t *Table) featureID(name string) uint8 {
	if id, ok := t.index[name]; ok {
		return id
	}
	id := uint8(len(t.Features))
	t.index[name] = id
	t.Features = append(t.Features, name)
	return id
}
