package scan

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

const dispatchC = `#include <stdint.h>
#include <stddef.h>
#include <sys/auxv.h>
#include <asm/hwcap.h>
#include <arm_neon.h>

// Chosen by getauxval(AT_HWCAP), as OpenSSL's and zstd's C code does.
__attribute__((target("arch=armv8-a+crypto"), noinline))
static uint64_t fold_pmull(const uint64_t *p, size_t n) {
	uint64_t acc = 0;
	for (size_t i = 0; i < n; i++)
		acc ^= vgetq_lane_u64(vreinterpretq_u64_p128(vmull_p64(p[i], acc | 1)), 0);
	return acc;
}
static uint64_t fold_plain(const uint64_t *p, size_t n) {
	uint64_t acc = 0;
	for (size_t i = 0; i < n; i++)
		acc = acc * 31 + p[i];
	return acc;
}
uint64_t fold(const uint64_t *p, size_t n) {
	if (getauxval(AT_HWCAP) & HWCAP_PMULL)
		return fold_pmull(p, n);
	return fold_plain(p, n);
}

// A flag set once at start-up, tested inline (RocksDB's pmull_runtime_flag).
static int have_aes;
__attribute__((constructor)) static void probe(void) { have_aes = (getauxval(AT_HWCAP) & HWCAP_AES) != 0; }
__attribute__((target("arch=armv8-a+crypto")))
uint8x16_t mix(uint8x16_t a, uint8x16_t k) {
	if (have_aes)
		a = vaeseq_u8(a, k);
	return veorq_u8(a, k);
}

// Not guarded: a length test is not a CPU check.
__attribute__((target("arch=armv8-a+crypto")))
uint8x16_t always(uint8x16_t a, const uint8x16_t *k, size_t n) {
	if (n == 0)
		return a;
	for (size_t i = 0; i < n; i++)
		a = vaeseq_u8(a, k[i]);
	return a;
}
`

// TestGuardShapes: in stripped binaries (no symbol names), feature code
// behind a CPU check — outline atomics, a getauxval(AT_HWCAP) test, a
// start-up flag — is guarded, and the same instructions behind a length
// test are still violations.
func TestGuardShapes(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-strip")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "d.c"), dispatchC)
	write(t, filepath.Join(dir, "atomic.c"), `#include <stdint.h>
int64_t counter;
int64_t bump(void) { return __atomic_fetch_add(&counter, 1, __ATOMIC_ACQ_REL); }
`)
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", "-march=armv8-a", "-shared", "-fPIC", "d.c", "-o", "libd.so")
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", "-march=armv8-a", "-moutline-atomics", "-shared", "-fPIC", "atomic.c", "-o", "libatomic_helpers.so")
	run(t, dir, "aarch64-linux-gnu-strip", "-s", "libd.so", "libatomic_helpers.so")
	pol := policy(t, "generic-armv8")

	r := scan(t, pol, filepath.Join(dir, "libatomic_helpers.so"))
	lse := 0
	for _, f := range findings(r, KindISA) {
		if f.Feature == "lse" {
			lse += f.Count
			if f.Violation() || !f.Guarded {
				t.Errorf("stripped outline atomics: %+v", f)
			}
		}
	}
	if lse == 0 {
		t.Errorf("no LSE found in the outline-atomics helpers: %+v", r.Findings)
	}

	r = scan(t, pol, filepath.Join(dir, "libd.so"))
	var guarded, violations int
	for _, f := range findings(r, KindISA) {
		if f.Feature != "aes" {
			continue
		}
		if f.Violation() {
			violations += f.Count
			if !strings.Contains(f.Function, "always") && !strings.Contains(f.Function, "no symbol") {
				t.Errorf("violation outside always(): %+v", f)
			}
		} else if f.Guarded {
			guarded += f.Count
		}
	}
	// fold_pmull's PMULL and mix's AESE are guarded; always()'s AESE is not.
	if guarded < 2 || violations < 1 {
		t.Errorf("guarded %d, violations %d: %+v", guarded, violations, r.Findings)
	}
	// The violation is always()'s: the exported symbol (dynsym) names it.
	if !hasViolationIn(r, "always") {
		t.Errorf("always() is not the violation: %+v", r.Findings)
	}
}

