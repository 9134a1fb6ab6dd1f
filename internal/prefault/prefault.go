//go:build linux && (amd64 || arm64)

// Package prefault maps in memory dorisarm is about to touch with one system
// call per range, as the first thing the program does after the Go runtime
// starts: the pages of its own executable that are in the page cache, and
// the next heapBytes of its heap.
//
// A short command touches a few hundred scattered pages of a 21 MB binary and
// a few megabytes of heap. Each first touch is a page fault, and in a virtual
// machine a fault is dear. Measured on the 2-core VM this was written on:
// touching a file's pages in order cost 2 µs a page (a fault maps 16), a
// fresh anonymous page 11 µs, where madvise maps a file's pages for 0.3 µs
// each (MADV_POPULATE_READ) and anonymous pages for 0.8 µs
// (MADV_POPULATE_WRITE). Medians of 41 alternating runs: `dorisarm version`
// 17.6 ms without, 16.3 with the heap alone, 15.6 with both; a scan of
// librocksdb 28.6, 26.6, 24.9 ms. Page faults of `version`: 488, 335, 245.
//
// The package imports nothing, not even syscall, so that it is initialised
// before any package that has imports (packages are initialised in
// import-path order among those whose imports are ready): its system calls
// are made in assembly. It is best effort: on a kernel without these madvise
// calls (before Linux 5.14), or without /proc, nothing happens and pages fault
// in as before. It changes no memory's contents, only when pages are
// mapped: the executable's from the page cache (those not cached are left
// to fault in, so nothing is read from disk), and zero pages of the heap,
// up to heapBytes more than a short command would have touched.
package prefault

import "unsafe"

func sys3(trap, a1, a2, a3 uintptr) (r uintptr)

const (
	madvPopulateRead  = 22
	madvPopulateWrite = 23
	oRDONLY           = 0
	oCLOEXEC          = 0o2000000
)

// heapBytes is how much heap is mapped in: about what a scan of a 6 MB
// library touches. 2 MB gave half the gain on `dorisarm version`.
const heapBytes = 4 << 20

// maps holds /proc/self/maps. A static Go binary has a few dozen mappings;
// a text that does not fit is cut at its last whole line.
var maps [32 << 10]byte

// auxv holds /proc/self/auxv, for the page size.
var auxv [1 << 10]byte

// cached holds mincore's answer for a window of a segment's pages.
var cached [4 << 10]byte

// heapMark is allocated on the heap to find where the heap is.
var heapMark *[64]byte

func init() {
	populate()
}

// populate maps in the executable's pages that are in the page cache and the
// next heapBytes of heap, and returns the heap range it asked for (empty
// when none). Pages of the executable that are not cached are left to fault
// in: reading them all from disk would cost more than the faults.
func populate() (heapStart, heapEnd uintptr) {
	heapMark = new([64]byte)
	page := pageSize(readFile("/proc/self/auxv\x00", auxv[:]))
	ms := parseMaps(readFile("/proc/self/maps\x00", maps[:]))
	for _, s := range selfSegments(ms, codeAddr()) {
		for lo := s[0]; lo < s[1]; {
			hi := min(s[1], lo+uintptr(len(cached))*page)
			vec := cached[:(hi-lo+page-1)/page]
			if int(sys3(sysMincore, lo, hi-lo, uintptr(unsafe.Pointer(&vec[0])))) != 0 {
				break
			}
			for _, r := range runs(vec, lo, page) {
				sys3(sysMadvise, r[0], r[1]-r[0], madvPopulateRead)
			}
			lo = hi
		}
	}
	// The Go runtime hands out its heap from low addresses up: what lies
	// above heapMark is what the program allocates next.
	start, end, ok := heapRange(ms, uintptr(unsafe.Pointer(heapMark)), heapBytes, page)
	if !ok {
		return 0, 0
	}
	sys3(sysMadvise, start, end-start, madvPopulateWrite)
	return start, end
}

// readFile reads the file at path (NUL-terminated) into buf and returns
// what it read; nothing when it cannot be read.
func readFile(path string, buf []byte) []byte {
	cwd := -100 // AT_FDCWD
	fd := int(sys3(sysOpenat, uintptr(cwd), uintptr(unsafe.Pointer(unsafe.StringData(path))), oRDONLY|oCLOEXEC))
	if fd < 0 {
		return nil
	}
	n := 0
	for n < len(buf) {
		r := int(sys3(sysRead, uintptr(fd), uintptr(unsafe.Pointer(&buf[n])), uintptr(len(buf)-n)))
		if r <= 0 {
			break
		}
		n += r
	}
	sys3(sysClose, uintptr(fd), 0, 0)
	return buf[:n]
}

// codeAddr is an address in the executable's code: this package's own.
func codeAddr() uintptr {
	f := readFile
	return **(**uintptr)(unsafe.Pointer(&f))
}
