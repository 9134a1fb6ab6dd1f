package matrix

import (
	_ "embed"

	"github.com/dorisarm/dorisarm/internal/packed"
)

// The matrix dorisarm is built with (matrix.yaml at the repository root)
// is not decoded at run time: known.bin holds it decoded, named and
// validated, in internal/packed's binary form, with the sha256 of the
// exact bytes it came from; known_dec.go, generated from the types of this
// package, reads it (it holds no fact, only which field comes next).
// Parse uses it only when the bytes it is given hash to that sum and the
// blob reads cleanly to its end, so an edited file is decoded and validated
// as before (its errors, with file:line, unchanged) and a stale or damaged
// known.bin is never used. TestKnownMatrixFresh fails when they are stale;
// `make generate` (go generate ./internal/matrix) rewrites both. The
// generator builds with the tag dorisarm_genmatrix, under which
// known_dec.go is left out (known_stub.go stands in), so that it runs even
// when the types changed under it.

//go:generate go run -tags dorisarm_genmatrix ./genknown

//go:embed known.bin
var knownBlob string

// knownMatrix returns the matrix known.bin holds, its positions in file,
// when known.bin was made from bytes with the digest sum and reads cleanly;
// else nil. Each call builds a new Matrix (strings aside, nothing shared).
func knownMatrix(file string, sum [32]byte) *Matrix {
	r := packed.Open(knownBlob, sum, knownLayout, file)
	if r == nil {
		return nil
	}
	m := new(Matrix)
	knownRead(r, m)
	if r.Err() != nil {
		return nil
	}
	return m
}
