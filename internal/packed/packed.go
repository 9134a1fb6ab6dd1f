// Package packed reads the compact binary form of decoded data that
// dorisarm builds in (internal/matrix/known.bin), so that a run need not
// decode and validate the data file it came from. The blob holds the
// values only; which value comes next follows from the Go types, and the
// code that reads them is generated from the types (internal/packed/packgen),
// so no fact of the data is in code.
//
// A blob is:
//
//	sha256 of the data file's bytes   32 bytes
//	Version                           uvarint
//	layout (a digest of the types)    string
//	pool size                         uvarint: how many []string elements
//	                                  the value holds in all
//	the value
//
// A string is its length (uvarint) and its bytes; an int a zigzag varint;
// a bool a byte, 0 or 1; a slice or map its length plus one (uvarint; 0 is
// nil), then its elements (a map's sorted by key, each key then its value);
// a pointer a bool, then the value it points to when true; a struct its
// exported fields in order; a datafile.Pos the uvarints line<<1 (| 1 when
// it names a file) and col: the file is the one being read.
//
// Every length is checked against the bytes left, so a damaged blob makes
// the Reader fail (Err), never panic or allocate more than the blob's size.
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

var errBad = errors.New("packed: the blob is damaged or truncated")

// Reader reads one value from a blob. After the first problem it reads no
// further: every call returns a zero value (lengths 0), and Err says so.
// Strings point into the blob (nothing is copied); []string elements come
// from one array (each slice with no room to append into the next).
type Reader struct {
	s    string
	i    int
	err  error
	file string
	pool []string
	left int // pool elements not yet handed out
}

// Open checks the blob's header: that it was made from bytes with the
// digest sum, in this Version, for types with the digest layout. It
// returns nil when the blob is not for these bytes and types. Pos values
// name file.
func Open(blob string, sum [SumSize]byte, layout, file string) *Reader {
	if len(blob) < SumSize || blob[:SumSize] != string(sum[:]) {
		return nil
	}
	r := &Reader{s: blob, i: SumSize, file: file}
	if r.uvarint() != Version || r.Str() != layout {
		return nil
	}
	r.left = r.count()
	if r.err != nil {
		return nil
	}
	return r
}

// Err says whether the blob was read cleanly to its end: nothing damaged,
// no bytes left over.
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
		if b0 := r.s[i]; b0 < 0x80 {
			r.i = i + 1
			return uint64(b0)
		} else if b1 := r.s[i+1]; b1 < 0x80 {
			r.i = i + 2
			return uint64(b0&0x7f) | uint64(b1)<<7
		}
	}
	return r.uvarintLong()
}

func (r *Reader) uvarintLong() uint64 {
	var x uint64
	for shift := uint(0); r.i < len(r.s) && shift < 64; shift += 7 {
		b := r.s[r.i]
		r.i++
		if b < 0x80 {
			if shift == 63 && b > 1 {
				break // more than 64 bits
			}
			return x | uint64(b)<<shift
		}
		x |= uint64(b&0x7f) << shift
	}
	r.fail()
	return 0
}

// count reads how many things (each at least a byte) are still to come.
func (r *Reader) count() int {
	x := r.uvarint()
	if x > uint64(len(r.s)-r.i) {
		r.fail()
		return 0
	}
	return int(x)
}

// Str reads a string.
func (r *Reader) Str() string {
	n := r.count()
	s := r.s[r.i : r.i+n]
	r.i += n
	return s
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

// Len reads the length of a slice or map; ok false means nil.
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

// Strs reads a []string.
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
