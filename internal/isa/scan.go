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
	// Release, when set, is called with each byte range [lo, hi) of Data
	// once it has been classified (a mapped file can drop those pages).
	Release func(lo, hi int)
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
// instructions load are data (literal pools) and are not counted, nor are
// the regions' Skip ranges. Large regions are split across CPUs; each word is
// read once.
func (t *Table) Scan(regions []Code) *Result {
	res := &Result{Counts: make([]uint64, len(t.Features)), Hints: make([]uint64, len(t.Features))}
	type job struct {
		r      *Code
		lo, hi int // word indexes
	}
	var jobs []job
	for i := range regions {
		r := &regions[i]
		n := len(r.Data) / 4
		for lo := 0; lo < n; lo += chunkWords {
			jobs = append(jobs, job{r, lo, min(n, lo+chunkWords)})
		}
	}
	parts := make([]chunkResult, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, j job) {
			defer wg.Done()
			defer func() { <-sem }()
			parts[i] = t.scanChunk(j.r, j.lo, j.hi)
			if j.r.Release != nil {
				j.r.Release(j.lo*4, j.hi*4)
			}
		}(i, j)
	}
	wg.Wait()
	// Literal-pool words found anywhere are data: drop hits on them.
	lit := map[uint64]bool{}
	for _, p := range parts {
		for _, a := range p.lits {
			lit[a] = true
		}
	}
	for _, p := range parts {
		for k := range p.counts {
			res.Counts[k] += p.counts[k]
			res.Hints[k] += p.hints[k]
		}
		res.Words += p.words
		res.Data += p.data
		for _, h := range p.hits {
			if lit[h.Addr] {
				res.Counts[h.Feature]--
				res.Data++
				continue
			}
			res.Hits = append(res.Hits, h)
		}
	}
	var other uint64
	for k := 1; k < len(res.Counts); k++ {
		other += res.Counts[k] + res.Hints[k]
	}
	res.Counts[0] = res.Words - res.Data - other
	sort.Slice(res.Hits, func(a, b int) bool { return res.Hits[a].Addr < res.Hits[b].Addr })
	return res
}

type chunkResult struct {
	counts, hints []uint64
	hits          []Hit
	lits          []uint64
	words, data   uint64
}

func (t *Table) scanChunk(r *Code, lo, hi int) chunkResult {
	p := chunkResult{counts: make([]uint64, len(t.Features)), hints: make([]uint64, len(t.Features)), words: uint64(hi - lo)}
	d := r.Data[lo*4 : hi*4]
	start := r.Addr + uint64(lo)*4
	end := r.Addr + uint64(len(r.Data)/4)*4
	skip := r.Skip
	si := sort.Search(len(skip), func(i int) bool { return skip[i][1] > start })
	byKey, pool := t.byKey, t.pool
	for i := 0; i+4 <= len(d); i += 4 {
		w := binary.LittleEndian.Uint32(d[i : i+4])
		if len(skip) > 0 {
			addr := start + uint64(i)
			for si < len(skip) && skip[si][1] <= addr {
				si++
			}
			if si < len(skip) && skip[si][0] <= addr {
				p.data++
				continue
			}
		}
		if w&0x3b000000 == 0x18000000 {
			p.lits = appendLiteral(p.lits, w, int64(start)+int64(i), r.Addr, end)
		}
		e := byKey[w>>21<<6|w>>10&0x3f]
		if e == 0 {
			continue // base v8.0: counted at the end
		}
		var feat uint8
		var hint, unallocated bool
		for _, rl := range pool[e>>8 : e>>8+e&0xff] {
			if w&rl.mask == rl.value {
				feat, hint = rl.feat, rl.hint
				if rl.group != nil {
					feat = rl.group.lookup(w)
					unallocated = feat == 0
				}
				break
			}
		}
		switch {
		case unallocated:
			p.data++ // not an instruction: a constant or padding
		case feat == 0:
		case hint:
			p.hints[feat]++
		default:
			p.counts[feat]++
			p.hits = append(p.hits, Hit{Addr: start + uint64(i), Feature: feat})
		}
	}
	return p
}

// appendLiteral records the words an LDR (literal) at pc loads, when they lie
// in [lo, hi): constant-pool words inside the code (Go keeps its literal
// pools in .text).
func appendLiteral(out []uint64, w uint32, pc int64, lo, hi uint64) []uint64 {
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
		return out // PRFM (literal) loads nothing
	}
	imm := int64(int32(w<<8) >> 13) // imm19 at bits 23:5, sign-extended
	target := uint64(pc + imm*4)
	if target < lo || target >= hi {
		return out
	}
	for k := 0; k < size; k += 4 {
		out = append(out, target+uint64(k))
	}
	return out
}
