package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "be", "lib"), 0o755)
	os.WriteFile(filepath.Join(dir, "be", "lib", "doris_be"), []byte("elf"), 0o755)
	outs, err := digestTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Schema: 1, Outputs: outs}
	if err := rec.write(filepath.Join(dir, RecordFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatalf("a fresh build does not verify: %v", err)
	}
	for _, c := range []struct {
		change func()
		want   string
	}{
		{func() { os.WriteFile(filepath.Join(dir, "be", "lib", "doris_be"), []byte("elf2"), 0o755) }, "be/lib/doris_be changed since it was built"},
		{func() { os.WriteFile(filepath.Join(dir, "be", "extra"), nil, 0o644) }, "be/extra is not in the build record"},
		{func() { os.Remove(filepath.Join(dir, "be", "lib", "doris_be")) }, "be/lib/doris_be is in the build record but missing"},
		{func() { os.Remove(filepath.Join(dir, RecordFile)) }, "has no build record"},
	} {
		c.change()
		if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Verify: %v, want %q", err, c.want)
		}
		os.Remove(filepath.Join(dir, "be", "extra"))
		os.WriteFile(filepath.Join(dir, "be", "lib", "doris_be"), []byte("elf"), 0o755)
		rec.write(filepath.Join(dir, RecordFile))
	}
}
