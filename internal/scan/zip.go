package scan

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
)

// zipEnd is what a zip's end-of-central-directory record (the zip64 one
// when there is one) says about the central directory.
type zipEnd struct {
	entries         uint64 // declared
	dirSize, dirOff uint64
	at              int64 // offset of the record
}

// zipEndSearch is how far from the end archive/zip looks for the record
// (22 bytes and a comment of up to 64 KiB).
const zipEndSearch = 65 * 1024

// readZipEnd finds the end record as archive/zip does: the last signature
// in the last 65 KiB, with its comment inside the file.
func readZipEnd(r io.ReaderAt, size int64) (zipEnd, bool) {
	buf, base, put, ok := zipTail(r, size)
	if !ok {
		return zipEnd{}, false
	}
	defer put()
	ends := zipEnds(buf)
	if len(ends) == 0 {
		return zipEnd{}, false
	}
	p := ends[len(ends)-1]
	if p+22+int(binary.LittleEndian.Uint16(buf[p+20:])) > len(buf) {
		return zipEnd{}, false
	}
	return parseZipEnd(r, buf[p:], base+int64(p)), true
}

// zipEnds are the offsets of end-record signatures in buf with a whole
// record after them, first to last (bytes.Index is fast, LastIndex is not).
func zipEnds(buf []byte) []int {
	var ps []int
	for p := 0; p+22 <= len(buf); p++ {
		i := bytes.Index(buf[p:len(buf)-18], []byte("PK\x05\x06"))
		if i < 0 {
			break
		}
		p += i
		ps = append(ps, p)
	}
	return ps
}

// tails are buffers for zipTail: every file that is not recognised by its
// first bytes has its tail read.
var tails = sync.Pool{New: func() any { return new([zipEndSearch]byte) }}

// zipTail reads the last 65 KiB of a file (all of it when smaller), where
// the end record is, into a buffer from tails (to put back when done);
// base is the offset of what it read.
func zipTail(r io.ReaderAt, size int64) (buf []byte, base int64, put func(), ok bool) {
	n := min(size, zipEndSearch)
	if n < 22 {
		return nil, 0, nil, false
	}
	t := tails.Get().(*[zipEndSearch]byte)
	put = func() { tails.Put(t) }
	buf = t[:n]
	if _, err := r.ReadAt(buf, size-n); err != nil && err != io.EOF {
		put()
		return nil, 0, nil, false
	}
	return buf, size - n, put, true
}

// zipEnd32 reads the 32-bit end record b (22 bytes at least) found at
// offset at, as it is, zip64 markers included.
func zipEnd32(b []byte, at int64) zipEnd {
	return zipEnd{
		entries: uint64(binary.LittleEndian.Uint16(b[10:])),
		dirSize: uint64(binary.LittleEndian.Uint32(b[12:])),
		dirOff:  uint64(binary.LittleEndian.Uint32(b[16:])),
		at:      at,
	}
}

// parseZipEnd reads the end record b (22 bytes at least) found at offset
// at, and the zip64 record it sends a reader to.
func parseZipEnd(r io.ReaderAt, b []byte, at int64) zipEnd {
	e := zipEnd32(b, at)
	if e.zipEnd64Markers() {
		e = zip64End(r, e)
	}
	return e
}

// zipEndsDisagree says whether data's zip64 end record, which archive/zip
// reads, names another directory than the 32-bit record's own values,
// which Java and other readers take where they are not zip64 markers
// (0xffff entries, 0xffffffff size or offset). archive/zip also takes a
// directory of exactly 0xffff bytes for a marker: a zip64 record then
// sends it to a directory Java never reads.
func zipEndsDisagree(data []byte) bool {
	buf, base, put, ok := zipTail(bytes.NewReader(data), int64(len(data)))
	if !ok {
		return false
	}
	defer put()
	ends := zipEnds(buf)
	if len(ends) == 0 {
		return false
	}
	p := ends[len(ends)-1]
	e32 := zipEnd32(buf[p:], base+int64(p))
	if !e32.zipEnd64Markers() {
		return false
	}
	e64 := zip64End(bytes.NewReader(data), e32)
	if e64.at == e32.at {
		return false // no zip64 record: both read the 32-bit one
	}
	return e32.entries != 0xffff && e32.entries != e64.entries&0xffff ||
		e32.dirSize != 0xffffffff && e32.dirSize != e64.dirSize ||
		e32.dirOff != 0xffffffff && e32.dirOff != e64.dirOff
}

