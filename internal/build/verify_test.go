package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/plan"
)

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "be", "lib"), 0o755)
	os.WriteFile(filepath.Join(dir, "be", "lib", "doris_be"), []byte("elf"), 0o755)
	outs, err := DigestTree(dir)
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

// TestContentDigest: timings and cache use leave the digest alone; the
// cell, a step key or an output change it. Two targets that share every
// step and output (graviton2, ampere-altra) are still two builds.
func TestContentDigest(t *testing.T) {
	base := func() *Record {
		return &Record{
			Cell:    plan.CellInfo{Doris: "2.1.8", Target: "graviton2"},
			Steps:   []StepRecord{{ID: "build:be", Key: "k1", Seconds: 3}},
			Outputs: []OutputFile{{Path: "be/lib/doris_be", Size: 3, SHA256: "aa"}},
			Seconds: 3,
			Cache:   CacheStats{Misses: []string{"build:be"}},
		}
	}
	d := base().ContentDigest()
	again := base()
	again.Seconds, again.Steps[0].Seconds, again.Steps[0].Cached = 0.1, 0.1, true
	again.Cache = CacheStats{Hits: []string{"build:be"}}
	again.Finished = time.Now()
	if again.ContentDigest() != d {
		t.Error("timings or cache use changed the content digest")
	}
	for what, change := range map[string]func(*Record){
		"target":  func(r *Record) { r.Cell.Target = "ampere-altra" },
		"version": func(r *Record) { r.Cell.Doris = "2.1.7" },
		"step":    func(r *Record) { r.Steps[0].Key = "k2" },
		"output":  func(r *Record) { r.Outputs[0].SHA256 = "bb" },
	} {
		r := base()
		change(r)
		if r.ContentDigest() == d {
			t.Errorf("another %s, the same content digest", what)
		}
	}
}
