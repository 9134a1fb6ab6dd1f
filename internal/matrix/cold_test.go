package matrix

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const embeddedName = "embedded:matrix.yaml"

// TestKnownMatrixCold measures what a fresh process pays for its first
// matrix.Load of the built-in matrix (code and data not yet in the caches,
// pages not yet faulted in): from the built-in decoded form (known.go), and
// decoded and validated. It runs this test binary anew for each sample,
// logs the medians and asserts the allocation counts.
func TestKnownMatrixCold(t *testing.T) {
	if mode := os.Getenv("MATRIX_COLD"); mode != "" {
		var before, after runtime.MemStats
		var ru0, ru1 syscall.Rusage
		runtime.ReadMemStats(&before)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		start := time.Now()
		var err error
		if mode == "known" {
			_, err = Load(embeddedName)
		} else {
			_, err = parse(embeddedName, embeddedMatrixBytes(t), false)
		}
		d := time.Since(start)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("COLD " + strconv.FormatInt(d.Nanoseconds(), 10) + " " + strconv.FormatUint(after.Mallocs-before.Mallocs, 10) + " " + strconv.FormatInt(ru1.Minflt-ru0.Minflt, 10) + "\n")
		return
	}
	if testing.Short() {
		t.Skip("runs the test binary 62 times")
	}
	sample := func(mode string) (time.Duration, uint64) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKnownMatrixCold$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MATRIX_COLD="+mode)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		_, after, ok := strings.Cut(string(out), "COLD ")
		f := strings.Fields(after)
		if !ok || len(f) < 2 {
			t.Fatalf("%s: no timing in %q", mode, out)
		}
		ns, err1 := strconv.ParseInt(f[0], 10, 64)
		allocs, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: no timing in %q", mode, out)
		}
		return time.Duration(ns), allocs
	}
	const runs = 31
	var known, decoded []time.Duration
	var knownAllocs, decodedAllocs uint64
	for range runs {
		d, a := sample("known")
		known, knownAllocs = append(known, d), a
		d, a = sample("decode")
		decoded, decodedAllocs = append(decoded, d), a
	}
	slices.Sort(known)
	slices.Sort(decoded)
	k, p := known[runs/2], decoded[runs/2]
	t.Logf("first Load of the built-in matrix in a fresh process, median of %d: built-in decoded form %v (%d allocations), decoded and validated %v (%d allocations)", runs, k, knownAllocs, p, decodedAllocs)
	// Timings are only logged (this VM's speed drifts); what is asserted is
	// the work, which does not: the built-in form must allocate far less.
	if knownAllocs*3 > decodedAllocs {
		t.Errorf("the built-in decoded form makes %d allocations, decoding %d: it is not doing less work", knownAllocs, decodedAllocs)
	}
}

// BenchmarkLoadEmbedded is a warm Load of the built-in matrix.
func BenchmarkLoadEmbedded(b *testing.B) {
	for b.Loop() {
		if _, err := Load(embeddedName); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKnownMatrix is building the matrix from known.bin alone (no
// reading, no hashing).
func BenchmarkKnownMatrix(b *testing.B) {
	data := embeddedMatrixBytes(b)
	sum := sha256.Sum256(data)
	for b.Loop() {
		if knownMatrix(embeddedName, sum) == nil {
			b.Fatal("known.bin does not read")
		}
	}
}
