package isa

import "testing"

// BenchmarkLoad: building the embedded table, which every scan pays once.
func BenchmarkLoad(b *testing.B) {
	for i := 0; i < b.N; i++ {
		mustLoad()
	}
}