func hasViolationIn(r *Report, fn string) bool {
	for _, f := range r.Findings {
		if f.Kind == KindISA && f.Violation() && f.Function == fn {
			return true
		}
	}
	return false
}

// callersAsm is a library whose local helper uses LSE (ldadd) and is called
// from one exported function: guarded calls first (a flag byte tested
// just before each), then unguarded ones.
func callersAsm(guarded, unguarded int) string {
	var b strings.Builder
	b.WriteString(".arch armv8.1-a\n.data\nflag: .byte 0\n.text\n")
	b.WriteString(".type helper, %function\nhelper:\n\tmov w3, #1\n\tldadd w3, w1, [x2]\n\tret\n.size helper, .-helper\n")
	b.WriteString(".globl entry\n.type entry, %function\nentry:\n\tstp x29, x30, [sp, #-16]!\n")
	for i := 0; i < guarded; i++ {
		fmt.Fprintf(&b, "\tadrp x16, flag\n\tldrb w16, [x16, :lo12:flag]\n\tcbz w16, .Lskip%d\n\tbl helper\n.Lskip%d:\n", i, i)
	}
	for i := 0; i < unguarded; i++ {
		b.WriteString("\tbl helper\n")
	}
	b.WriteString("\tldp x29, x30, [sp], #16\n\tret\n.size entry, .-entry\n")
	return b.String()
}

// TestCalledOnlyFromGuards: a function reached only by direct calls that
// all sit behind CPU checks is guarded, however many calls there are (5,000
// here, more than are judged at once); one unguarded call among them makes
// its instructions a violation again.
func TestCalledOnlyFromGuards(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc")
	dir := t.TempDir()
	pol := policy(t, "generic-armv8")
	for _, c := range []struct {
		name               string
		guarded, unguarded int
		wantGuarded        bool
	}{
		{"all-guarded", 5000, 0, true},
		{"one-unguarded-after-many", 5000, 1, false},
		{"unguarded-after-64", 64, 36, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(dir, c.name+".S")
			lib := filepath.Join(dir, "lib"+c.name+".so")
			write(t, src, callersAsm(c.guarded, c.unguarded))
			run(t, dir, "aarch64-linux-gnu-gcc", "-shared", "-nostdlib", "-o", lib, src)
			r := scan(t, pol, lib)
			var lse []Finding
			for _, f := range findings(r, KindISA) {
				if f.Feature == "lse" {
					lse = append(lse, f)
				}
			}
			if len(lse) != 1 {
				t.Fatalf("want one lse finding, got %+v", lse)
			}
			f := lse[0]
			if f.Guarded != c.wantGuarded || f.Violation() == c.wantGuarded {
				t.Fatalf("guarded %v, violation %v: %+v", f.Guarded, f.Violation(), f)
			}
			if want := fmt.Sprintf("(%d call(s)", c.guarded); c.wantGuarded && !strings.Contains(f.Detail, want) {
				t.Errorf("detail %q does not say %s", f.Detail, want)
			}
		})
	}
}

