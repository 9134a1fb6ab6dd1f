// Command genknown rewrites internal/matrix/known.bin, the repository's
// matrix.yaml decoded, named and validated, in internal/packed's binary
// form, and known_dec.go, the code that reads it, generated from the types
// (see internal/matrix/known.go). Run it with `go generate ./internal/matrix`.
package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/packed/packgen"
)

// options are those of known_dec.go; TestKnownMatrixFresh uses the same.
var options = packgen.Options{
	Package:   "matrix",
	PkgPath:   "github.com/dorisarm/dorisarm/internal/matrix",
	Prefix:    "known",
	Build:     "!dorisarm_genmatrix",
	Generator: "genknown from the types of internal/matrix",
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "genknown:", err)
		os.Exit(1)
	}
}

func run() error {
	// go generate runs in the package directory, internal/matrix.
	src := filepath.Join("..", "..", matrix.DefaultFile)
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	// Built with dorisarm_genmatrix, Parse decodes and validates.
	m, err := matrix.Parse(src, data)
	if err != nil {
		return fmt.Errorf("%s does not validate; fix it first:\n%w", src, err)
	}
	m.File, m.Digest = "", "" // Parse sets them for the file at hand
	blob, err := packgen.Encode(m, sha256.Sum256(data), src)
	if err != nil {
		return err
	}
	dec, err := packgen.Decoder(reflect.TypeFor[matrix.Matrix](), options)
	if err != nil {
		return err
	}
	if err := os.WriteFile("known.bin", blob, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile("known_dec.go", dec, 0o644); err != nil {
		return err
	}
	fmt.Printf("known.bin: %s (%d bytes) in %d bytes; known_dec.go: %d bytes\n", matrix.DefaultFile, len(data), len(blob), len(dec))
	return nil
}
