package datafile_test

import (
	"bytes"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

// parsed returns data changed so that no snapshot matches it but nothing
// it decodes to, positions included: a comment after the last line.
func parsed(data []byte) []byte { return append(bytes.Clone(data), "\n# not in any snapshot\n"...) }

func readMatrix(t testing.TB) []byte {
	data, err := os.ReadFile("../../matrix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The matrix from its snapshot is the matrix from parsing it, every Pos and
// Keys included.
func TestSnapshotDecodesAsParsed(t *testing.T) {
	data := readMatrix(t)
	fast, err := matrix.Parse("embedded:matrix.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := matrix.Parse("embedded:matrix.yaml", parsed(data))
	if err != nil {
		t.Fatal(err)
	}
	if fast.Digest == slow.Digest {
		t.Fatal("the two inputs are the same bytes")
	}
	slow.Digest = fast.Digest
	if !reflect.DeepEqual(fast, slow) {
		t.Error("the matrix decoded from the snapshot differs from the parsed one")
	}
	k := fast.Targets["kunpeng920"]
	if k == nil || k.Pos.File != "embedded:matrix.yaml" || k.Pos.Line == 0 || k.Keys["cpu"].Line <= k.Pos.Line {
		t.Errorf("kunpeng920's positions: %+v %+v", k.Pos, k.Keys["cpu"])
	}
}

// An edited matrix is parsed: the edit shows, and is where the file says.
func TestSnapshotFallsBackWhenEdited(t *testing.T) {
	data := readMatrix(t)
	m, err := matrix.Parse("matrix.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	k := m.Targets["kunpeng920"]
	old := "description: " + strconv.Quote(k.Description)
	line := k.Keys["description"].Line
	lines := strings.Split(string(data), "\n")
	if !strings.Contains(lines[line-1], "description:") {
		t.Fatalf("matrix.yaml:%d is not kunpeng920's description: %q (%s)", line, lines[line-1], old)
	}
	lines[line-1] = lines[line-1][:strings.Index(lines[line-1], "description:")] + "description: edited by the test"
	m2, err := matrix.Parse("matrix.yaml", []byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.Targets["kunpeng920"].Description; got != "edited by the test" {
		t.Errorf("the edit is not seen: description %q (a stale snapshot?)", got)
	}
	if got := m2.Targets["kunpeng920"].Keys["description"].Line; got != line {
		t.Errorf("the edited description is at line %d, want %d", got, line)
	}
}

// Errors from a snapshot's tree say file:line:col as the parsed ones do.
func TestSnapshotErrorsKeepPositions(t *testing.T) {
	data := readMatrix(t)
	type narrow struct { // knows fewer keys than matrix.yaml has
		Schema  int            `yaml:"schema"`
		Targets map[string]any `yaml:"targets"`
	}
	var a, b narrow
	errA := datafile.Decode("embedded:matrix.yaml", data, &a)
	errB := datafile.Decode("embedded:matrix.yaml", parsed(data), &b)
	if errA == nil || errB == nil {
		t.Fatalf("no errors: %v / %v", errA, errB)
	}
	if errA.Error() != errB.Error() {
		t.Errorf("snapshot errors:\n%v\nparsed errors:\n%v", errA, errB)
	}
	first := strings.SplitN(errA.Error(), "\n", 2)[0]
	if !strings.HasPrefix(first, "embedded:matrix.yaml:") || !strings.Contains(first, "unknown key") {
		t.Errorf("first error %q names no file:line", first)
	}
	var l datafile.List
	if !asList(errA, &l) || l[0].Pos.Line == 0 || l[0].Pos.Col == 0 {
		t.Errorf("no position in %#v", errA)
	}
}

func asList(err error, l *datafile.List) bool {
	v, ok := err.(datafile.List)
	*l = v
	return ok && len(v) > 0
}

// TestSnapshotColdDecode measures what a fresh process pays for its first
// decode of matrix.yaml (code and data not yet in the caches): from the
// snapshot, and parsed. It runs this test binary anew for each sample.
func TestSnapshotColdDecode(t *testing.T) {
	if mode := os.Getenv("DATAFILE_COLD"); mode != "" {
		data := readMatrix(t)
		if mode == "parse" {
			data = parsed(data)
		}
		start := time.Now()
		var m matrix.Matrix
		if err := datafile.Decode("matrix.yaml", data, &m); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("COLD " + strconv.FormatInt(time.Since(start).Nanoseconds(), 10) + "\n")
		return
	}
	if testing.Short() {
		t.Skip("runs the test binary 18 times")
	}
	sample := func(mode string) time.Duration {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSnapshotColdDecode$", "-test.count=1")
		cmd.Env = append(os.Environ(), "DATAFILE_COLD="+mode)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		_, after, ok := strings.Cut(string(out), "COLD ")
		ns, err := strconv.ParseInt(strings.Fields(after)[0], 10, 64)
		if !ok || err != nil {
			t.Fatalf("%s: no timing in %q", mode, out)
		}
		return time.Duration(ns)
	}
	var snap, parse []time.Duration
	for range 9 {
		snap = append(snap, sample("snapshot"))
		parse = append(parse, sample("parse"))
	}
	slices.Sort(snap)
	slices.Sort(parse)
	s, p := snap[len(snap)/2], parse[len(parse)/2]
	t.Logf("first decode of matrix.yaml in a fresh process, median of 9: from the snapshot %v, parsed %v", s, p)
	if s*2 > p {
		t.Errorf("the snapshot is not clearly faster cold: %v against %v parsed", s, p)
	}
}