// zipEnd64Markers says whether a 32-bit end record's fields send a reader
// to a zip64 record: archive/zip's test, which takes a directory of 65,535
// bytes for one too.
func (e zipEnd) zipEnd64Markers() bool {
	return e.entries == 0xffff || e.dirSize == 0xffff || e.dirSize == 0xffffffff || e.dirOff == 0xffffffff
}

// zip64Unread says whether e is a 32-bit end record whose zip64 record
// could not be read (parseZipEnd returns it unchanged then): its
// directory is not known.
func (e zipEnd) zip64Unread() bool {
	return e.dirSize == 0xffffffff || e.dirOff == 0xffffffff
}

// zip64End reads the zip64 end record that the locator just before e
// points to; e when there is none. The locator's disk fields are not
// checked: Java ignores them (archive/zip does not, and then refuses the
// zip: a finding).
func zip64End(r io.ReaderAt, e zipEnd) zipEnd {
	var loc [20]byte
	if e.at < int64(len(loc)) {
		return e
	}
	if _, err := r.ReadAt(loc[:], e.at-int64(len(loc))); err != nil || string(loc[:4]) != "PK\x06\x07" {
		return e
	}
	p := binary.LittleEndian.Uint64(loc[8:])
	var rec [56]byte
	if p > math.MaxInt64 {
		return e
	}
	if _, err := r.ReadAt(rec[:], int64(p)); err != nil || string(rec[:4]) != "PK\x06\x06" {
		// Not where the locator says: a zip64 zip with something before
		// it and its offsets not adjusted (unzip finds the record just
		// before the locator; archive/zip refuses the zip: a finding).
		q := e.at - int64(len(loc)) - int64(len(rec))
		if q < 0 {
			return e
		}
		if _, err := r.ReadAt(rec[:], q); err != nil || string(rec[:4]) != "PK\x06\x06" {
			return e
		}
		p = uint64(q)
	}
	return zipEnd{
		entries: binary.LittleEndian.Uint64(rec[32:]),
		dirSize: binary.LittleEndian.Uint64(rec[40:]),
		dirOff:  binary.LittleEndian.Uint64(rec[48:]),
		at:      int64(p),
	}
}

// dirStarts are where archive/zip may start reading the central
// directory: just before the end record by the declared size (what it
// tries first; a prefix before the zip is allowed for), or at the declared
// offset (when a header is there).
func (e zipEnd) dirStarts() []int64 {
	var s []int64
	if e.dirSize <= uint64(e.at) {
		s = append(s, e.at-int64(e.dirSize))
	}
	if e.dirOff < uint64(e.at) {
		s = append(s, int64(e.dirOff))
	}
	return s
}

// zipHeaders counts the central-directory headers at off, as archive/zip
// reads them: until one is not there. It stops past limit.
func zipHeaders(data []byte, off int64, limit uint64) uint64 {
	var n uint64
	for n <= limit && off >= 0 && off+46 <= int64(len(data)) && string(data[off:off+4]) == "PK\x01\x02" {
		h := data[off:]
		off += 46 + int64(binary.LittleEndian.Uint16(h[28:])) + int64(binary.LittleEndian.Uint16(h[30:])) + int64(binary.LittleEndian.Uint16(h[32:]))
		n++
	}
	return n
}

