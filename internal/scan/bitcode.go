package scan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
)

// LLVM bitcode (an -flto object) holds no machine code, but each module
// says which target it is for: the MODULE_CODE_TRIPLE record of its module
// block. bitcodeTriples reads them, walking the bitstream (LLVM's
// docs/BitCodeFormat.rst): the records of each module block are read to
// its end, and the blocks inside it (types, functions, metadata) and the
// other top-level blocks are skipped by their declared lengths.

// Block and record ids of the bitstream (llvm/Bitcode/LLVMBitCodes.h).
const (
	bcBlockInfo   = 0 // BLOCKINFO_BLOCK_ID
	bcModuleBlock = 8 // MODULE_BLOCK_ID
	bcTriple      = 2 // MODULE_CODE_TRIPLE
	bcSetBID      = 1 // BLOCKINFO_CODE_SETBID
)

// Abbreviation ids every block has.
const (
	bcEndBlock = iota
	bcEnterSubblock
	bcDefineAbbrev
	bcUnabbrevRecord
	bcFirstAbbrev
)

// Operand encodings of an abbreviation (0 is not one: literals are flagged).
const (
	bcLiteral = iota
	bcFixed
	bcVBR
	bcArray
	bcChar6
	bcBlob
)

// bcMaxAbbrevs bounds the abbreviations a module block may have (its own,
// and those BLOCKINFO blocks give it, in all), and bcMaxTriple the length
// of a triple: far above what LLVM writes.
const (
	bcMaxAbbrevs = 1 << 12
	bcMaxTriple  = 1 << 10
)

type bcOp struct {
	enc int
	val uint64 // the literal, or the width of a fixed or VBR field
}

// bcBits reads a bitstream: fields from the least significant bit of each
// byte up. Past the end, or on a malformed field, bad is set and every
// read returns 0.
type bcBits struct {
	b   []byte
	pos uint64 // in bits
	bad bool
}

func (r *bcBits) left() uint64 { return uint64(len(r.b))*8 - r.pos }

func (r *bcBits) fixed(n uint64) uint64 {
	if r.bad || n > 64 || n > r.left() {
		r.bad = true
		return 0
	}
	var v uint64
	for i := uint64(0); i < n; {
		off := r.pos & 7
		take := min(8-off, n-i)
		v |= uint64(r.b[r.pos>>3]>>off&(1<<take-1)) << i
		i += take
		r.pos += take
	}
	return v
}

func (r *bcBits) vbr(n uint64) uint64 {
	if n < 2 || n > 32 {
		r.bad = true
		return 0
	}
	var v uint64
	for shift := uint64(0); ; shift += n - 1 {
		c := r.fixed(n)
		if r.bad || shift >= 64 {
			r.bad = true
			return 0
		}
		v |= (c & (1<<(n-1) - 1)) << shift
		if c&(1<<(n-1)) == 0 {
			return v
		}
	}
}

func (r *bcBits) align32() {
	if p := (r.pos + 31) &^ 31; p <= uint64(len(r.b))*8 {
		r.pos = p
	} else {
		r.bad = true
	}
}

// subblock reads an ENTER_SUBBLOCK's header after its abbreviation id: the
// block's id, its abbreviation width and where it ends.
func (r *bcBits) subblock() (id, width, end uint64) {
	id = r.vbr(8)
	width = r.vbr(4)
	r.align32()
	words := r.fixed(32)
	if r.bad || words*32 > r.left() {
		r.bad = true
		return 0, 0, 0
	}
	return id, width, r.pos + words*32
}

