package scan

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// spoolAt is the member size above which content goes to a temporary file
// (mapped, so the kernel pages it) instead of the heap.
const spoolAt = 16 << 20

// slurp reads one member (a tar or zip entry, a decompressed stream) for
// analysis. Small members stay in memory; larger ones are spooled to an
// unlinked temporary file and mapped. A member larger than --max-member is
// not read past the limit: ok is false and the finding says why.
func (w *walker) slurp(r io.Reader, name string) (data []byte, unmap func(), ok bool) {
	return w.slurpSized(r, name, -1)
}

// slurpSized is slurp for a member whose size is declared (-1: unknown).
func (w *walker) slurpSized(r io.Reader, name string, size int64) (data []byte, unmap func(), ok bool) {
	tooBig := func() {
		w.add(unreadable(name, fmt.Sprintf("member larger than --max-member (%d bytes); not scanned (raise --max-member if it is real)", w.opts.MaxMember)))
	}
	limit := min(spoolAt, w.opts.MaxMember) + 1
	var b []byte
	var err error
	if size >= 0 && size < limit {
		b = make([]byte, size) // exactly what is declared; the reader reports a short member
		var n int
		n, err = io.ReadFull(r, b)
		b = b[:n]
	} else {
		b, err = io.ReadAll(io.LimitReader(r, limit))
	}
	if err != nil {
		w.add(unreadable(name, "corrupt or truncated member: "+err.Error()))
		return nil, nil, false
	}
	if int64(len(b)) > w.opts.MaxMember {
		tooBig()
		return nil, nil, false
	}
	if len(b) <= spoolAt {
		return b, func() {}, true
	}
	f, err := os.CreateTemp("", "dorisarm-scan-*")
	if err != nil {
		w.add(unreadable(name, "cannot spool a large member: "+err.Error()))
		return nil, nil, false
	}
	os.Remove(f.Name()) // gone when the mapping and descriptor are
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		w.add(unreadable(name, "cannot spool a large member: "+err.Error()))
		return nil, nil, false
	}
	n, err := io.Copy(f, io.LimitReader(r, w.opts.MaxMember+1-int64(len(b))))
	total := n + int64(len(b))
	if err != nil {
		w.add(unreadable(name, "corrupt or truncated member: "+err.Error()))
		return nil, nil, false
	}
	if total > w.opts.MaxMember {
		tooBig()
		return nil, nil, false
	}
	data, unmap, err = mapFile(f)
	if err != nil {
		w.add(unreadable(name, "cannot map a spooled member: "+err.Error()))
		return nil, nil, false
	}
	return data, unmap, true
}

// owned scans content the caller hands over: unmap is called once nothing
// points into data any more.
func (w *walker) owned(data []byte, unmap func(), name string, depth int, jar *jarInfo) {
	keep := &sync.WaitGroup{}
	w.memory(data, name, depth, jar, keep)
	go func() { keep.Wait(); unmap() }()
}
