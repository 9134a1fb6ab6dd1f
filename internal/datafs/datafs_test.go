package datafs_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm"
	. "github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/recipe"
)

const repo = "../.."

func TestNames(t *testing.T) {
	if got := Join("embedded:recipes", "../examples/minidoris/patches"); got != "embedded:examples/minidoris/patches" {
		t.Errorf("Join: %s", got)
	}
	if got := Dir("embedded:recipes/doris.yaml"); got != "embedded:recipes" {
		t.Errorf("Dir: %s", got)
	}
	if _, err := ReadFile("embedded:../go.mod"); err == nil || !strings.Contains(err.Error(), "embedded:../go.mod") {
		t.Errorf("a name outside the data: %v", err)
	}
	if _, err := ReadFile("embedded:recipes/none.yaml"); err == nil || !strings.Contains(err.Error(), "embedded:recipes/none.yaml") {
		t.Errorf("a missing file: %v", err)
	}
	m, err := Glob("embedded:recipes/*.yaml")
	if err != nil || len(m) == 0 || !IsEmbedded(m[0]) {
		t.Errorf("Glob: %v %v", m, err)
	}
}

// A built-in recipe resolves its relative paths in the built-in data, and
// errors in built-in files still say file:line.
func TestBuiltInRecipeAndErrors(t *testing.T) {
	r, err := recipe.Load(Embedded("recipes/minidoris.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Path(r.Patches); got != "embedded:examples/minidoris/patches" {
		t.Errorf("patches: %s", got)
	}
	if got := r.Path(r.ScanAllow); got != "embedded:recipes/minidoris-scan-allow.yaml" {
		t.Errorf("scan_allow: %s", got)
	}
	if _, err := matrix.Parse("embedded:matrix.yaml", []byte("targets: [1\n")); err == nil || !strings.Contains(err.Error(), "embedded:matrix.yaml:") {
		t.Errorf("a parse error names no file:line: %v", err)
	}
}

func TestSeriesDigestIsTheSameOnDisk(t *testing.T) {
	for _, d := range dorisarm.PatchDirs {
		a, n, err := SeriesDigest(Embedded(d))
		if err != nil || n == 0 {
			t.Fatalf("%s: %v %d", d, err, n)
		}
		b, m, err := SeriesDigest(filepath.Join(repo, d))
		if err != nil || a != b || n != m {
			t.Errorf("%s: embedded %s (%d), disk %s (%d), %v", d, a, n, b, m, err)
		}
	}
}

// WriteTree writes the sample with the checkout's contents and executable
// bits, once.
func TestWriteTree(t *testing.T) {
	cache := t.TempDir()
	dir, err := WriteTree(dorisarm.Sample, cache)
	if err != nil {
		t.Fatal(err)
	}
	exec := map[string]bool{}
	for _, e := range dorisarm.Executables {
		exec[e] = true
	}
	n := 0
	err = fs.WalkDir(dorisarm.Data(), dorisarm.Sample, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		out := filepath.Join(dir, strings.TrimPrefix(p, dorisarm.Sample+"/"))
		st, err := os.Stat(out)
		if err != nil {
			return err
		}
		got, _ := os.ReadFile(out)
		want, _ := os.ReadFile(filepath.Join(repo, p))
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the checkout's", out)
		}
		repoSt, _ := os.Stat(filepath.Join(repo, p))
		if (st.Mode()&0o111 != 0) != exec[p] || (repoSt.Mode()&0o111 != 0) != exec[p] {
			t.Errorf("%s: mode %v, the checkout's %v", out, st.Mode(), repoSt.Mode())
		}
		return nil
	})
	if err != nil || n < 20 {
		t.Fatalf("%d files: %v", n, err)
	}
	again, err := WriteTree(dorisarm.Sample, cache)
	if err != nil || again != dir {
		t.Errorf("second WriteTree: %s %v, want %s", again, err, dir)
	}
	ents, _ := os.ReadDir(filepath.Dir(dir))
	if len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
}