// defineAbbrev reads a DEFINE_ABBREV after its abbreviation id.
func (r *bcBits) defineAbbrev() []bcOp {
	n := r.vbr(5)
	if n == 0 || n > 64 {
		r.bad = true
		return nil
	}
	ops := make([]bcOp, 0, n)
	for i := uint64(0); i < n && !r.bad; i++ {
		if r.fixed(1) == 1 {
			ops = append(ops, bcOp{bcLiteral, r.vbr(8)})
			continue
		}
		op := bcOp{enc: int(r.fixed(3))}
		switch op.enc {
		case bcFixed:
			if op.val = r.vbr(5); op.val > 64 {
				r.bad = true
			}
		case bcVBR:
			if op.val = r.vbr(5); op.val < 2 || op.val > 32 {
				r.bad = true
			}
		case bcArray, bcChar6, bcBlob:
		default:
			r.bad = true
		}
		ops = append(ops, op)
	}
	// An array is followed by its element's operand, and ends the list
	// with it; a blob ends it.
	for i, op := range ops {
		last := i == len(ops)-1
		switch {
		case op.enc == bcArray && i != len(ops)-2,
			op.enc == bcArray && (ops[i+1].enc == bcArray || ops[i+1].enc == bcBlob),
			op.enc == bcBlob && !last:
			r.bad = true
		}
	}
	return ops
}

// scalar reads one non-aggregate operand.
func (r *bcBits) scalar(op bcOp) uint64 {
	switch op.enc {
	case bcLiteral:
		return op.val
	case bcFixed:
		return r.fixed(op.val)
	case bcVBR:
		return r.vbr(op.val)
	case bcChar6:
		c := r.fixed(6)
		return uint64("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"[c])
	}
	r.bad = true
	return 0
}

// record reads a record after its abbreviation id: its code and, when the
// code is want, its operands, at most max of them (a record with more is
// malformed); other records' operands are read past, not kept.
func (r *bcBits) record(id uint64, abbrevs [][]bcOp, want uint64, max uint64) (code uint64, ops []uint64) {
	if id == bcUnabbrevRecord {
		code = r.vbr(6)
		n := r.vbr(6)
		if n > r.left()/6 || code == want && n > max {
			r.bad = true
			return 0, nil
		}
		for i := uint64(0); i < n && !r.bad; i++ {
			v := r.vbr(6)
			if code == want {
				ops = append(ops, v)
			}
		}
		return code, ops
	}
	if id-bcFirstAbbrev >= uint64(len(abbrevs)) {
		r.bad = true
		return 0, nil
	}
	seen := 0 // values read; the first is the code
	put := func(v uint64) {
		switch {
		case seen == 0:
			code = v
		case code != want:
		case uint64(len(ops)) == max:
			r.bad = true
		default:
			ops = append(ops, v)
		}
		seen++
	}
	abbrev := abbrevs[id-bcFirstAbbrev]
	for i := 0; i < len(abbrev) && !r.bad; i++ {
		switch op := abbrev[i]; op.enc {
		case bcArray:
			elt := abbrev[i+1]
			i++
			n := r.vbr(6)
			if n > r.left() || (elt.enc == bcLiteral || elt.enc == bcFixed && elt.val == 0) && n > 0 {
				r.bad = true
				break
			}
			for k := uint64(0); k < n && !r.bad; k++ {
				put(r.scalar(elt))
			}
		case bcBlob:
			n := r.vbr(6)
			r.align32()
			if n > r.left()/8 {
				r.bad = true
				break
			}
			if seen > 0 && code != want {
				r.pos += n * 8
			} else {
				for k := uint64(0); k < n && !r.bad; k++ {
					put(r.fixed(8))
				}
			}
			r.align32()
		default:
			put(r.scalar(op))
		}
	}
	if r.bad || seen == 0 {
		r.bad = true
		return 0, nil
	}
	return code, ops
}

// blockInfoFor reads a BLOCKINFO block, adding the abbreviations it gives
// each of the blocks named to byBlock; more than bcMaxAbbrevs in all is
// malformed.
func (r *bcBits) blockInfoFor(width, end uint64, byBlock map[uint64][][]bcOp, blocks ...uint64) {
	if width < 2 || width > 32 {
		r.bad = true
		return
	}
	total := 0
	for _, a := range byBlock {
		total += len(a)
	}
	cur := ^uint64(0)
	for !r.bad && r.pos < end {
		switch id := r.fixed(width); id {
		case bcEndBlock:
			r.align32()
			return
		case bcEnterSubblock:
			if _, _, e := r.subblock(); !r.bad {
				r.pos = e
			}
		case bcDefineAbbrev:
			ops := r.defineAbbrev()
			if slices.Contains(blocks, cur) {
				byBlock[cur] = append(byBlock[cur], ops)
				if total++; total > bcMaxAbbrevs {
					r.bad = true
				}
			}
		case bcUnabbrevRecord:
			code, ops := r.record(id, nil, bcSetBID, 1)
			if code == bcSetBID && len(ops) == 1 {
				cur = ops[0]
			}
		default:
			r.bad = true // BLOCKINFO records are not abbreviated
		}
	}
	r.bad = true
}

