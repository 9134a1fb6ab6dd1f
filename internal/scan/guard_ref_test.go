package scan

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// refGuards is the whole-region guard index the scanner used before the
// lazily built blocks: one pass over all code, then look-ups. It is kept
// here as the reference the blocks must agree with.
type refGuards struct {
	base    uint64
	flagBr  []flagBranch
	targets map[uint64]uint64
	rets    []uint64
	ends    []uint64
}

func newRefGuards(code []byte, base uint64) *refGuards {
	g := &refGuards{base: base, targets: map[uint64]uint64{}}
	for i := 0; i < len(code)/4; i++ {
		w := w32(code, i)
		pc := base + uint64(i)*4
		if endsBlock(w) {
			g.ends = append(g.ends, pc)
			if isRet(w) {
				g.rets = append(g.rets, pc)
			}
			continue
		}
		target, reg, bit, ok := condBranch(w, pc)
		if !ok {
			continue
		}
		if reg < 0 {
			if reg, bit = flagSetter(code, i); reg < 0 {
				continue
			}
		}
		if isFlag(code, i, reg, bit) {
			g.flagBr = append(g.flagBr, flagBranch{pc, target})
			g.targets[target] = pc
		}
	}
	return g
}

func (g *refGuards) guarded(addr uint64) string {
	after := func(list []uint64, a, b uint64) bool {
		k := sort.Search(len(list), func(k int) bool { return list[k] > a })
		return k < len(list) && list[k] < b
	}
	lo := addr - min(addr-g.base, guardBack)
	i := sort.Search(len(g.flagBr), func(i int) bool { return g.flagBr[i].at >= lo })
	for ; i < len(g.flagBr) && g.flagBr[i].at < addr; i++ {
		b := g.flagBr[i]
		switch {
		case b.target > addr && b.target-b.at <= guardReach && !after(g.rets, b.at, addr):
			return fmt.Sprintf("behind the CPU check at 0x%x (a branch on a flag past it)", b.at)
		case b.target <= b.at && !after(g.ends, b.at, addr):
			return fmt.Sprintf("behind the CPU check at 0x%x (a branch on a flag away from it)", b.at)
		}
	}
	k := sort.Search(len(g.ends), func(k int) bool { return g.ends[k] >= addr }) - 1
	if k < 0 {
		return ""
	}
	start := g.ends[k] + 4
	if at, ok := g.targets[start]; ok && absDiff(at, start) <= guardReach {
		return fmt.Sprintf("reached only from the CPU check at 0x%x (a branch on a flag to 0x%x)", at, start)
	}
	return ""
}

// TestGuardBlocksAgree: on real code, for every instruction, the lazily
// built blocks (the scanner's 16 KiB ones, and 16-word ones so that block
// edges fall everywhere) say what the whole-region reference says.
func TestGuardBlocksAgree(t *testing.T) {
	libs := []string{"/usr/aarch64-linux-gnu/lib/libc.so.6", "/usr/aarch64-linux-gnu/lib/libstdc++.so.6"}
	if !testing.Short() {
		libs = append(libs, "/usr/lib/aarch64-linux-gnu/libcrypto.so.3",
			filepath.Join("..", "..", ".cache", "bench", "x", "usr", "lib", "aarch64-linux-gnu", "librocksdb.so.7.8"))
	}
	checked := 0
	for _, lib := range libs {
		f, err := elf.Open(lib)
		if err != nil {
			t.Logf("%s: %v (not checked)", lib, err)
			continue
		}
		text := f.Section(".text")
		code, err := text.Data()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ref := newRefGuards(code, text.Addr)
		blocks := newGuardIndex(code, text.Addr)
		small := newGuardIndexBlocks(code, text.Addr, 16)
		guarded, diffs, more := 0, 0, 0
		for i := 0; i < len(code)/4; i++ {
			addr := text.Addr + uint64(i)*4
			want := ref.guarded(addr)
			if want != "" {
				guarded++
			}
			for _, g := range []*guardIndex{blocks, small} {
				if got := g.guarded(addr); got != want {
					// The blocks name the last flag branch within reach
					// of a block start; the reference only looked at the
					// last one anywhere: the blocks may find one more.
					if want == "" && ref.targets[refStart(ref, addr)] != 0 && strings.HasPrefix(got, "reached only from") {
						more++
						continue
					}
					if diffs++; diffs <= 5 {
						t.Errorf("%s 0x%x (block words %d): got %q, want %q", lib, addr, g.bw, got, want)
					}
				}
			}
		}
		t.Logf("%s: %d instructions, %d guarded, %d differ, %d more found by the blocks", lib, len(code)/4, guarded, diffs, more)
		if guarded == 0 {
			t.Errorf("%s: no guarded instruction at all; the comparison proves nothing", lib)
		}
		checked++
	}
	if checked == 0 {
		t.Skip("no aarch64 libraries installed (scripts/install-deps.sh)")
	}
}

// refStart is the start of the basic block holding addr, as the reference sees it.
func refStart(g *refGuards, addr uint64) uint64 {
	k := sort.Search(len(g.ends), func(k int) bool { return g.ends[k] >= addr }) - 1
	if k < 0 {
		return 0
	}
	return g.ends[k] + 4
}
