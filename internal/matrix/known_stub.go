//go:build dorisarm_genmatrix

package matrix

// Without known_gen.go (while it is generated), every matrix is decoded.

var knownSum [32]byte

func knownMatrix(string) *Matrix { return nil }
