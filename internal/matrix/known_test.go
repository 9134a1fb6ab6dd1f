package matrix

import (
	"crypto/sha256"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm"
	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/packed"
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

// A known.bin that does not read cleanly is never trusted: Parse decodes
// and validates the bytes instead, and gives the same matrix.
func TestKnownMatrixDamaged(t *testing.T) {
	data := embeddedMatrixBytes(t)
	sum := sha256.Sum256(data)
	want, err := parse(DefaultFile, data, false)
	if err != nil {
		t.Fatal(err)
	}
	good := knownBlob
	t.Cleanup(func() { knownBlob = good })
	withBlob := func(name, b string) {
		t.Helper()
		knownBlob = b
		if knownMatrix(DefaultFile, sum) != nil {
			t.Errorf("%s: known.bin was used", name)
		}
		m, err := Parse(DefaultFile, data)
		if err != nil || !reflect.DeepEqual(m, want) {
			t.Errorf("%s: Parse did not fall back to decoding: %v", name, err)
		}
	}
	if knownMatrix(DefaultFile, sum) == nil {
		t.Fatal("known.bin does not read: " + regenerate)
	}
	// The header: the digest, the format's version, the layout.
	flip := func(i int) string {
		b := []byte(good)
		b[i] ^= 0x01
		return string(b)
	}
	withBlob("another digest", flip(0))
	withBlob("another version", flip(packed.SumSize))
	withBlob("another layout", flip(packed.SumSize+2))
	withBlob("trailing bytes", good+"\x00")
	withBlob("empty", "")
	// A length beyond the end: the first map of the value (isas) made huge.
	i := packed.SumSize + 1 + 1 + len(knownLayout) // version, layout
	for good[i] >= 0x80 {                          // the pool size
		i++
	}
	i += 2 // the pool size's last byte, then the schema (an int < 64)
	if int(good[i]) != len(want.ISAs)+1 {
		t.Fatalf("byte %d is not the length of isas", i)
	}
	huge := good[:i] + "\xff\xff\xff\xff\x0f" + good[i+1:]
	withBlob("a length beyond the end", huge)
	// Truncated anywhere.
	for n := 0; n < len(good); n += 1 + n/64 {
		knownBlob = good[:n]
		if knownMatrix(DefaultFile, sum) != nil {
			t.Errorf("known.bin cut to %d bytes was used", n)
		}
	}
	// Any byte of it changed: never a panic (the matrix may read cleanly:
	// a changed letter in a string is still a string).
	for n := packed.SumSize; n < len(good); n++ {
		knownBlob = good[:n] + "\xff" + good[n+1:]
		knownMatrix(DefaultFile, sum)
	}
}

// known_dec.go is code about types: the only literals in it are its
// imports and the layout's digest, no value of matrix.yaml.
func TestKnownDecoderHoldsNoFacts(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "known_dec.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]bool{}
	for _, im := range f.Imports {
		imports[im.Path.Value] = true
	}
	lits := 0
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok {
			return true
		}
		lits++
		if !imports[lit.Value] && lit.Value != strconv.Quote(knownLayout) {
			t.Errorf("known_dec.go holds the literal %s: data belongs in known.bin", lit.Value)
		}
		return true
	})
	if lits == 0 {
		t.Error("no literal found at all: is this the generated file?")
	}
}
