package isa

import (
	"encoding/binary"
	"runtime"
	"sort"
	"sync"
)

// Hit is one instruction that needs a feature.
type Hit struct {
	Addr    uint64
	Feature uint8
	Hint    bool
}

// Code is one executable region to classify.
type Code struct {
	Data []byte // the bytes (little-endian A64 words)
	Addr uint64 // virtual address of Data[0]
	// Skip are [start, end) address ranges that hold data, not code ($d
	// mapping symbols); they are not classified.
	Skip [][2]uint64
}

// Result counts features over regions.
type Result struct {
	Counts []uint64 // per feature id; [0] counts base instructions
	Hints  []uint64 // per feature id, HINT-space encodings
	Hits   []Hit    // every non-base, non-hint instruction, by address
	Words  uint64   // words classified
	Data   uint64   // words skipped as data (mapping symbols, literal pools)
}

// chunkWords is the unit of parallel work (4 MiB of code).
const chunkWords = 1 << 20

// Scan classifies every word of the regions. Words that LDR (literal)
// instructions load are data (literal pools) and are skipped, as are the
// regions' Skip ranges. Large regions are split across CPUs.
func (t *Table) Scan(regions []Code) *Result {
	res := &Result{Counts: make([]uint64, len(t.Features)), Hints: make([]uint64, len(t.Features))}
	type job struct {
		r      *Code
		lo, hi int // word indexes
		lit    map[uint64]bool
	}
	var jobs []job
	for i := range regions {
		r := &regions[i]
		n := len(r.Data) / 4
		lit := literalTargets(r)
		for lo := 0; lo < n; lo += chunkWords {
			jobs = append(jobs, job{r, lo, min(n, lo+chunkWords), lit})
		}
	}
	type part struct {
		counts, hints []uint64
		hits          []Hit
		words, data   uint64
	}
	parts := make([]part, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, j job) {
			defer wg.Done()
			defer func() { <-sem }()
			p := part{counts: make([]uint64, len(t.Features)), hints: make([]uint64, len(t.Features))}
			t.scanChunk(j.r, j.lo, j.hi, j.lit, &p.counts, &p.hints, &p.hits, &p.words, &p.data)
			parts[i] = p
		}(i, j)
	}
	wg.Wait()
	for _, p := range parts {
		for k := range p.counts {
			res.Counts[k] += p.counts[k]
			res.Hints[k] += p.hints[k]
		}
		res.Hits = append(res.Hits, p.hits...)
		res.Words += p.words
		res.Data += p.data
	}
	sort.Slice(res.Hits, func(a, b int) bool { return res.Hits[a].Addr < res.Hits[b].Addr })
	return res
}

func (t *Table) scanChunk(r *Code, lo, hi int, lit map[uint64]bool, counts, hints *[]uint64, hits *[]Hit, words, data *uint64) {
	d := r.Data
	skip := r.Skip
	si := sort.Search(len(skip), func(i int) bool { return skip[i][1] > r.Addr+uint64(lo)*4 })
	c, h := *counts, *hints
	for i := lo; i < hi; i++ {
		addr := r.Addr + uint64(i)*4
		for si < len(skip) && skip[si][1] <= addr {
			si++
		}
		if si < len(skip) && skip[si][0] <= addr {
			*data++
			continue
		}
		w := binary.LittleEndian.Uint32(d[i*4:])
		rules := t.byTop[w>>21]
		if len(rules) == 0 {
			c[0]++
			continue
		}
		if lit != nil && lit[addr] {
			*data++
			continue
		}
		var feat uint8
		var hint bool
		for _, rl := range rules {
			if w&rl.mask == rl.value {
				feat, hint = rl.feat, rl.hint
				break
			}
		}
		switch {
		case feat == 0:
			c[0]++
		case hint:
			h[feat]++
		default:
			c[feat]++
			*hits = append(*hits, Hit{Addr: addr, Feature: feat})
		}
	}
	*words += uint64(hi - lo)
}

// literalTargets returns the addresses LDR (literal) instructions in the
// region load from: constant-pool words inside the code (Go keeps its
// literal pools in .text). nil when there are none.
func literalTargets(r *Code) map[uint64]bool {
	var out map[uint64]bool
	n := len(r.Data) / 4
	end := r.Addr + uint64(n)*4
	for i := 0; i < n; i++ {
		w := binary.LittleEndian.Uint32(r.Data[i*4:])
		if w&0x3b000000 != 0x18000000 {
			continue
		}
		opc, v := w>>30, (w>>26)&1
		size := 0
		switch {
		case v == 0 && (opc == 0 || opc == 2):
			size = 4
		case v == 0 && opc == 1:
			size = 8
		case v == 1 && opc == 0:
			size = 4
		case v == 1 && opc == 1:
			size = 8
		case v == 1 && opc == 2:
			size = 16
		}
		if size == 0 {
			continue // PRFM (literal) loads nothing
		}
		imm := int64(int32(w<<8) >> 13) // imm19 at bits 23:5, sign-extended
		target := uint64(int64(r.Addr) + int64(i)*4 + imm*4)
		if target < r.Addr || target >= end {
			continue
		}
		if out == nil {
			out = map[uint64]bool{}
		}
		for k := 0; k < size; k += 4 {
			out[target+uint64(k)] = true
		}
	}
	return out
}
