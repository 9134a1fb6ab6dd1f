package scan

import (
	"syscall"
	"unsafe"
)

// releaseFrom is the smallest region whose pages are dropped: below it the
// pages cost less to keep than the system calls that drop them (a 6 MB
// library took 24 madvise calls), and memory stays bounded by it.
const releaseFrom = 128 << 20

// release returns a function that drops the resident pages of a classified
// byte range of b, so scanning a 2 GB doris_be does not keep 2 GB resident.
// It only affects whole pages; for memory that is not a file mapping,
// MADV_DONTNEED would zero it, so it is used on mapped files only (see mapped).
func release(b []byte) func(lo, hi int) {
	if len(b) < releaseFrom || !mapped(b) {
		return nil
	}
	page := syscall.Getpagesize()
	base := uintptr(unsafe.Pointer(&b[0]))
	return func(lo, hi int) {
		start := (base + uintptr(lo) + uintptr(page) - 1) &^ uintptr(page-1)
		end := (base + uintptr(hi)) &^ uintptr(page-1)
		if end <= start {
			return
		}
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, start, end-start, syscall.MADV_DONTNEED)
	}
}

// madvPopulateRead is Linux's MADV_POPULATE_READ (5.14 and later): it maps
// the pages of a range, reading them in as needed, in one call.
const madvPopulateRead = 22

// load returns a function that maps in the pages of a byte range of b
// before it is classified. A page fault maps a few pages of a file at a
// time, and in a virtual machine each costs microseconds; one madvise call
// maps a whole range. It is used on mapped files only (see mapped); where
// the kernel lacks the call, the pages fault in as before.
func load(b []byte) func(lo, hi int) {
	if len(b) == 0 || !mapped(b) {
		return nil
	}
	page := uintptr(syscall.Getpagesize())
	base := uintptr(unsafe.Pointer(&b[0]))
	return func(lo, hi int) {
		start := (base + uintptr(lo)) &^ (page - 1)
		end := base + uintptr(hi)
		if end <= start {
			return
		}
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, start, end-start, madvPopulateRead)
	}
}
