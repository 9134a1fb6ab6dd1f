package build

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	rec := &Record{Schema: RecordSchema, Outputs: outs}
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
		"mode":    func(r *Record) { r.Outputs[0].Mode = "0755" },
		"link": func(r *Record) {
			r.Outputs = append(r.Outputs, OutputFile{Path: "be/lib64", Type: TypeLink, Target: "lib"})
		},
		"dir": func(r *Record) {
			r.Outputs = append(r.Outputs, OutputFile{Path: "be/log", Type: TypeDir, Mode: "0755"})
		},
	} {
		r := base()
		change(r)
		if r.ContentDigest() == d {
			t.Errorf("another %s, the same content digest", what)
		}
	}
}

// publishTree writes a published build in a new directory: be/lib/doris_be,
// the link be/lib64 -> lib and its record, as the gate writes them.
func publishTree(t *testing.T) (string, *Record) {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"be/lib/doris_be": "elf", "be/bin/start_be.sh": "#!/bin/sh\n"})
	if err := os.Symlink("lib", filepath.Join(dir, "be", "lib64")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"be", "be/bin", "be/lib", "be/lib/doris_be", "be/bin/start_be.sh"} {
		if err := os.Chmod(filepath.Join(dir, p), 0o755); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	outs, err := DigestTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Schema: RecordSchema, Cell: plan.CellInfo{Doris: "2.1.8", Target: "kunpeng920"}, Outputs: outs}
	if err := rec.write(filepath.Join(dir, RecordFile)); err != nil {
		t.Fatal(err)
	}
	return dir, rec
}

// The record lists links with their targets and directories beside the
// files: each one planted, retargeted, removed or changed in a published
// build after the build is refused by Verify (and so by the up-to-date
// check, dorisarm packages and image build), and changes the content
// digest of a record made from the tree.
func TestVerifyLinksAndDirs(t *testing.T) {
	dir, rec := publishTree(t)
	var kinds []string
	for _, o := range rec.Outputs {
		kinds = append(kinds, o.Path+":"+o.kind())
	}
	if got := strings.Join(kinds, " "); got != "be:directory be/bin:directory be/bin/start_be.sh:file be/lib:directory be/lib/doris_be:file be/lib64:link" {
		t.Errorf("record lists %s", got)
	}
	if l := rec.Outputs[len(rec.Outputs)-1]; l.Target != "lib" || l.SHA256 != "" || l.Mode != "" {
		t.Errorf("the link's entry: %+v", l)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatalf("a fresh build does not verify: %v", err)
	}
	digest := rec.ContentDigest()
	for _, c := range []struct {
		name   string
		change func(dir string) error
		want   string
	}{
		{"planted link", func(d string) error { return os.Symlink("/etc/shadow", filepath.Join(d, "be", "lib", "libplanted.so")) },
			"be/lib/libplanted.so (a link to /etc/shadow) is not in the build record"},
		{"retargeted link", func(d string) error {
			os.Remove(filepath.Join(d, "be", "lib64"))
			return os.Symlink("/usr/lib", filepath.Join(d, "be", "lib64"))
		}, "be/lib64 points to /usr/lib, the build record says lib"},
		{"removed link", func(d string) error { return os.Remove(filepath.Join(d, "be", "lib64")) }, "be/lib64 -> lib is in the build record but missing"},
		{"link for a file", func(d string) error {
			os.Remove(filepath.Join(d, "be", "lib", "doris_be"))
			return os.Symlink("/tmp/doris_be", filepath.Join(d, "be", "lib", "doris_be"))
		}, "be/lib/doris_be -> /tmp/doris_be is a link, the build record says a file"},
		{"added empty directory", func(d string) error { return os.Mkdir(filepath.Join(d, "be", "conf.d"), 0o755) },
			"be/conf.d (a directory) is not in the build record"},
		{"file made executable", func(d string) error { return os.Chmod(filepath.Join(d, "be", "lib", "doris_be"), 0o777) },
			"be/lib/doris_be has mode 0777, the build record says 0755"},
		{"directory opened to all", func(d string) error { return os.Chmod(filepath.Join(d, "be", "bin"), 0o777) },
			"be/bin/ has mode 0777, the build record says 0755"},
		{"pipe", func(d string) error { return syscall.Mkfifo(filepath.Join(d, "be", "pipe"), 0o644) },
			"be/pipe is a named pipe: a build's output holds files, directories and links only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, _ := publishTree(t)
			if err := c.change(d); err != nil {
				t.Fatal(err)
			}
			_, err := Verify(d)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Verify: %v, want %q", err, c.want)
			}
			// A record made from the changed tree is another build.
			outs, err := DigestTree(d)
			if err != nil {
				return // the pipe: no record can be made of it
			}
			changed := *rec
			changed.Outputs = outs
			if changed.ContentDigest() == digest {
				t.Error("the content digest does not change")
			}
		})
	}
}

