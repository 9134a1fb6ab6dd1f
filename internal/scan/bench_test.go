package scan

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkScanFile scans a large real library when the bench cache has it
// (make bench-scan fetches it): libLLVM-16 for arm64, ~47 MB of .text.
func BenchmarkScanFile(b *testing.B) {
	lib := filepath.Join("..", "..", ".cache", "bench", "x", "usr", "lib", "aarch64-linux-gnu", "libLLVM-16.so.1")
	st, err := os.Stat(lib)
	if err != nil {
		b.Skip("run make bench-scan first to fetch libLLVM-16 (arm64)")
	}
	b.SetBytes(st.Size())
	for i := 0; i < b.N; i++ {
		if _, err := Scan(context.Background(), []string{lib}, nil, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
