package matrix

import (
	"crypto/sha256"
	"reflect"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm"
	"github.com/dorisarm/dorisarm/internal/datafile"
)

func embeddedMatrixBytes(t *testing.T) []byte {
	t.Helper()
	data, err := dorisarm.Data().(interface{ ReadFile(string) ([]byte, error) }).ReadFile(DefaultFile)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestKnownMatrixFresh: known_gen.go holds the matrix dorisarm is built
// with (else Parse decodes it, correctly but at a cost every run pays).
func TestKnownMatrixFresh(t *testing.T) {
	if sha256.Sum256(embeddedMatrixBytes(t)) != knownSum {
		t.Fatal("internal/matrix/known_gen.go is out of date with matrix.yaml: run `make generate` (go generate ./internal/matrix) and commit it")
	}
}

// TestKnownMatrixIsDecoded: what Parse builds from known_gen.go is what
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
		if knownMatrix(file) == nil {
			t.Fatal("no known matrix in this build")
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s: the known matrix differs from the decoded one: run `make generate`", file)
		}
		if fast.Targets["kunpeng920"].Pos.File != file || fast.File != file {
			t.Errorf("%s: positions name %q", file, fast.Targets["kunpeng920"].Pos.File)
		}
		// Each call builds its own matrix: callers may change theirs.
		again, _ := Parse(file, data)
		if again == fast || again.Targets["kunpeng920"] == fast.Targets["kunpeng920"] {
			t.Errorf("%s: Parse returned shared values", file)
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
