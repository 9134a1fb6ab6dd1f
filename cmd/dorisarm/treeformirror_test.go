package main

import (
	"crypto/md5"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/tree-for-mirror.sh writes a substitute archive's MD5 into a copy
// of the tree for every entry naming it, leaves matching and unnamed
// archives alone, never touches the source tree and refuses bad input.
func TestTreeForMirror(t *testing.T) {
	dir := t.TempDir()
	src, mirror := filepath.Join(dir, "src"), filepath.Join(dir, "mirror")
	os.MkdirAll(filepath.Join(src, "thirdparty"), 0o755)
	os.MkdirAll(mirror, 0o755)
	sum := func(b string) string { s := md5.Sum([]byte(b)); return hex.EncodeToString(s[:]) }
	vars := "JEMALLOC_DORIS_NAME=\"jemalloc-5.3.0.tar.bz2\"\nJEMALLOC_DORIS_MD5SUM=\"09a8328574dab22a7df848eae6dbbf53\"\n" +
		"JEMALLOC_ARROW_NAME=jemalloc-5.3.0.tar.bz2\nJEMALLOC_ARROW_MD5SUM='09a8328574dab22a7df848eae6dbbf53'\n" +
		"ZLIB_NAME=zlib-1.2.11.tar.gz\nZLIB_MD5SUM=\"" + sum("zlib") + "\"\n" +
		"LZ4_NAME=lz4-1.9.4.tar.gz\nLZ4_MD5SUM=\"00\"\n"
	os.WriteFile(filepath.Join(src, "thirdparty", "vars.sh"), []byte(vars), 0o644)
	os.WriteFile(filepath.Join(mirror, "jemalloc-5.3.0.tar.bz2"), []byte("jemalloc"), 0o644)
	os.WriteFile(filepath.Join(mirror, "zlib-1.2.11.tar.gz"), []byte("zlib"), 0o644)
	os.WriteFile(filepath.Join(mirror, "jemalloc-5X3.0.tar.bz2"), []byte("not named"), 0o644)
	dest := filepath.Join(dir, "dest")
	out, err := exec.Command("bash", filepath.Join(repo, "scripts/tree-for-mirror.sh"), src, dest, mirror).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got, _ := os.ReadFile(filepath.Join(dest, "thirdparty", "vars.sh"))
	want := strings.NewReplacer("JEMALLOC_DORIS_MD5SUM=\"09a8328574dab22a7df848eae6dbbf53\"", "JEMALLOC_DORIS_MD5SUM=\""+sum("jemalloc")+"\"",
		"JEMALLOC_ARROW_MD5SUM='09a8328574dab22a7df848eae6dbbf53'", "JEMALLOC_ARROW_MD5SUM=\""+sum("jemalloc")+"\"").Replace(vars)
	if string(got) != want {
		t.Errorf("vars.sh:\n%s\nwant:\n%s", got, want)
	}
	if n := strings.Count(string(out), " -> "); n != 2 {
		t.Errorf("printed %d changes, want 2 (both jemalloc entries):\n%s", n, out)
	}
	if orig, _ := os.ReadFile(filepath.Join(src, "thirdparty", "vars.sh")); string(orig) != vars {
		t.Error("the source tree changed")
	}
	for name, args := range map[string][]string{
		"dest exists": {src, dest, mirror},
		"no tree":     {mirror, filepath.Join(dir, "d2"), mirror},
		"no mirror":   {src, filepath.Join(dir, "d3"), filepath.Join(dir, "nothing")},
	} {
		c := exec.Command("bash", append([]string{filepath.Join(repo, "scripts/tree-for-mirror.sh")}, args...)...)
		if out, err := c.CombinedOutput(); c.ProcessState == nil || c.ProcessState.ExitCode() != 2 {
			t.Errorf("%s: %v, want exit 2\n%s", name, err, out)
		}
	}
}
