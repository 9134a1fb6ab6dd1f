package isa

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// groups.bin.gz holds, for the SVE and SME encoding groups, which feature each
// encoding needs or that it is unallocated. It is generated from llvm-mc-16 by
// internal/isa/gen (see there for how, and how well it agrees).
//
//go:embed groups.bin.gz
var groupsData []byte

// groupTable refines a whole encoding group.
type groupTable struct {
	name        string
	mask, value uint32
	keyBits     [][2]int
	feats       []uint8 // class index → feature id (0: unallocated)
	table       []byte  // key → class index
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

// loadGroups parses groups.bin.gz, adding feature names to t as needed.
func (t *Table) loadGroups(data []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	br := bufio.NewReader(zr)
	if magic, _ := br.ReadString('\n'); magic != "DAGT1\n" {
		return fmt.Errorf("groups table: bad header %q", magic)
	}
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return fmt.Errorf("groups table: bad group line %q", line)
		}
		g := &groupTable{name: f[0], feats: []uint8{0}}
		m, _ := strconv.ParseUint(f[1], 16, 32)
		v, _ := strconv.ParseUint(f[2], 16, 32)
		g.mask, g.value = uint32(m), uint32(v)
		for _, r := range strings.Split(f[3], ",") {
			hi, lo, _ := strings.Cut(r, ":")
			h, _ := strconv.Atoi(hi)
			l, _ := strconv.Atoi(lo)
			g.keyBits = append(g.keyBits, [2]int{h, l})
		}
		if len(f) > 4 {
			for _, name := range strings.Split(f[4], ",") {
				g.feats = append(g.feats, t.featureID(name))
			}
		}
		var n uint32
		if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
			return err
		}
		g.table = make([]byte, n)
		if _, err := io.ReadFull(br, g.table); err != nil {
			return err
		}
		t.groups = append(t.groups, g)
	}
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
