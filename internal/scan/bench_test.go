package scan

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
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

// BenchmarkScanLibrary scans each real library the bench cache holds with
// the kunpeng920 policy, as dorisarm scan --target kunpeng920 does
// (go test -run XXX -bench ScanLibrary ./internal/scan).
func BenchmarkScanLibrary(b *testing.B) {
	dir := filepath.Join("..", "..", ".cache", "bench", "x", "usr", "lib", "aarch64-linux-gnu")
	m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	pol, err := PolicyFor(m, "kunpeng920")
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"librocksdb.so.7.8", "libLLVM-16.so.1", "libz3.so.4"} {
		lib := filepath.Join(dir, name)
		st, err := os.Stat(lib)
		if err != nil {
			b.Logf("%s: not fetched (make bench-scan)", name)
			continue
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(st.Size())
			for i := 0; i < b.N; i++ {
				if _, err := Scan(context.Background(), []string{lib}, pol, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// manySections is tinyELF with n copies of one executable section header
// over its code (the "60,000 copies of one section header" shape).
func manySections(n int) []byte {
	b := tinyELF()
	shoff := uint64(len(b))
	sh := make([]byte, 64)
	binary.LittleEndian.PutUint32(sh[4:], uint32(elf.SHT_PROGBITS))
	binary.LittleEndian.PutUint64(sh[8:], uint64(elf.SHF_ALLOC|elf.SHF_EXECINSTR))
	binary.LittleEndian.PutUint64(sh[16:], 0x100)
	binary.LittleEndian.PutUint64(sh[24:], 0x100)
	binary.LittleEndian.PutUint64(sh[32:], 0x100)
	b = append(b, make([]byte, 64)...) // the null section
	for i := 1; i < n; i++ {
		b = append(b, sh...)
	}
	binary.LittleEndian.PutUint64(b[40:], shoff)
	binary.LittleEndian.PutUint16(b[58:], 64)
	binary.LittleEndian.PutUint16(b[60:], uint16(n))
	return b
}

// BenchmarkHostile: the cost of issue 16's hostile inputs, which must be
// proportional to their size (go test -bench Hostile -benchmem ./internal/scan).
func BenchmarkHostile(b *testing.B) {
	dir := b.TempDir()
	inputs := map[string][]byte{
		"zip-100-entries-one-stream.zip": zipSharedStream(100, append(tinyELF(), make([]byte, 64<<20)...)),
		"elf-60000-section-headers.so":   manySections(60000),
		"tar.gz-256MiB-hollow-member":    hollowMemberTarGz(b, 256<<20),
	}
	for name, data := range inputs {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportMetric(float64(len(data)), "input-bytes")
			for i := 0; i < b.N; i++ {
				r, err := Scan(context.Background(), []string{p}, nil, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					b.ReportMetric(float64(r.Summary.TextBytes), "code-bytes")
				}
			}
		})
	}
}
