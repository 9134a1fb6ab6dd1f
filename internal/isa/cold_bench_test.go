package isa

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

// coldEnv makes the test binary a probe: it times, once, in its fresh
// process, the phases of building the embedded table, prints them and exits.
const coldEnv = "DORISARM_ISA_COLD_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(coldEnv) == "1" {
		coldProbe()
		return
	}
	os.Exit(m.Run())
}

// coldProbe prints "yaml=NS build=NS dispatched=NS": decoding rules.yaml,
// compiling it with the groups into the table, and adding dispatched.yaml.
func coldProbe() {
	t0 := time.Now()
	var f rulesFile
	if err := datafile.Decode("internal/isa/rules.yaml", rulesYAML, &f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	t1 := time.Now()
	t, err := compile("internal/isa/rules.yaml", f, groupsData)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	t2 := time.Now()
	if err := t.LoadDispatched("internal/isa/dispatched.yaml", dispatchedYAML); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	t3 := time.Now()
	fmt.Printf("yaml=%d build=%d dispatched=%d\n", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2))
	os.Exit(0)
}

// BenchmarkColdDefault starts this test binary afresh b.N times (at least
// 15) and reports the median cost of each phase of building the embedded
// table in a new process: build-ns is everything but YAML decoding.
//
//	go test -run XXX -bench ColdDefault ./internal/isa
func BenchmarkColdDefault(b *testing.B) {
	n := max(b.N, 15)
	phases := map[string][]float64{}
	for i := 0; i < n; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), coldEnv+"=1")
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("probe: %v %s", err, out)
		}
		for _, kv := range strings.Fields(string(out)) {
			k, v, ok := strings.Cut(kv, "=")
			ns, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				b.Fatalf("probe printed %q", out)
			}
			phases[k] = append(phases[k], ns)
		}
	}
	for _, k := range []string{"yaml", "build", "dispatched"} {
		v := phases[k]
		if len(v) != n {
			b.Fatalf("phase %s: %d of %d runs reported it", k, len(v), n)
		}
		slices.Sort(v)
		b.ReportMetric(v[len(v)/2], k+"-ns")
	}
	b.ReportMetric(0, "ns/op")
}
