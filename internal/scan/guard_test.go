package scan

import (
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
