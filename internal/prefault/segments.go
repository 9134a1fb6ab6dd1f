package prefault

// parseMaps reads the text of /proc/self/maps ("start-end perms offset dev
// inode path" per line). Malformed lines are passed over; a last line
// without its newline is not read: the text was cut short.
func parseMaps(maps []byte) []mapping {
	ms := make([]mapping, 0, 64)
	for len(maps) > 0 {
		i := indexByte(maps, '\n')
		if i < 0 {
			break
		}
		if m, ok := parse(maps[:i]); ok {
			ms = append(ms, m)
		}
		maps = maps[i+1:]
	}
	return ms
}

// holding returns the mapping that holds addr.
func holding(ms []mapping, addr uintptr) (mapping, bool) {
	for _, m := range ms {
		if m.start <= addr && addr < m.end {
			return m, true
		}
	}
	return mapping{}, false
}

// selfSegments returns the [start, end) address ranges of the readable
// mappings of the file that holds addr; none when no file mapping holds it.
func selfSegments(ms []mapping, addr uintptr) [][2]uintptr {
	self, ok := holding(ms, addr)
	if !ok || len(self.path) == 0 || self.path[0] != '/' {
		return nil
	}
	var segs [][2]uintptr
	for _, m := range ms {
		if m.readable && string(m.path) == string(self.path) {
			segs = append(segs, [2]uintptr{m.start, m.end})
		}
	}
	return segs
}

// heapRange returns the n bytes from addr rounded down to a page, cut at the
// end of the writable anonymous mapping that holds addr: the Go runtime maps
// its heap arenas readable and writable a few megabytes at a time, and a
// range past that is not the heap's. ok is false when no such mapping holds
// addr.
func heapRange(ms []mapping, addr, n, page uintptr) (start, end uintptr, ok bool) {
	m, ok := holding(ms, addr)
	if !ok || !m.writable || len(m.path) != 0 {
		return 0, 0, false
	}
	start = addr &^ (page - 1)
	return start, min(m.end, start+n), true
}

type mapping struct {
	start, end uintptr
	readable   bool
	writable   bool
	path       []byte
}

// parse reads one line of /proc/self/maps.
func parse(l []byte) (mapping, bool) {
	var m mapping
	var ok bool
	if m.start, l, ok = hex(l, '-'); !ok {
		return m, false
	}
	if m.end, l, ok = hex(l, ' '); !ok || m.end <= m.start {
		return m, false
	}
	// perms, offset, dev, inode, then the path (which may hold spaces).
	var f [4][]byte
	for k := range f {
		l = trimSpace(l)
		i := indexByte(l, ' ')
		if i < 0 {
			i = len(l)
		}
		f[k] = l[:i]
		l = l[i:]
	}
	if len(f[0]) < 1 {
		return m, false
	}
	m.readable = f[0][0] == 'r'
	m.writable = len(f[0]) > 1 && f[0][1] == 'w'
	m.path = trimSpace(l)
	return m, true
}

// hex reads a hexadecimal number that ends at sep.
func hex(l []byte, sep byte) (uintptr, []byte, bool) {
	var v uintptr
	for i, c := range l {
		switch {
		case c == sep && i > 0:
			return v, l[i+1:], true
		case i >= 16:
			return 0, nil, false
		case '0' <= c && c <= '9':
			v = v<<4 | uintptr(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uintptr(c-'a'+10)
		default:
			return 0, nil, false
		}
	}
	return 0, nil, false
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	return b
}

// runs returns the address ranges of the runs of resident pages in vec,
// mincore's answer (bit 0 of each byte) for the pages from base on.
func runs(vec []byte, base, page uintptr) [][2]uintptr {
	var out [][2]uintptr
	for i := 0; i < len(vec); {
		if vec[i]&1 == 0 {
			i++
			continue
		}
		j := i
		for j < len(vec) && vec[j]&1 != 0 {
			j++
		}
		out = append(out, [2]uintptr{base + uintptr(i)*page, base + uintptr(j)*page})
		i = j
	}
	return out
}

// pageSize returns AT_PAGESZ from the text of /proc/self/auxv (pairs of
// native 64-bit words), or 4096 when it is not there.
func pageSize(auxv []byte) uintptr {
	word := func(b []byte) uint64 {
		var v uint64
		for i := 7; i >= 0; i-- { // little-endian: amd64 and arm64 Linux
			v = v<<8 | uint64(b[i])
		}
		return v
	}
	for ; len(auxv) >= 16; auxv = auxv[16:] {
		switch word(auxv) {
		case 0: // AT_NULL
			return 4096
		case 6: // AT_PAGESZ
			if p := word(auxv[8:]); p >= 4096 && p&(p-1) == 0 {
				return uintptr(p)
			}
			return 4096
		}
	}
	return 4096
}