// Why bitcodeTriples returns no triple.
var (
	errBitcode  = errors.New("malformed bitcode")
	errNoTriple = errors.New("no module names a target")
)

// bitcodeTriples returns the target triple of each module of LLVM
// bitcode b: the last TRIPLE record of its module block (LLVM keeps the
// last one it reads), trusted only when all the block's records parse.
// The error is errNoTriple when no module has one (a ThinLTO summary index
// has no module), errBitcode when b could not be read that far.
func bitcodeTriples(b []byte) ([]string, error) {
	var triples []string
	ok := bitcodeModules(b, []uint64{bcModuleBlock}, func(m *bcBits, width uint64, info map[uint64][][]bcOp) bool {
		t, ok := m.moduleTriple(width, info[bcModuleBlock])
		if ok && t != "" {
			triples = append(triples, t)
		}
		return ok
	})
	switch {
	case !ok:
		return nil, errBitcode
	case len(triples) == 0:
		return nil, errNoTriple
	}
	return triples, nil
}

// bitcodeModules walks the top level of LLVM bitcode b (raw or in its
// wrapper): the BLOCKINFO blocks, whose abbreviations for the blocks named
// go into info, and each module block, handed to module with a reader that
// ends at the block's end. module returning false, or a malformed top
// level, stops the walk: ok is false.
func bitcodeModules(b []byte, blocks []uint64, module func(m *bcBits, width uint64, info map[uint64][][]bcOp) bool) (ok bool) {
	if bytes.HasPrefix(b, []byte(bitcodeWrapperMagic)) && len(b) >= 20 {
		off, size := uint64(binary.LittleEndian.Uint32(b[8:])), uint64(binary.LittleEndian.Uint32(b[12:]))
		if off+size > uint64(len(b)) {
			return false
		}
		b = b[off : off+size]
	}
	if !bytes.HasPrefix(b, []byte(bitcodeMagic)) {
		return false
	}
	r := &bcBits{b: b, pos: 32}
	info := map[uint64][][]bcOp{}
	for !r.bad && r.left() >= 32 {
		if r.fixed(2) != bcEnterSubblock {
			return false // the top level holds only blocks
		}
		id, width, end := r.subblock()
		switch {
		case r.bad:
		case id == bcBlockInfo:
			r.blockInfoFor(width, end, info, blocks...)
		case id == bcModuleBlock:
			if !module(&bcBits{b: b[:end/8], pos: r.pos}, width, info) {
				return false
			}
		}
		r.pos = end
	}
	return !r.bad
}

// moduleTriple reads a module block's records to its end and returns its
// last triple ("" when it has none); ok is false when the block does not
// parse.
func (r *bcBits) moduleTriple(width uint64, abbrevs [][]bcOp) (triple string, ok bool) {
	if width < 2 || width > 32 {
		return "", false
	}
	abbrevs = slices.Clip(abbrevs) // appends copy: the caller's stay
	for !r.bad {
		switch id := r.fixed(width); id {
		case bcEndBlock:
			return triple, true
		case bcEnterSubblock:
			// Skipped. A BLOCKINFO block here (where LLVM writes it) gives
			// abbreviations to blocks entered after it, not to this one.
			if _, _, end := r.subblock(); !r.bad {
				r.pos = end
			}
		case bcDefineAbbrev:
			if abbrevs = append(abbrevs, r.defineAbbrev()); len(abbrevs) > bcMaxAbbrevs {
				return "", false
			}
		default:
			code, ops := r.record(id, abbrevs, bcTriple, bcMaxTriple)
			if r.bad || code != bcTriple {
				continue
			}
			var s strings.Builder
			for _, c := range ops {
				if c < 0x20 || c > 0x7e {
					return "", false
				}
				s.WriteByte(byte(c))
			}
			triple = s.String()
		}
	}
	return "", false
}
