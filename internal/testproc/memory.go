package testproc

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Resident returns the Rss, in kB, of this process's mapping that starts at
// start, from /proc/self/smaps; it skips the test where there is none.
func Resident(t testing.TB, start uintptr) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if lo, _, ok := strings.Cut(f[0], "-"); ok && len(f) >= 5 {
			s, err := strconv.ParseUint(lo, 16, 64)
			in = err == nil && uintptr(s) == start
			continue
		}
		if in && len(f) == 3 && f[0] == "Rss:" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("smaps: %q", l)
			}
			return n
		}
	}
	t.Fatalf("no mapping at %#x in /proc/self/smaps", start)
	return 0
}
