package prefault

import (
	"reflect"
	"testing"
)

const sampleMaps = `00400000-00a85000 r-xp 00000000 fe:00 1234                       /opt/dorisarm/bin/dorisarm
00a85000-01171000 r--p 00685000 fe:00 1234                       /opt/dorisarm/bin/dorisarm
01171000-01262000 rw-p 00d71000 fe:00 1234                       /opt/dorisarm/bin/dorisarm
01262000-036ab000 rw-p 00000000 00:00 0 
c000000000-c004000000 rw-p 00000000 00:00 0 
7f0000000000-7f0000021000 r--p 00000000 fe:00 99                         /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1a2b3000-7ffd1a2d4000 rw-p 00000000 00:00 0                          [stack]
7ffd1a3fe000-7ffd1a400000 r-xp 00000000 00:00 0                          [vdso]
`

func TestSelfSegments(t *testing.T) {
	for _, c := range []struct {
		name string
		maps string
		addr uintptr
		want [][2]uintptr
	}{
		{"the executable's three segments", sampleMaps, 0x401234,
			[][2]uintptr{{0x400000, 0xa85000}, {0xa85000, 0x1171000}, {0x1171000, 0x1262000}}},
		{"addr in the data segment finds the same file", sampleMaps, 0x1171000,
			[][2]uintptr{{0x400000, 0xa85000}, {0xa85000, 0x1171000}, {0x1171000, 0x1262000}}},
		{"another file's mapping is that file's", sampleMaps, 0x7f0000000010, [][2]uintptr{{0x7f0000000000, 0x7f0000021000}}},
		{"anonymous memory holds no file", sampleMaps, 0xc000001000, nil},
		{"a pseudo-file is not a file", sampleMaps, 0x7ffd1a3fe010, nil},
		{"end is exclusive", sampleMaps, 0x36ab000, nil},
		{"unmapped", sampleMaps, 0x10, nil},
		{"empty", "", 0x401234, nil},
		{"a last line cut short is not read",
			"00400000-00a85000 r-xp 00000000 fe:00 1234 /bin/x\n00a85000-01171000 r--p 00685000 fe:00 1234 /bin/x", 0x401234,
			[][2]uintptr{{0x400000, 0xa85000}}},
		{"paths with spaces and a deleted file",
			"00400000-00500000 r-xp 00000000 fe:00 7 /tmp/my dir/dm (deleted)\n00500000-00600000 ---p 00100000 fe:00 7 /tmp/my dir/dm (deleted)\n00600000-00700000 r--p 00200000 fe:00 7 /tmp/my dir/dm (deleted)\n00700000-00800000 r--p 00200000 fe:00 7 /tmp/my dir/dm\n", 0x400000,
			[][2]uintptr{{0x400000, 0x500000}, {0x600000, 0x700000}}},
		{"malformed lines are passed over",
			"zz-00a85000 r-xp 0 0 0 /bin/x\n00400000-00300000 r-xp 0 0 0 /bin/x\n00400000 r-xp\n00400000-00a85000 r-xp 00000000 fe:00 1234 /bin/x\n11112222333344445-11112222333344446 r-xp 0 0 0 /bin/x\n", 0x400000,
			[][2]uintptr{{0x400000, 0xa85000}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := selfSegments(parseMaps([]byte(c.maps)), c.addr); !reflect.DeepEqual(got, c.want) {
				t.Errorf("selfSegments(%#x) = %#x, want %#x", c.addr, got, c.want)
			}
		})
	}
}

func TestHeapRange(t *testing.T) {
	ms := parseMaps([]byte(sampleMaps))
	for _, c := range []struct {
		name       string
		addr, n    uintptr
		start, end uintptr
		ok         bool
	}{
		{"within the mapping", 0xc000012345, 1 << 20, 0xc000012000, 0xc000112000, true},
		{"cut at the mapping's end", 0xc003fff000, 1 << 20, 0xc003fff000, 0xc004000000, true},
		{"the executable's data is not the heap", 0x1171010, 1 << 20, 0, 0, false},
		{"the stack is named, so not the heap", 0x7ffd1a2b3100, 4096, 0, 0, false},
		{"read-only memory is not the heap", 0x7ffd1a3fe010, 4096, 0, 0, false},
		{"unmapped", 0xd000000000, 4096, 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			start, end, ok := heapRange(ms, c.addr, c.n, 4096)
			if start != c.start || end != c.end || ok != c.ok {
				t.Errorf("heapRange(%#x, %#x) = %#x, %#x, %v; want %#x, %#x, %v", c.addr, c.n, start, end, ok, c.start, c.end, c.ok)
			}
		})
	}
}

func TestRuns(t *testing.T) {
	for _, c := range []struct {
		vec  []byte
		want [][2]uintptr
	}{
		{nil, nil},
		{[]byte{0, 0, 0}, nil},
		{[]byte{1, 1, 1}, [][2]uintptr{{0x10000, 0x13000}}},
		{[]byte{1, 0, 3, 1, 0, 0, 1}, [][2]uintptr{{0x10000, 0x11000}, {0x12000, 0x14000}, {0x16000, 0x17000}}},
		{[]byte{2, 1}, [][2]uintptr{{0x11000, 0x12000}}}, // only bit 0 says resident
	} {
		if got := runs(c.vec, 0x10000, 0x1000); !reflect.DeepEqual(got, c.want) {
			t.Errorf("runs(%v) = %#x, want %#x", c.vec, got, c.want)
		}
	}
}

func TestPageSize(t *testing.T) {
	pair := func(k, v uint64) []byte {
		b := make([]byte, 16)
		for i := range 8 {
			b[i], b[8+i] = byte(k>>(8*i)), byte(v>>(8*i))
		}
		return b
	}
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	for _, c := range []struct {
		name string
		auxv []byte
		want uintptr
	}{
		{"4 KiB", cat(pair(33, 0x7fff0000), pair(6, 4096), pair(0, 0)), 4096},
		{"64 KiB (arm64 kernels of RHEL and Kylin)", cat(pair(16, 0xff), pair(6, 65536), pair(0, 0)), 65536},
		{"after AT_NULL is not read", cat(pair(0, 0), pair(6, 65536)), 4096},
		{"not a power of two", cat(pair(6, 5000), pair(0, 0)), 4096},
		{"empty", nil, 4096},
		{"cut short", pair(6, 65536)[:12], 4096},
	} {
		if got := pageSize(c.auxv); got != c.want {
			t.Errorf("%s: pageSize = %d, want %d", c.name, got, c.want)
		}
	}
}