// The up-to-date check reads the published build through Verify: a link
// planted there makes the build run again, not count as current.
func TestUpToDateSeesLinks(t *testing.T) {
	dir, rec := publishTree(t)
	rec.Steps = []StepRecord{{ID: "build:be", Key: "k1"}, {ID: "scan"}}
	if err := rec.write(filepath.Join(dir, RecordFile)); err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{Steps: []plan.Step{{ID: "build:be", Key: "k1"}, {ID: "scan"}}}
	if _, ok := upToDate(p, dir); !ok {
		t.Fatal("a fresh build is not up to date")
	}
	if err := os.Symlink("/etc/shadow", filepath.Join(dir, "be", "lib", "libplanted.so")); err != nil {
		t.Fatal(err)
	}
	if _, ok := upToDate(p, dir); ok {
		t.Error("a build with a planted link is up to date")
	}
}

// A schema 1 record (an older dorisarm's) lists regular files only: it
// still verifies a tree of those files and their directories, refuses a
// link or an empty directory (it cannot vouch for them) and keeps its
// content digest.
func TestVerifySchema1Record(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"be/lib/doris_be": "elf"})
	old := `{"schema": 1, "cell": {"doris": "2.1.8", "target": "kunpeng920"}, "steps": [{"id": "build:be", "key": "k1"}],
		"outputs": [{"path": "be/lib/doris_be", "size": 3, "sha256": "` + sum("elf") + `"}]}`
	if err := os.WriteFile(filepath.Join(dir, RecordFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := Verify(dir)
	if err != nil {
		t.Fatalf("an old record of an unchanged tree: %v", err)
	}
	want := sha256.Sum256([]byte("cell 2.1.8 kunpeng920\nstep build:be k1\nfile be/lib/doris_be 3 " + sum("elf") + "\n"))
	if got := rec.ContentDigest(); got != "sha256:"+hex.EncodeToString(want[:]) {
		t.Errorf("an old record's content digest changed: %s", got)
	}
	for _, c := range []struct {
		change func() error
		want   string
	}{
		{func() error { return os.Symlink("doris_be", filepath.Join(dir, "be", "lib", "alias")) },
			"be/lib/alias (a link to doris_be) is not in the build record (a schema 1 record, from an older dorisarm, lists regular files only)"},
		{func() error { return os.Mkdir(filepath.Join(dir, "be", "empty"), 0o755) }, "be/empty (a directory) is not in the build record (a schema 1"},
		{func() error { return os.WriteFile(filepath.Join(dir, "be", "lib", "doris_be"), []byte("elg"), 0o755) }, "be/lib/doris_be changed since it was built"},
	} {
		if err := c.change(); err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Verify: %v, want %q", err, c.want)
		}
		os.Remove(filepath.Join(dir, "be", "lib", "alias"))
		os.Remove(filepath.Join(dir, "be", "empty"))
		os.WriteFile(filepath.Join(dir, "be", "lib", "doris_be"), []byte("elf"), 0o755)
	}
}

// A record that lists an entry of no known type is refused, not read as a file.
func TestVerifyUnknownType(t *testing.T) {
	dir, rec := publishTree(t)
	rec.Outputs = append(rec.Outputs, OutputFile{Path: "be/dev", Type: "device"})
	if err := rec.write(filepath.Join(dir, RecordFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), `lists be/dev as a "device"`) {
		t.Errorf("Verify: %v", err)
	}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
