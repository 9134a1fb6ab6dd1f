package matrix

import (
	"crypto/sha256"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm"
	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/packed/packgen"
)

func embeddedMatrixBytes(t testing.TB) []byte {
	t.Helper()
	data, err := dorisarm.Data().(interface{ ReadFile(string) ([]byte, error) }).ReadFile(DefaultFile)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// knownOptions are genknown's (internal/matrix/genknown).
var knownOptions = packgen.Options{
	Package:   "matrix",
	PkgPath:   "github.com/dorisarm/dorisarm/internal/matrix",
	Prefix:    "known",
	Build:     "!dorisarm_genmatrix",
	Generator: "genknown from the types of internal/matrix",
}

const regenerate = "run `make generate` (go generate ./internal/matrix) and commit known.bin and known_dec.go"

// TestKnownMatrixFresh: known.bin holds the matrix dorisarm is built with
// (else Parse decodes it, correctly but at a cost every run pays), in the
// form packgen writes it now, and known_dec.go is the decoder packgen
// generates now from the types of this package.
func TestKnownMatrixFresh(t *testing.T) {
	data := embeddedMatrixBytes(t)
	sum := sha256.Sum256(data)
	if !strings.HasPrefix(knownBlob, string(sum[:])) {
		t.Fatal("internal/matrix/known.bin is out of date with matrix.yaml: " + regenerate)
	}
	if knownLayout != packgen.Layout(reflect.TypeFor[Matrix]()) {
		t.Fatal("internal/matrix/known_dec.go is out of date with the types of the matrix: " + regenerate)
	}
	m, err := parse(DefaultFile, data, false)
	if err != nil {
		t.Fatal(err)
	}
	m.File, m.Digest = "", ""
	blob, err := packgen.Encode(m, sum, DefaultFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(blob) != knownBlob {
		t.Error("internal/matrix/known.bin is not what packgen writes now: " + regenerate)
	}
	dec, err := packgen.Decoder(reflect.TypeFor[Matrix](), knownOptions)
	if err != nil {
		t.Fatal(err)
	}
	if have, err := os.ReadFile("known_dec.go"); err != nil || string(have) != string(dec) {
		t.Errorf("internal/matrix/known_dec.go is not what packgen generates now (%v): %s", err, regenerate)
	}
}

// TestKnownMatrixIsDecoded: what Parse builds from known.bin is what
// decoding, naming and validating the same bytes gives, for any file name;
// the embedded data passes the full validation (which the known matrix
// skips).
func TestKnownMatrixIsDecoded(t *testing.T) {
	data := embeddedMatrixBytes(t)
	for _, file := range []string{"embedded:matrix.yaml", "/some/checkout/matrix.yaml"} {
		slow, err := parse(file, data, false)
		if err != nil {
			t.Fatalf("the embedded matrix does not validate:\n%v", err)
		}
		fast, err := parse(file, data, true)
		if err != nil {
			t.Fatal(err)
		}
		if knownMatrix(file, sha256.Sum256(data)) == nil {
			t.Fatal("known.bin does not read in this build: " + regenerate)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s: the known matrix differs from the decoded one: run `make generate`", file)
		}
		if fast.Targets["kunpeng920"].Pos.File != file || fast.File != file {
			t.Errorf("%s: positions name %q", file, fast.Targets["kunpeng920"].Pos.File)
		}
		if fast.Targets["kunpeng920"].Keys["cpu"].File != file || fast.CPUs["tsv110"].Mcpu["gcc"].Pos.File != file {
			t.Errorf("%s: key positions name another file", file)
		}
		// Each call builds its own matrix: callers may change theirs.
		again, _ := Parse(file, data)
		if again == fast || again.Targets["kunpeng920"] == fast.Targets["kunpeng920"] {
			t.Errorf("%s: Parse returned shared values", file)
		}
		again.CPUs["tsv110"].Extensions[0] = "changed"
		again.Targets["kunpeng920"].Keys["cpu"] = datafile.Pos{}
		again.OSes["kylin-v10-sp1"].Sysroot["aarch64"] = "changed"
		again.CPUs["tsv110"].Mcpu["gcc"].Name = "changed"
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s: changing one matrix Parse returned changed another", file)
		}
		// Slices share one array within a matrix: append must not write
		// into the next one.
		for name, c := range fast.CPUs {
			if cap(c.Extensions) != len(c.Extensions) {
				t.Errorf("%s: cpus.%s.extensions has room to append into its neighbour", file, name)
			}
		}
	}
}

// Bytes other than the known ones are decoded and validated as before:
// one changed byte that breaks a reference is reported at its line.
func TestKnownMatrixOnlyForItsBytes(t *testing.T) {
	data := string(embeddedMatrixBytes(t))
	i := strings.Index(data, "cpu: tsv110")
	if i < 0 {
		t.Fatal("matrix.yaml has no target on cpu tsv110")
	}
	bad := data[:i] + "cpu: tsv111" + data[i+len("cpu: tsv110"):]
	line := strings.Count(data[:i], "\n") + 1
	_, err := Parse("matrix.yaml", []byte(bad))
	if err == nil {
		t.Fatal("a target on an unknown cpu was accepted")
	}
	var l datafile.List
	if !strings.Contains(err.Error(), `unknown cpu "tsv111"`) || !asList(err, &l) || l[0].Pos.Line != line || l[0].Pos.File != "matrix.yaml" {
		t.Errorf("error %v, want unknown cpu at matrix.yaml:%d", err, line)
	}
}

func asList(err error, l *datafile.List) bool {
	x, ok := err.(datafile.List)
	*l = x
	return ok && len(x) > 0
}
