package isa

import (
	"cmp"
	"encoding/binary"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
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
	// mapping symbols); the words that start in them are not classified.
	// Any order; overlaps are allowed.
	Skip [][2]uint64
	// Read, when set, fills dst with the bytes of Data from off on, and
	// says whether it did; when it did not, Data is read. A mapped file
	// reads them from the file into a buffer the worker reuses (readBytes
	// at a time): in a virtual machine, first touches of a fresh mapping's
	// pages cost more than the copy (111 MB read once: 62 ms through the
	// mapping, 18 ms by pread into one buffer, on this project's VM).
	Read func(dst []byte, off int) bool
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

// chunkBytes is the unit of parallel work: small enough that the CPUs finish
// together (a 6 MB library is 24 chunks), large enough that handing chunks
// out costs nothing. Chunks end at addresses that are multiples of it, so
// in a mapped ELF file (offsets agree with addresses modulo the page size)
// they end on page boundaries and Release can drop every page.
const chunkBytes = 256 << 10

// readBytes is how much of a region with a Read function is read at a time.
const readBytes = 64 << 10

// Scan classifies every word of the regions. Words that LDR (literal)
// instructions load are data (literal pools) and are not counted, nor are
// the regions' Skip ranges. Large regions are split across CPUs; each word is
// read once. A panic in a worker, such as a fault reading a mapped file that
// shrank, is raised again in the caller's goroutine once every worker has
// stopped.
func (t *Table) Scan(regions []Code) *Result {
	nf := len(t.Features)
	res := &Result{Counts: make([]uint64, nf), Hints: make([]uint64, nf)}
	jobs := planJobs(regions)
	// lits[i] has a bit per word of regions[i], set when an LDR (literal)
	// of the region loads the word; only the words literals land on are
	// written.
	lits := make([][]uint32, len(regions))
	for i, r := range regions {
		res.Words += uint64(len(r.Data) / 4)
		lits[i] = make([]uint32, (len(r.Data)/4+31)/32)
	}
	parts := make([]part, len(jobs))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(jobs)))
	tallies := make([]tally, workers)
	var next atomic.Int64
	work := func(c *tally) {
		c.counts, c.hints = make([]uint64, nf), make([]uint64, nf)
		var buf []byte
		for {
			k := int(next.Add(1) - 1)
			if k >= len(jobs) {
				return
			}
			j := jobs[k]
			r := &regions[j.region]
			parts[k].region = j.region
			if r.Read == nil {
				t.scanWords(r, r.Data[j.lo*4:j.hi*4], j.skip, j.lo, j.hi, c, &parts[k], lits[j.region])
			} else {
				// In pieces, so that the buffer is a few pages: fresh
				// pages are what Read is there to avoid.
				if buf == nil {
					buf = make([]byte, readBytes)
				}
				for lo := j.lo; lo < j.hi; lo += readBytes / 4 {
					hi := min(j.hi, lo+readBytes/4)
					d := buf[:(hi-lo)*4]
					if !r.Read(d, lo*4) {
						d = r.Data[lo*4 : hi*4]
					}
					t.scanWords(r, d, j.skip, lo, hi, c, &parts[k], lits[j.region])
				}
			}
			if r.Release != nil {
				r.Release(j.lo*4, j.hi*4)
			}
		}
	}
	// A panic in any worker (a fault reading a mapped file that shrank
	// under us, with debug.SetPanicOnFault) stops the others and is raised
	// again in the caller's goroutine once they are done, where the caller
	// can recover it; no worker is left reading.
	var (
		failOnce sync.Once
		failed   any
	)
	run := func(c *tally) {
		defer func() {
			if r := recover(); r != nil {
				failOnce.Do(func() { failed = r })
				next.Store(int64(len(jobs)))
			}
		}()
		work(c)
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			debug.SetPanicOnFault(true)
			run(&tallies[w])
		}()
	}
	run(&tallies[0])
	wg.Wait()
	if failed != nil {
		panic(failed)
	}

	for _, c := range tallies {
		for k := range c.counts {
			res.Counts[k] += c.counts[k]
			res.Hints[k] += c.hints[k]
		}
		res.Data += c.data
	}
	res.Hits = dropLiterals(res, regions, parts, lits)
	var other uint64
	for k := 1; k < len(res.Counts); k++ {
		other += res.Counts[k] + res.Hints[k]
	}
	res.Counts[0] = res.Words - res.Data - other
	return res
}

