package packed

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

// blob builds a blob by hand, in the documented format, so the Reader is
// tested against the format rather than against packgen.
type blob struct{ b []byte }

func newBlob(sum [SumSize]byte, layout string, pool int) *blob {
	b := &blob{b: append([]byte(nil), sum[:]...)}
	b.uv(Version).str(layout).uv(uint64(pool))
	return b
}

func (b *blob) uv(x uint64) *blob   { b.b = binary.AppendUvarint(b.b, x); return b }
func (b *blob) raw(x ...byte) *blob { b.b = append(b.b, x...); return b }
func (b *blob) str(s string) *blob  { b.uv(uint64(len(s))); b.b = append(b.b, s...); return b }

var sum = sha256.Sum256([]byte("data"))

func TestReadsTheFormat(t *testing.T) {
	b := newBlob(sum, "L", 3).
		str("héllo").
		uv(7).  // Int -4: zigzag
		raw(1). // Bool true
		uv(0).  // nil slice
		uv(3).  // []string of 2
		str("a").str("").
		uv(1).                // empty []string
		uv(2).str("z").       // []string of 1
		uv(300<<1 | 1).uv(7). // Pos with a file
		uv(5 << 1).uv(2)      // Pos without
	r := Open(string(b.b), sum, "L", "m.yaml")
	if r == nil {
		t.Fatal("a good blob was refused")
	}
	if s := r.Str(); s != "héllo" {
		t.Errorf("Str = %q", s)
	}
	if x := r.Int(); x != -4 {
		t.Errorf("Int = %d", x)
	}
	if !r.Bool() {
		t.Error("Bool = false")
	}
	if n, ok := r.Len(); ok || n != 0 {
		t.Errorf("nil: Len = %d, %v", n, ok)
	}
	two := r.Strs()
	if len(two) != 2 || two[0] != "a" || two[1] != "" || cap(two) != 2 {
		t.Errorf("Strs = %q (cap %d)", two, cap(two))
	}
	if e := r.Strs(); e == nil || len(e) != 0 {
		t.Errorf("empty Strs = %#v", e)
	}
	one := r.Strs()
	if len(one) != 1 || one[0] != "z" {
		t.Errorf("Strs = %q", one)
	}
	// The slices share an array: appending to one must not write into the
	// next.
	_ = append(two, "x")
	if one[0] != "z" {
		t.Errorf("append to one slice changed the next: %q", one)
	}
	if p := r.Pos(); p != (datafile.Pos{File: "m.yaml", Line: 300, Col: 7}) {
		t.Errorf("Pos = %#v", p)
	}
	if p := r.Pos(); p != (datafile.Pos{Line: 5, Col: 2}) {
		t.Errorf("Pos = %#v", p)
	}
	if err := r.Err(); err != nil {
		t.Errorf("Err = %v", err)
	}
}

func TestRefusesOtherBlobs(t *testing.T) {
	good := newBlob(sum, "L", 0).str("x").b
	for name, b := range map[string][]byte{
		"other data":    newBlob(sha256.Sum256([]byte("other")), "L", 0).str("x").b,
		"other layout":  newBlob(sum, "M", 0).str("x").b,
		"other version": append(append(append([]byte(nil), sum[:]...), byte(Version+1), 1, 'L', 0), 1, 'x'),
		"short":         good[:20],
		"no pool size":  good[:SumSize+3],
		"huge pool":     append(append([]byte(nil), good[:SumSize+3]...), 0xff, 0xff, 0xff, 0x7f),
	} {
		if r := Open(string(b), sum, "L", "f"); r != nil {
			t.Errorf("%s: opened", name)
		}
	}
	if Open(string(good), sum, "L", "f") == nil {
		t.Fatal("the good blob was refused")
	}
}

// Damage is reported by Err, never by a panic, and no length is believed
// beyond the bytes left.
func TestDamage(t *testing.T) {
	read := func(b []byte) error {
		r := Open(string(b), sum, "L", "f")
		if r == nil {
			return errBad
		}
		r.Str()
		r.Strs()
		r.Int()
		r.Bool()
		r.Pos()
		return r.Err()
	}
	good := newBlob(sum, "L", 2).str("abc").uv(3).str("p").str("q").uv(4).raw(1).uv(9).uv(3).b
	if err := read(good); err != nil {
		t.Fatalf("good blob: %v", err)
	}
	for n := range len(good) {
		if read(good[:n]) == nil {
			t.Errorf("truncated to %d bytes: read cleanly", n)
		}
	}
	if read(append(good, 0)) == nil {
		t.Error("a trailing byte was not noticed")
	}
	head := len(newBlob(sum, "L", 2).b)
	for name, body := range map[string][]byte{
		"string beyond the end": newBlob(sum, "L", 2).uv(1 << 40).b,
		"slice beyond the end":  newBlob(sum, "L", 2).str("abc").uv(1 << 30).b,
		"more than the pool":    newBlob(sum, "L", 1).str("abc").uv(3).str("p").str("q").uv(4).raw(1).uv(9).uv(3).b,
		"bool 2":                newBlob(sum, "L", 2).str("abc").uv(3).str("p").str("q").uv(4).raw(2).uv(9).uv(3).b,
		"varint too long":       append(newBlob(sum, "L", 2).b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
	} {
		if read(body) == nil {
			t.Errorf("%s: read cleanly", name)
		}
	}
	// Every byte of the value changed to every value: no panic.
	for i := head; i < len(good); i++ {
		for v := range 256 {
			b := append([]byte(nil), good...)
			b[i] = byte(v)
			_ = read(b)
		}
	}
}
