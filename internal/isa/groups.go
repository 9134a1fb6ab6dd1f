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
// internal/isa/gen (see there for how, and how well it agrees). Each group's
// table (key → class) is stored as distinct blocks of BlockKeys keys and an
// index from each run of BlockKeys keys to its block: most of the key space
// is a few repeating patterns, so 4.7 MB of classes take 0.34 MB. The
// blocks are used where they lie in the binary: loading copies nothing.
//
//go:embed groups.bin
var groupsData []byte

// BlockKeys is how many consecutive keys share one index entry of a group
// table.
const BlockKeys = 64

// groupTable refines a whole encoding group.
type groupTable struct {
	name        string
	mask, value uint32
	keyBits     [][2]int
	// feats maps a class index to a feature id (0: unallocated); classes the
	// file does not name (a corrupt table) are unallocated.
	feats [256]uint8
	// index holds, per BlockKeys keys, the little-endian uint16 number of
	// their block in blocks; both are slices of groupsData.
	index, blocks []byte
}

// key packs the key bits of w.
func (g *groupTable) key(w uint32) uint32 {
	var k uint32
	for _, r := range g.keyBits {
		width := r[0] - r[1] + 1
		k = k<<width | (w>>r[1])&(1<<width-1)
	}
	return k
}

// class returns the class of key k; 0 (unallocated) for a key or block
// outside the table (a corrupt one).
func (g *groupTable) class(k uint32) uint8 {
	i := int(k / BlockKeys * 2)
	if i+1 >= len(g.index) {
		return 0
	}
	off := int(binary.LittleEndian.Uint16(g.index[i:]))*BlockKeys + int(k%BlockKeys)
	if off >= len(g.blocks) {
		return 0
	}
	return g.blocks[off]
}

func (g *groupTable) lookup(w uint32) uint8 { return g.feats[g.class(g.key(w))] }

// PackGroup returns the stored form of a group's table, whose entry k is the
// class of key k (len(table) a multiple of BlockKeys): the number of keys
// (uint32), of blocks (uint32), the index and the blocks, little-endian.
// Equal blocks are stored once, in order of first use.
func PackGroup(table []byte) ([]byte, error) {
	if len(table)%BlockKeys != 0 || len(table) == 0 {
		return nil, fmt.Errorf("a group table of %d keys: want a positive multiple of %d", len(table), BlockKeys)
	}
	seen := map[string]uint16{}
	var index, blocks []byte
	for k := 0; k < len(table); k += BlockKeys {
		b := string(table[k : k+BlockKeys])
		n, ok := seen[b]
		if !ok {
			if len(seen) == 1<<16 {
				return nil, fmt.Errorf("a group table with more than %d distinct blocks of %d keys", 1<<16, BlockKeys)
			}
			n = uint16(len(seen))
			seen[b] = n
			blocks = append(blocks, b...)
		}
		index = binary.LittleEndian.AppendUint16(index, n)
	}
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(table)))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(seen)))
	return append(append(out, index...), blocks...), nil
}

// loadGroups parses groups.bin, adding feature names to t as needed. The
// tables stay in data: the groups slice them.
//
// The format: the line "DAGT2", then per group a line
// "name mask value hi:lo,… feature,…" (hex mask and value, the key's bit
// ranges, the feature of each class from 1) and the group's table as
// PackGroup stores it.
func (t *Table) loadGroups(data []byte) error {
	const magic = "DAGT2\n"
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
		keyLen := 0
		for _, r := range strings.Split(f[3], ",") {
			hi, lo, _ := strings.Cut(r, ":")
			h, err1 := strconv.Atoi(hi)
			l, err2 := strconv.Atoi(lo)
			if err1 != nil || err2 != nil || l < 0 || h < l || h > 31 {
				return fmt.Errorf("groups table: group %s: bad key bit range %q", f[0], r)
			}
			g.keyBits = append(g.keyBits, [2]int{h, l})
			keyLen += h - l + 1
		}
		if keyLen > 24 {
			return fmt.Errorf("groups table: group %s: a %d-bit key; at most 24 bits", f[0], keyLen)
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
		if len(rest) < 8 {
			return fmt.Errorf("groups table: group %s: truncated before its table sizes", f[0])
		}
		keys, blocks := binary.LittleEndian.Uint32(rest), binary.LittleEndian.Uint32(rest[4:])
		rest = rest[8:]
		if keys != 1<<keyLen || keys%BlockKeys != 0 {
			return fmt.Errorf("groups table: group %s: %d keys for a %d-bit key (want %d, a multiple of %d)", f[0], keys, keyLen, 1<<keyLen, BlockKeys)
		}
		in, bl := uint64(keys/BlockKeys*2), uint64(blocks)*BlockKeys
		if in+bl > uint64(len(rest)) {
			return fmt.Errorf("groups table: group %s: index and blocks of %d bytes, %d left (truncated?)", f[0], in+bl, len(rest))
		}
		g.index, g.blocks = rest[:in:in], rest[in:in+bl:in+bl]
		rest = rest[in+bl:]
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
