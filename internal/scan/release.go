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

// reader returns a function that reads a byte range of b from the file b
// is mapped from, for the classifier (isa.Code.Read); nil when b is not part
// of a mapped file. It reads into a buffer the classifier reuses rather
// than through the mapping: in a virtual machine the first touch of each of
// a fresh mapping's pages is dear, the copy is not. A short or failed read
// says false, and the classifier reads the mapping.
func reader(b []byte) func(dst []byte, off int) bool {
	fd, at, ok := mappedAt(b)
	if !ok || fd < 0 {
		return nil
	}
	return func(dst []byte, off int) bool {
		n, err := syscall.Pread(fd, dst, at+int64(off))
		return err == nil && n == len(dst)
	}
}
