package matrix

// The matrix dorisarm is built with (matrix.yaml at the repository root)
// is not decoded at run time: known_gen.go holds it decoded, named and
// validated, as Go literals, with the sha256 of the exact bytes it came
// from. Parse uses it only when the bytes it is given hash to that sum, so
// an edited file is decoded and validated as before (its errors, with
// file:line, unchanged) and a stale known_gen.go is never used.
// TestKnownMatrixFresh fails when it is stale; `make generate` (go generate
// ./internal/matrix) rewrites it. The generator builds with the tag
// dorisarm_genmatrix, under which known_gen.go is left out (known_stub.go
// stands in), so that it runs even when the types changed under it.

//go:generate go run -tags dorisarm_genmatrix ./genknown