// zipEntryCount is how many entries archive/zip would read into memory
// for data: what the end record declares or the headers really there,
// whichever is more (archive/zip reads headers until they stop and checks
// only the low 16 bits of the count). It stops counting past limit.
func zipEntryCount(data []byte, limit uint64) uint64 {
	e, ok := readZipEnd(bytes.NewReader(data), int64(len(data)))
	if !ok {
		return 0 // archive/zip refuses it
	}
	n := e.entries
	for _, s := range e.dirStarts() {
		n = max(n, zipHeaders(data, s, limit))
	}
	return n
}

// zipAtEnd says whether a file that its first bytes do not identify is a
// zip with something before it: an executable jar or a self-extracting
// archive (a script or a program, then the zip), which Java and unzip
// open. An end record in its last 65 KiB must point at a central-directory
// header. Like Java, any such record counts, its comment cut short or
// followed by more bytes (archive/zip may then refuse it: a finding).
func zipAtEnd(r io.ReaderAt, size int64) bool {
	buf, base, put, ok := zipTail(r, size)
	if !ok {
		return false
	}
	defer put()
	ends := zipEnds(buf)
	for i := len(ends) - 1; i >= 0; i-- {
		e := parseZipEnd(r, buf[ends[i]:], base+int64(ends[i]))
		for _, s := range e.dirStarts() {
			var sig [4]byte
			if _, err := r.ReadAt(sig[:], s); err == nil && string(sig[:]) == "PK\x01\x02" {
				return true
			}
		}
	}
	return false
}

// zipOverlaps finds entries whose compressed data overlaps another's (a
// zip bomb: many central-directory entries sharing one stream) or runs
// past the end of the archive (size bytes). They are not read.
func zipOverlaps(files []*zip.File, size int64) map[*zip.File]string {
	type ent struct {
		f      *zip.File
		lo, hi int64
	}
	var es []ent
	out := map[*zip.File]string{}
	for _, f := range files {
		off, err := f.DataOffset()
		if err != nil {
			continue // Open reports it
		}
		if off < 0 || off > size || f.CompressedSize64 > uint64(size-off) {
			out[f] = fmt.Sprintf("entry's compressed size (%d bytes) runs past the end of the archive; not read", f.CompressedSize64)
			continue
		}
		es = append(es, ent{f, off, off + int64(f.CompressedSize64)})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].lo < es[j].lo })
	var end int64 = -1
	var owner *zip.File
	for _, e := range es {
		if e.lo < end {
			out[e.f] = fmt.Sprintf("entry's data overlaps %s's (a zip bomb: entries sharing one stream); not read", owner.Name)
			continue
		}
		end, owner = e.hi, e.f
	}
	return out
}

// javaClassMagic starts a Java class file (and a fat Mach-O, which sniff
// tells apart first).
var javaClassMagic = []byte{0xca, 0xfe, 0xba, 0xbe}

// errTap remembers the first error other than io.EOF read through it.
type errTap struct {
	r   io.Reader
	err error
}