// TestJumpInNearestCheck: a block entered only by branches is guarded when
// a flag branch within reach targets its start, even if another flag branch
// to it, further than guardReach, comes later in the code (the whole-region
// index used to look at that last one only).
func TestJumpInNearestCheck(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc")
	dir := t.TempDir()
	far := func(pad int) string {
		return fmt.Sprintf(`.arch armv8.1-a
.data
flag: .byte 0
.text
.globl fc
.type fc, %%function
fc:
	adrp x16, flag
	ldrb w16, [x16, :lo12:flag]
	cbnz w16, tagged
	mov w0, #0
	ret
tagged:
	mov w3, #1
	ldadd w3, w1, [x2]
	ret
.size fc, .-fc
.globl pad
.type pad, %%function
pad:
	.rept %d
	nop
	.endr
	ret
.size pad, .-pad
.globl gc
.type gc, %%function
gc:
	adrp x16, flag
	ldrb w16, [x16, :lo12:flag]
	cbnz w16, tagged
	ret
.size gc, .-gc
`, pad)
	}
	for _, pad := range []int{16, 4096} { // the second check within reach, then far away
		src := filepath.Join(dir, fmt.Sprintf("c%d.S", pad))
		lib := filepath.Join(dir, fmt.Sprintf("libc%d.so", pad))
		write(t, src, far(pad))
		run(t, dir, "aarch64-linux-gnu-gcc", "-shared", "-nostdlib", "-o", lib, src)
		r := scan(t, policy(t, "generic-armv8"), lib)
		for _, f := range findings(r, KindISA) {
			if f.Feature == "lse" && (!f.Guarded || f.Violation() || !strings.Contains(f.Detail, "reached only from the CPU check")) {
				t.Errorf("pad %d: %+v", pad, f)
			}
		}
		if fl := r.Files[0]; fl.Features["lse"] != 1 || fl.Guarded["lse"] != 1 {
			t.Errorf("pad %d: features %v guarded %v", pad, fl.Features, fl.Guarded)
		}
	}
}

const ifuncC = `#include <stdint.h>
#include <sys/auxv.h>
#include <asm/hwcap.h>

int64_t table[4] = {1, 2, 3, 4};
int64_t *ptrs[3] = {&table[0], &table[1], &table[2]}; /* R_AARCH64_RELATIVE, counted by DT_RELACOUNT */

__attribute__((target("arch=armv8.1-a"), noinline))
static int64_t add_lse(int64_t *p, int64_t x) {
	int64_t a = __atomic_fetch_add(p, x, __ATOMIC_SEQ_CST);
	return a * 3 + __atomic_fetch_or(p + 1, a, __ATOMIC_RELAXED);
}
__attribute__((noinline))
static int64_t add_plain(int64_t *p, int64_t x) { int64_t o = *p; *p = o + x; return o; }
static void *resolve(uint64_t hwcap) { return (hwcap & HWCAP_ATOMICS) ? (void *)add_lse : (void *)add_plain; }
static int64_t add(int64_t *, int64_t) __attribute__((ifunc("resolve")));
int64_t bump(int64_t *p) { return add(p, 1); }
`

// TestIfuncVariants: in a stripped library, the LSE variant a local ifunc
// resolver picks (found through the R_AARCH64_IRELATIVE relocation, past
// the relative ones DT_RELACOUNT counts, or with no DT_RELACOUNT at all) is
// runtime-dispatched, not a violation. The library is small: its code sits
// in page 0, which the resolver's ADRP names.
func TestIfuncVariants(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-strip")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "i.c"), ifuncC)
	for _, link := range []string{"-Wl,-z,combreloc", "-Wl,-z,nocombreloc"} {
		lib := filepath.Join(dir, "libi"+strings.TrimPrefix(link, "-Wl,-z,")+".so")
		run(t, dir, "aarch64-linux-gnu-gcc", "-O2", "-march=armv8-a", "-mno-outline-atomics", "-shared", "-fPIC", link, "i.c", "-o", lib)
		run(t, dir, "aarch64-linux-gnu-strip", "-s", lib)
		r := scan(t, policy(t, "generic-armv8"), lib)
		n := 0
		for _, f := range findings(r, KindISA) {
			if f.Feature != "lse" {
				continue
			}
			n += f.Count
			if f.Violation() || !strings.Contains(f.Detail, "runtime-dispatched") {
				t.Errorf("%s: %+v", link, f)
			}
		}
		if n != 2 {
			t.Errorf("%s: %d lse instructions, want 2: %+v", link, n, r.Findings)
		}
	}
}
