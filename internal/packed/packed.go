// Package packed reads the compact binary form of decoded data that
// dorisarm builds in (internal/matrix/known.bin), so a run need not decode
// and validate the data file it came from. The blob holds values only;
// which value comes next is known from the Go types, by a decoder
// generated from them (internal/packed/packgen), so no fact is in code.
//
// A blob is:
//
//	sha256 of the data file's bytes   32 bytes
//	Version                           uvarint
//	layout (a digest of the types)    string
//	string table                      string: each string once, as a string
//	pool size                         uvarint: the []string elements in all
//	the value
//
// A string is its length (uvarint) and bytes. In the value, a string is
// its offset in the table (uvarint); an int is a zigzag varint; a bool a byte
// 0 or 1; a slice or map its length plus one (uvarint; 0 is nil), then its
// elements (a map's sorted by key, key then value); a pointer a bool, then
// the value when true; a struct its exported fields in order; a []string
// takes its elements from one pool allocated for the whole value; a
// datafile.Pos is (line<<1 | 1 if it has a file) and col, as uvarints, its
// file being the name of the file at hand.
//
// Every length is bounded by the bytes left, so a damaged blob makes the
// Reader fail (Err), never panic or allocate beyond the blob's size.
package packed

import (
	"errors"
	"math"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

// Version is the version of the format above; a blob of another is refused.
const Version = 1

// SumSize is the size of the digest a blob starts with.
const SumSize = 32

var errBad = errors.New("packed: the blob is damaged, truncated or of another version")

// Reader reads one value from a blob. After the first problem it stops
// reading: every call returns a zero value (lengths 0), and Err says so.
type Reader struct {
	s    string
	i    int
	err  error
	strs string // the string table
	pool []string
	left int // pool elements not yet handed out
	file string
}

// Open checks the blob's header, that it was made from bytes with the
// digest sum and for types with the digest layout, and reads its string
// table; Pos values name file. It returns nil when the blob is not for
// these bytes and types, or is damaged.
func Open(blob string, sum [SumSize]byte, layout, file string) *Reader {
	if len(blob) < SumSize || blob[:SumSize] != string(sum[:]) {
		return nil
	}
	r := &Reader{s: blob, i: SumSize, file: file}
	if r.uvarint() != Version || r.raw() != layout {
		return nil
	}
	r.strs = r.raw()
	r.left = r.count()
	if r.err != nil {
		return nil
	}
	return r
}

// Err says whether the blob was read cleanly to its end: no damage, no
// trailing bytes.
func (r *Reader) Err() error {
	if r.err == nil && r.i != len(r.s) {
		r.fail()
	}
	return r.err
}

func (r *Reader) fail() {
	r.err = errBad
	r.i = len(r.s)
}

func (r *Reader) uvarint() uint64 {
	// Most are one or two bytes long.
	if i := r.i; i+1 < len(r.s) {
		b0, b1 := r.s[i], r.s[i+1]
		if b0 < 0x80 {
			r.i = i + 1
			return uint64(b0)
		}
		if b1 < 0x80 {
			r.i = i + 2
			return uint64(b0&0x7f) | uint64(b1)<<7
		}
	}
	return r.uvarintLong()
}

func (r *Reader) uvarintLong() uint64 {
	x, next, ok := uvarint(r.s, r.i)
	if !ok {
		r.fail()
		return 0
	}
	r.i = next
	return x
}

// uvarint reads the uvarint at s[i:]: its value and where it ends.
func uvarint(s string, i int) (x uint64, next int, ok bool) {
	for shift := uint(0); i < len(s) && shift < 64; shift += 7 {
		b := s[i]
		i++
		if b < 0x80 {
			if shift == 63 && b > 1 {
				break // more than 64 bits
			}
			return x | uint64(b)<<shift, i, true
		}
		x |= uint64(b&0x7f) << shift
	}
	return 0, 0, false
}

// count reads a number of things still to come, each at least a byte.
func (r *Reader) count() int {
	x := r.uvarint()
	if x > uint64(len(r.s)-r.i) {
		r.fail()
		return 0
	}
	return int(x)
}

// raw reads a string stored in place (length, bytes).
func (r *Reader) raw() string {
	n := r.count()
	s := r.s[r.i : r.i+n]
	r.i += n
	return s
}

// Str reads a string: it is where the table's string at that offset is,
// in the blob (nothing is copied).
func (r *Reader) Str() string {
	off := r.uvarint()
	if off < uint64(len(r.strs)) && r.strs[off] < 0x80 { // a short string
		if end := off + 1 + uint64(r.strs[off]); end <= uint64(len(r.strs)) {
			return r.strs[off+1 : end]
		}
	}
	return r.strLong(off)
}

func (r *Reader) strLong(off uint64) string {
	if off >= uint64(len(r.strs)) {
		r.fail()
		return ""
	}
	n, i, ok := uvarint(r.strs, int(off))
	if !ok || n > uint64(len(r.strs)-i) {
		r.fail()
		return ""
	}
	return r.strs[i : i+int(n)]
}

// Int reads an int.
func (r *Reader) Int() int {
	u := r.uvarint()
	x := int64(u>>1) ^ -int64(u&1)
	if int64(int(x)) != x {
		r.fail()
		return 0
	}
	return int(x)
}

// Bool reads a bool.
func (r *Reader) Bool() bool {
	if r.i >= len(r.s) || r.s[r.i] > 1 {
		r.fail()
		return false
	}
	r.i++
	return r.s[r.i-1] == 1
}

// Len reads the length of a slice or map; ok false means nil. The length
// is at most the bytes left.
func (r *Reader) Len() (n int, ok bool) {
	x := r.uvarint()
	if x == 0 {
		return 0, false
	}
	if x-1 > uint64(len(r.s)-r.i) {
		r.fail()
		return 0, false
	}
	return int(x - 1), true
}

// Strs reads a []string, its elements taken from the pool.
func (r *Reader) Strs() []string {
	n, ok := r.Len()
	if !ok {
		return nil
	}
	if n == 0 {
		return []string{}
	}
	if n > r.left {
		r.fail()
		return nil
	}
	if r.pool == nil {
		r.pool = make([]string, r.left)
	}
	s := r.pool[:n:n]
	r.pool, r.left = r.pool[n:], r.left-n
	for i := range s {
		s[i] = r.Str()
	}
	return s
}

// Pos reads a position in the file Open was given.
func (r *Reader) Pos() datafile.Pos {
	lf, col := r.uvarint(), r.uvarint()
	if lf>>1 > math.MaxInt32 || col > math.MaxInt32 {
		r.fail()
		return datafile.Pos{}
	}
	p := datafile.Pos{Line: int(lf >> 1), Col: int(col)}
	if lf&1 == 1 {
		p.File = r.file
	}
	return p
}
