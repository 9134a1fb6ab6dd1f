package scan

import "slices"

// The compile flags LTO bitcode records: clang's -frecord-command-line
// puts the driver's command line in the module's llvm.commandline named
// metadata, whose string is one of the METADATA_STRINGS of the module's
// metadata block. The strings are read and those that parse as a clang
// command line are taken (flagrec.Parse: a program named clang and its
// arguments); the named node is not followed.
const (
	bcMetadataBlock   = 15 // METADATA_BLOCK_ID
	bcMetadataStrings = 35 // METADATA_STRINGS: [count, offset] blob
	// bcMaxMetaBlob bounds the bytes of one METADATA_STRINGS blob read
	// (debug information makes them large; the command line is small).
	bcMaxMetaBlob = 8 << 20
	// bcMaxMetaStrings bounds the strings of one blob.
	bcMaxMetaStrings = 1 << 20
)

// bitcodeStrings returns the metadata strings of each module of LLVM
// bitcode b; ok is false when it could not be read that far.
func bitcodeStrings(b []byte) (strs []string, ok bool) {
	ok = bitcodeModules(b, []uint64{bcModuleBlock, bcMetadataBlock}, func(m *bcBits, width uint64, info map[uint64][][]bcOp) bool {
		s, ok := m.moduleStrings(width, info)
		strs = append(strs, s...)
		return ok
	})
	if !ok {
		return nil, false
	}
	return strs, true
}

// moduleStrings reads a module block's metadata blocks' strings.
func (r *bcBits) moduleStrings(width uint64, info map[uint64][][]bcOp) (strs []string, ok bool) {
	if width < 2 || width > 32 {
		return nil, false
	}
	abbrevs := slices.Clip(info[bcModuleBlock])
	for !r.bad {
		switch id := r.fixed(width); id {
		case bcEndBlock:
			return strs, true
		case bcEnterSubblock:
			sid, w, end := r.subblock()
			if r.bad {
				return nil, false
			}
			if sid == bcMetadataBlock {
				m := &bcBits{b: r.b[:end/8], pos: r.pos}
				s, ok := m.metadataStrings(w, slices.Clip(info[bcMetadataBlock]))
				if !ok {
					return nil, false
				}
				strs = append(strs, s...)
			}
			r.pos = end
		case bcDefineAbbrev:
			if abbrevs = append(abbrevs, r.defineAbbrev()); len(abbrevs) > bcMaxAbbrevs {
				return nil, false
			}
		default:
			r.record(id, abbrevs, ^uint64(0), 0)
		}
	}
	return nil, false
}

// metadataStrings reads the METADATA_STRINGS records of a metadata block.
func (r *bcBits) metadataStrings(width uint64, abbrevs [][]bcOp) (strs []string, ok bool) {
	if width < 2 || width > 32 {
		return nil, false
	}
	for !r.bad {
		switch id := r.fixed(width); id {
		case bcEndBlock:
			return strs, true
		case bcEnterSubblock:
			if _, _, end := r.subblock(); !r.bad {
				r.pos = end
			}
		case bcDefineAbbrev:
			if abbrevs = append(abbrevs, r.defineAbbrev()); len(abbrevs) > bcMaxAbbrevs {
				return nil, false
			}
		default:
			code, ops := r.record(id, abbrevs, bcMetadataStrings, bcMaxMetaBlob+2)
			if r.bad {
				return nil, false
			}
			if code == bcMetadataStrings {
				s, ok := splitMetaStrings(ops)
				if !ok {
					return nil, false
				}
				strs = append(strs, s...)
			}
		}
	}
	return nil, false
}

// splitMetaStrings decodes METADATA_STRINGS' operands: the count, the
// offset of the characters in the blob, then the blob's bytes, which start
// with the strings' lengths as a VBR6 bitstream.
func splitMetaStrings(ops []uint64) ([]string, bool) {
	if len(ops) < 2 {
		return nil, false
	}
	count, offset, blob := ops[0], ops[1], ops[2:]
	if count > bcMaxMetaStrings || offset > uint64(len(blob)) {
		return nil, false
	}
	raw := make([]byte, len(blob))
	for i, v := range blob {
		if v > 0xff {
			return nil, false
		}
		raw[i] = byte(v)
	}
	lens := &bcBits{b: raw[:offset]}
	chars := raw[offset:]
	out := make([]string, 0, count)
	var at uint64
	for i := uint64(0); i < count; i++ {
		n := lens.vbr(6)
		if lens.bad || n > uint64(len(chars))-at {
			return nil, false
		}
		out = append(out, string(chars[at:at+n]))
		at += n
	}
	return out, true
}