func (t *errTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

// zipEntry scans one zip entry (not a directory); false when the scan's
// limits are spent. archive/zip checks the entry against its declared size
// and CRC; an entry that fails them is read again as a JVM would. hold is
// zipBehind's buffer.
func (w *walker) zipEntry(f *zip.File, mpath string, depth int, jar *jarInfo, hold *[]byte) bool {
	rc, err := f.Open()
	if err != nil {
		w.add(unreadable(mpath, err.Error()))
		return true
	}
	defer rc.Close()
	tap := &errTap{r: rc}
	br := bufio.NewReaderSize(tap, sniffLen)
	head, _ := br.Peek(sniffLen)
	if tap.err != nil {
		w.zipMismatch(f, mpath, depth, jar, tap.err, true)
		return true
	}
	if sniff(head) == kOther {
		// Not code by its first bytes; a zip may still end it (an
		// executable jar). A stored entry's end is read where it lies.
		// A compressed one is read to its end, unless it is a class file
		// by name and magic: the JVM refuses bytes after a class, and
		// classes are most of a jar.
		switch {
		case f.Method == zip.Store:
			raw, err := f.OpenRaw()
			at, ok := raw.(io.ReaderAt)
			if err != nil || !ok || !zipAtEnd(at, int64(f.CompressedSize64)) {
				return true
			}
			// Read as code below: memory finds the zip.
		case bytes.HasPrefix(head, javaClassMagic) && strings.HasSuffix(f.Name, ".class"):
			return true
		default:
			if !w.budget(mpath, int64(f.UncompressedSize64)) {
				return false
			}
			w.zipBehind(br, mpath, depth+1, hold)
			if tap.err != nil {
				w.zipMismatch(f, mpath, depth, jar, tap.err, true)
			}
			return true
		}
	}
	// An entry read counts against --max-entries for good; the directory's
	// reservation is given back when the zip closes. Its size is at most
	// --max-member (checked above).
	if !w.budget(mpath, int64(f.UncompressedSize64)) {
		return false
	}
	body, unmap, ok := w.slurpSized(br, mpath, int64(f.UncompressedSize64))
	if ok {
		// To the end of the entry: archive/zip checks the CRC and that
		// the data is no longer than declared there.
		_, _ = io.Copy(io.Discard, br)
	}
	if tap.err != nil {
		if ok {
			unmap()
		}
		w.zipMismatch(f, mpath, depth, jar, tap.err, ok) // slurpSized reported its own failure
		return true
	}
	if ok {
		w.owned(body, unmap, mpath, depth+1, jar)
	}
	return true
}

// zipMismatch handles an entry whose data fails its declared size or CRC
// (err): it is unreadable, and what a JVM would read of it is scanned
// (Java trusts the end of the deflate stream, not the declared size).
func (w *walker) zipMismatch(f *zip.File, mpath string, depth int, jar *jarInfo, err error, report bool) {
	n, whole := w.zipAsJava(f, mpath, depth, jar)
	switch {
	case whole && uint64(n) != f.UncompressedSize64:
		w.add(unreadable(mpath, fmt.Sprintf("entry's data is %d bytes, not the %d its headers declare (%v): a JVM reads all of it; scanned as read to the end of its stream (a zip made to hide it, or a broken one: rebuild it)",
			n, f.UncompressedSize64, err)))
	case report:
		w.add(unreadable(mpath, fmt.Sprintf("corrupt entry (%v): its data does not decompress to what its headers declare; rebuild the archive", err)))
	}
}

// zipAsJava reads an entry as a JVM does, trusting neither its declared
// size nor its CRC: the stored bytes, or the deflate stream to its end,
// counted against --max-bytes as they are inflated. Code is scanned. n is
// the bytes read: all of them when whole, else the first few (not code,
// or not readable).
func (w *walker) zipAsJava(f *zip.File, mpath string, depth int, jar *jarInfo) (n int64, whole bool) {
	raw, err := f.OpenRaw()
	if err != nil {
		return 0, false
	}
	var r io.Reader
	switch f.Method {
	case zip.Store:
		r = raw
	case zip.Deflate:
		fr := flate.NewReader(raw)
		defer fr.Close()
		r = fr
	default:
		return 0, false
	}
	br := bufio.NewReaderSize(&limited{r: r, w: w, name: mpath}, sniffLen)
	head, _ := br.Peek(sniffLen)
	if sniff(head) == kOther {
		return int64(len(head)), false
	}
	data, unmap, ok := w.slurp(br, mpath)
	if !ok {
		return int64(len(head)), false
	}
	w.owned(data, unmap, mpath, depth+1, jar)
	return int64(len(data)), true
}

// zipDirectory handles an entry whose name ends in '/': unzip and Java
// make a directory of it whatever its attributes say, and read no data.
// Data in one is not a file anyone extracts, but it is looked at: code
// there is scanned like any entry's.
func (w *walker) zipDirectory(f *zip.File, mpath string, depth int, jar *jarInfo) {
	if f.CompressedSize64 == 0 {
		return
	}
	w.zipAsJava(f, mpath, depth, jar)
}

// isZipDir: only a name ending in '/' is a directory (the external
// attributes are not what unzip or Java go by).
func isZipDir(f *zip.File) bool { return strings.HasSuffix(f.Name, "/") }
