package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUTableFresh: with the compilers cpus.yaml was made from installed
// (the same --version banners), asking them again gives the same bytes.
// It asks each compiler about every CPU it knows (about 15 s).
func TestCPUTableFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("asks two compilers about 130 CPUs; not in -short")
	}
	want, err := os.ReadFile(filepath.Join("..", "cpus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cc := range []string{"aarch64-linux-gnu-gcc", "clang-16"} {
		if _, err := exec.LookPath(cc); err != nil {
			t.Skipf("%s is not installed (make deps installs it)", cc)
		}
		b, err := banner(cc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(want, []byte(`"`+b+`"`)) {
			t.Skipf("installed %s is %q, not the version cpus.yaml was made from", cc, b)
		}
	}
	got, err := Generate("aarch64-linux-gnu-gcc", "clang-16")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("internal/flagrec/cpus.yaml is not what the installed compilers say; run go run ./internal/flagrec/gencpus, then make generate\n%s", firstDiff(string(want), string(got)))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return "committed: " + al[i] + "\ncompilers: " + bl[i]
		}
	}
	return "one is longer"
}
