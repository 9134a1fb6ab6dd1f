//go:build linux && (amd64 || arm64)

// Package prefault maps in memory dorisarm is about to touch with one system
// call per range, as the first thing the program does after the Go runtime
// starts: the readable segments of its own executable, and the first
// heapBytes of its heap.
//
// A short command touches a few hundred scattered pages of a 25 MB binary and
// a few megabytes of heap. Each first touch is a page fault, and in a virtual
// machine a fault is dear. Measured on the 2-core VM this was written on:
// touching a file's pages in order cost 2 µs a page (a fault maps 16), a
// fresh anonymous page 11 µs, where madvise maps a file's pages for 0.4 µs
// each (MADV_POPULATE_READ) and anonymous pages for 0.8 µs
// (MADV_POPULATE_WRITE). A `dorisarm version` went from 16.2 to 13.8 ms
// (median of 41 alternating runs), and its page faults from 490 to about 200.
//
// The package imports nothing, not even syscall, so that it is initialised
// before any package that has imports (packages are initialised in
// import-path order among those whose imports are ready): its system calls
// are made in assembly. It is best effort: on a kernel without these madvise
// calls (before Linux 5.14), or without /proc, nothing happens and pages fault
// in as before. What it maps is only what a page fault would have mapped.
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

// heapMark is allocated on the heap to find where the heap is.
var heapMark *[64]byte

func init() {
	populate()
}

// populate maps in the executable and the next heapBytes of heap, and
// returns the heap range it asked for (empty when none).
func populate() (heapStart, heapEnd uintptr) {
	heapMark = new([64]byte)
	ms := parseMaps(readMaps())
	for _, s := range selfSegments(ms, codeAddr()) {
		sys3(sysMadvise, s[0], s[1]-s[0], madvPopulateRead)
	}
	// The Go runtime hands out its heap from low addresses up: what lies
	// above heapMark is what the program allocates next.
	start, end, ok := heapRange(ms, uintptr(unsafe.Pointer(heapMark)), heapBytes, 4096)
	if !ok {
		return 0, 0
	}
	sys3(sysMadvise, start, end-start, madvPopulateWrite)
	return start, end
}

// readMaps returns the text of /proc/self/maps, or what of it fits in maps;
// nothing when it cannot be read.
func readMaps() []byte {
	path := "/proc/self/maps\x00"
	cwd := -100 // AT_FDCWD
	fd := int(sys3(sysOpenat, uintptr(cwd), uintptr(unsafe.Pointer(unsafe.StringData(path))), oRDONLY|oCLOEXEC))
	if fd < 0 {
		return nil
	}
	n := 0
	for n < len(maps) {
		r := int(sys3(sysRead, uintptr(fd), uintptr(unsafe.Pointer(&maps[n])), uintptr(len(maps)-n)))
		if r <= 0 {
			break
		}
		n += r
	}
	sys3(sysClose, uintptr(fd), 0, 0)
	return maps[:n]
}

// codeAddr is an address in the executable's code: this package's own.
func codeAddr() uintptr {
	f := readMaps
	return **(**uintptr)(unsafe.Pointer(&f))
}
