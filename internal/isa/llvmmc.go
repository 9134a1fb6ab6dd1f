package isa

import (
	"strconv"
	"strings"
)

// MCEncoding reads the instruction word from a line of `llvm-mc
// --disassemble -show-encoding` output ("... // encoding: [0x20,0x00,0x80,0xd2]",
// little-endian bytes). The generator of groups.bin and the tests that
// compare the classifier with llvm-mc read its output with it.
func MCEncoding(line string) (uint32, bool) {
	i := strings.Index(line, "encoding: [")
	if i < 0 {
		return 0, false
	}
	rest := line[i+len("encoding: ["):]
	j := strings.IndexByte(rest, ']')
	if j < 0 {
		return 0, false
	}
	bytes := strings.Split(rest[:j], ",")
	if len(bytes) != 4 {
		return 0, false
	}
	var w uint32
	for n, b := range bytes {
		v, err := strconv.ParseUint(strings.TrimSpace(b), 0, 8)
		if err != nil {
			return 0, false
		}
		w |= uint32(v) << (8 * n)
	}
	return w, true
}
