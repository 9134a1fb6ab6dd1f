package scan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
)

// zipBehind reads r, an archive member that its first bytes do not
// identify, to its end, and scans a zip found at the end: an executable jar
// (a launch script, then the jar, which java -jar runs) or a
// self-extracting archive, which the JVM and unzip open whatever is before
// them. On disk such files are found by file (zipAtEnd); inside a tar, a
// compressed stream or a zip they passed unread, so an x86 library in a
// Spring Boot executable jar in an image layer was never looked at.
//
// A member of up to spoolAt bytes is held in *hold while it is read (the
// buffer is reused for the next member); of a longer one only the last 65
// KiB is kept, and a zip that ends there is an unreadable finding. A read
// error is left to the caller, whose next read of the archive reports it.
func (w *walker) zipBehind(r io.Reader, name string, depth int, hold *[]byte) {
	switch t := readBehind(r, hold); {
	case t.whole && zipAtEnd(bytes.NewReader(t.b), int64(len(t.b))):
		w.zipIn(t.b, name, depth)
	case !t.whole && t.zip:
		w.tooLong(name, t.size)
	}
}

// afterEnd reads what follows the end of a tar or of a legacy lzma stream,
// which their readers stop before: a zip there (a jar appended to the tar,
// which unzip and Java open) is scanned, and so is other content that is
// not zeros (a second tar, which tar -i reads, a program). It returns the
// size of what follows when that is longer than spoolAt and ends with a
// zip, for the caller to read where it lies or report.
func (w *walker) afterEnd(r io.Reader, name string, depth int, hold *[]byte) (long int64) {
	t := readBehind(r, hold)
	name += "(trailing)"
	switch {
	case t.err:
		return 0 // the caller's next read reports it
	case !t.whole && t.zip:
		return t.size
	case !t.whole && t.nonZero:
		w.add(unreadable(name, fmt.Sprintf("%d bytes after the end, not zeros and more than dorisarm holds while reading (%d); not looked at (remove them, or unpack the archive and scan the files)", t.size, spoolAt)))
		return 0
	case !t.whole:
		return 0
	case zipAtEnd(bytes.NewReader(t.b), int64(len(t.b))):
		w.zipIn(t.b, name, depth)
		return 0
	}
	// Record padding and end blocks are zeros.
	i := 0
	for i < len(t.b) && t.b[i] == 0 {
		i++
	}
	if rest := t.b[i:]; len(rest) > 0 {
		w.mu.Lock()
		w.rep.Summary.Files++
		w.mu.Unlock()
		if sniff(rest) == kOther {
			w.add(unreadable(name, fmt.Sprintf("%d bytes after the end that are neither zeros nor content dorisarm knows; not looked at (remove them, or unpack the archive and scan the files)", len(rest))))
			return 0
		}
		w.memory(bytes.Clone(rest), name, depth, nil)
	}
	return 0
}

// behind is what readBehind read: all of it in b (whole), or of a longer
// run its size, whether a zip ends it and whether any byte was not zero.
type behind struct {
	b            []byte
	size         int64
	whole        bool
	zip, nonZero bool
	err          bool // reading failed
}

// readBehind reads r to its end, holding what it reads in *hold while that
// is at most spoolAt bytes; of a longer run it keeps only the last 65 KiB.
func readBehind(r io.Reader, hold *[]byte) behind {
	b := (*hold)[:0]
	var err error
	for err == nil && len(b) <= spoolAt {
		if len(b) == cap(b) {
			b = slices.Grow(b, max(len(b), 64<<10))
		}
		var n int
		n, err = r.Read(b[len(b):min(cap(b), spoolAt+1)])
		b = b[:len(b)+n]
	}
	*hold = b[:0]
	switch {
	case errors.Is(err, io.EOF):
		return behind{b: b, size: int64(len(b)), whole: true}
	case err != nil:
		return behind{err: true}
	}
	return readLongTail(r, b)
}

// tooLong reports a member of size bytes with a zip at its end that was
// too long to hold.
func (w *walker) tooLong(name string, size int64) {
	w.add(unreadable(name, fmt.Sprintf("a zip after other content (an executable jar or a self-extracting archive), %d bytes in all: too large to hold while reading it out of the archive (over %d bytes); not looked inside: unpack it and scan it", size, spoolAt)))
}

// zipIn scans data, a member with a zip after other content.
func (w *walker) zipIn(data []byte, name string, depth int) {
	if depth > w.opts.MaxDepth {
		w.add(unreadable(name, fmt.Sprintf("nested deeper than %d archives; not scanned (raise --max-depth)", w.opts.MaxDepth)))
		return
	}
	w.zip(data, name, depth)
}

// readLongTail reads the rest of a run longer than spoolAt, of which head
// is the start, keeping its last 65 KiB.
func readLongTail(r io.Reader, head []byte) behind {
	t := behind{size: int64(len(head)), nonZero: notZeros(head)}
	tail := make([]byte, 0, 2*zipEndSearch)
	tail = append(tail, head[len(head)-zipEndSearch:]...)
	for {
		if len(tail) == cap(tail) {
			tail = tail[:copy(tail, tail[len(tail)-zipEndSearch:])]
		}
		n, err := r.Read(tail[len(tail):cap(tail)])
		if !t.nonZero && notZeros(tail[len(tail):len(tail)+n]) {
			t.nonZero = true
		}
		tail = tail[:len(tail)+n]
		t.size += int64(n)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return behind{err: true}
			}
			break
		}
	}
	if len(tail) > zipEndSearch {
		tail = tail[len(tail)-zipEndSearch:]
	}
	t.zip = zipEndsIn(tail, t.size-int64(len(tail)))
	return t
}

// zeros is compared against, a piece at a time.
var zeros [64 << 10]byte

// notZeros says whether b has a byte that is not zero.
func notZeros(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return true
		}
		b = b[n:]
	}
	return false
}

// zipEndsIn says whether tail, the end of a member whose first base bytes
// were not kept, holds a zip's end record whose central directory starts
// with a header, or starts before tail, where it cannot be checked. The
// directory is taken to end where the record starts (as unzip and
// archive/zip first try, allowing for what is before the zip); only a
// record whose declared size does not fit is taken at its declared offset.
func zipEndsIn(tail []byte, base int64) bool {
	r := tailReader{b: tail, base: base}
	ends := zipEnds(tail)
	for i := len(ends) - 1; i >= 0; i-- {
		e := parseZipEnd(r, tail[ends[i]:], base+int64(ends[i]))
		if e.zip64Unread() {
			return true // its zip64 record is before the tail
		}
		starts := e.dirStarts()
		if len(starts) == 0 {
			continue
		}
		s := starts[0]
		if s < base || s+4 <= base+int64(len(tail)) && string(tail[s-base:s-base+4]) == "PK\x01\x02" {
			return true
		}
	}
	return false
}

// tailReader reads the bytes of tail at their offsets in the whole member.
type tailReader struct {
	b    []byte
	base int64
}

func (t tailReader) ReadAt(p []byte, off int64) (int, error) {
	if off < t.base || off-t.base > int64(len(t.b)) {
		return 0, errors.New("before the kept tail")
	}
	n := copy(p, t.b[off-t.base:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