// job is a run of words [lo, hi) of one region.
type job struct {
	region int
	skip   [][2]uint64 // the region's, normalised
	lo, hi int
}

// planJobs splits the regions into jobs that end at addresses that are
// multiples of chunkBytes, in order.
func planJobs(regions []Code) []job {
	var jobs []job
	for i, r := range regions {
		n := len(r.Data) / 4
		skip := normalSkip(r.Skip)
		for lo := 0; lo < n; {
			a := r.Addr + uint64(lo)*4
			next := (a/chunkBytes + 1) * chunkBytes // wraps to 0 at the top of the address space, as a does
			hi := lo + int(min((next-a+3)/4, uint64(n-lo)))
			jobs = append(jobs, job{i, skip, lo, hi})
			lo = hi
		}
	}
	return jobs
}

// dropLiterals returns the parts' hits in address order without those on
// literal-pool words, which it counts as data. A literal starts in the region
// of its LDR; when regions overlap, or a load runs past its region's end,
// the word is data in every region at that address.
func dropLiterals(res *Result, regions []Code, parts []part, lits [][]uint32) []Hit {
	var spilled map[uint64]bool
	nhits := 0
	for _, p := range parts {
		nhits += len(p.hits)
		for _, a := range p.spill {
			if spilled == nil {
				spilled = map[uint64]bool{}
			}
			spilled[a] = true
		}
	}
	if nhits == 0 {
		return nil
	}
	overlaps := overlapping(regions)
	isLit := func(r int, a uint64) bool {
		if spilled[a] {
			return true
		}
		for _, o := range overlaps[r] {
			if rel := a - regions[o].Addr; a >= regions[o].Addr && rel%4 == 0 && rel/4 < uint64(len(regions[o].Data)/4) &&
				lits[o][rel/128]>>(rel/4%32)&1 != 0 {
				return true
			}
		}
		return false
	}
	hits := make([]Hit, 0, nhits)
	for _, p := range parts {
		for _, h := range p.hits {
			if isLit(p.region, h.Addr) {
				res.Counts[h.Feature]--
				res.Data++
				continue
			}
			hits = append(hits, h)
		}
	}
	if len(hits) == 0 {
		return nil
	}
	// Jobs run in address order within a region: the hits are sorted unless
	// the regions are not.
	byAddr := func(a, b Hit) int { return cmp.Compare(a.Addr, b.Addr) }
	if !slices.IsSortedFunc(hits, byAddr) {
		slices.SortStableFunc(hits, byAddr)
	}
	return hits
}

// part is what one job found besides counts: its hits in address order.
type part struct {
	region int
	hits   []Hit
	spill  []uint64 // literal words past the end of the region
}

// overlapping returns, for each region, the regions whose address ranges
// overlap it, itself first.
func overlapping(regions []Code) [][]int {
	out := make([][]int, len(regions))
	own := make([]int, len(regions))
	type span struct {
		lo, hi uint64
		i      int
	}
	spans := make([]span, len(regions))
	for i, r := range regions {
		own[i] = i
		out[i] = own[i : i+1 : i+1]
		spans[i] = span{r.Addr, r.Addr + uint64(len(r.Data)/4)*4, i}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	for k, a := range spans {
		for _, b := range spans[k+1:] {
			if b.lo >= a.hi {
				break
			}
			if b.lo < b.hi && a.lo < a.hi {
				out[a.i] = append(out[a.i], b.i)
				out[b.i] = append(out[b.i], a.i)
			}
		}
	}
	return out
}

// tally is one worker's counts.
type tally struct {
	counts, hints []uint64
	data          uint64
}

// normalSkip returns skip sorted by start, without empty ranges and with
// overlapping ones merged; skip itself when it already is.
func normalSkip(skip [][2]uint64) [][2]uint64 {
	ok := true
	for i, s := range skip {
		if s[0] >= s[1] || i > 0 && s[0] < skip[i-1][1] {
			ok = false
			break
		}
	}
	if ok {
		return skip
	}
	out := make([][2]uint64, 0, len(skip))
	for _, s := range skip {
		if s[0] < s[1] {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && s[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], s[1])
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// wordAt returns the index of the first word of r that starts at or after
// addr, at most n.
func wordAt(base, addr uint64, n int) int {
	if addr <= base {
		return 0
	}
	return int(min((addr-base+3)/4, uint64(n)))
}

// scanWords classifies words [lo, hi) of r, whose bytes d holds, leaving out
// those in skip (normalised).
func (t *Table) scanWords(r *Code, d []byte, skip [][2]uint64, lo, hi int, c *tally, p *part, lits []uint32) {
	n := len(r.Data) / 4
	end := r.Addr + uint64(n)*4
	start := r.Addr + uint64(lo)*4
	// Word indexes are worked out from the job's own start: a job never
	// crosses 2^64 (planJobs), a region may.
	at := func(addr uint64) int { return lo + wordAt(start, addr, hi-lo) }
	si := sort.Search(len(skip), func(i int) bool { return skip[i][1] > start })
	for i := lo; i < hi; {
		stop := hi
		if si < len(skip) {
			stop = max(i, min(hi, at(skip[si][0])))
		}
		t.scanRun(d[(i-lo)*4:(stop-lo)*4], r.Addr+uint64(i)*4, r.Addr, end, c, p, lits)
		if stop >= hi {
			return
		}
		// Words from stop start inside skip[si].
		e := max(stop, min(hi, at(skip[si][1])))
		c.data += uint64(e - stop)
		i = e
		si++
	}
}

// scanRun classifies the words of d, the first at addr; lo and hi bound the
// region (literal loads outside it are not followed).
func (t *Table) scanRun(d []byte, addr, lo, hi uint64, c *tally, p *part, lits []uint32) {
	mark := &t.mark
	for i := 0; i+4 <= len(d); i += 4 {
		w := binary.LittleEndian.Uint32(d[i : i+4])
		if mark[w>>21<<1|w>>4&1]>>(w>>10&0x3f)&1 == 0 {
			continue // base v8.0: counted at the end
		}
		t.closer(w, addr+uint64(i), lo, hi, c, p, lits)
	}
}

// closer classifies a word the marks could not settle.
func (t *Table) closer(w uint32, pc, lo, hi uint64, c *tally, p *part, lits []uint32) {
	if isLiteralLoad(w) {
		p.spill = markLiteral(lits, p.spill, w, pc, lo, hi)
	}
	var feat uint8
	var hint, unallocated bool
	for _, rl := range t.candidates(w) {
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
		c.data++ // not an instruction: a constant or padding
	case feat == 0:
	case hint:
		c.hints[feat]++
	default:
		c.counts[feat]++
		p.hits = append(p.hits, Hit{Addr: pc, Feature: feat})
	}
}

// markLiteral sets the bits of lits (one per word of the region [lo, hi))
// for the words an LDR (literal) at pc loads, when the first lies in the
// region: constant-pool words inside the code (Go keeps its literal pools in
// .text). Words of the load past the region's end are appended to spill.
// Workers share lits.
func markLiteral(lits []uint32, spill []uint64, w uint32, pc, lo, hi uint64) []uint64 {
	opc, v := w>>30, (w>>26)&1
	size := uint64(0)
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
		return spill // PRFM (literal) loads nothing
	}
	imm := int64(int32(w<<8) >> 13) // imm19 at bits 23:5, sign-extended
	target := uint64(int64(pc) + imm*4)
	if target < lo || target >= hi {
		return spill
	}
	for k := uint64(0); k < size; k += 4 {
		a := target + k
		if a < lo || a >= hi { // past the end (or wrapped)
			spill = append(spill, a)
			continue
		}
		i := (a - lo) / 4
		atomic.OrUint32(&lits[i/32], 1<<(i%32))
	}
	return spill
}
