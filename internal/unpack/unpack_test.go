package unpack

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/testproc"
)

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
	mtime            time.Time
}

func tarGz(t *testing.T, entries []entry) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body)), ModTime: e.mtime, Format: tar.FormatPAX}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if e.typ == tar.TypeXGlobalHeader {
			h = &tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "0123456789abcdef"}, Format: tar.FormatPAX}
		}
		if e.typ != tar.TypeReg && e.typ != tar.TypeCont {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	zw.Close()
	p := filepath.Join(t.TempDir(), "a.tar.gz")
	os.WriteFile(p, buf.Bytes(), 0o644)
	return p
}

// An autotools release ships Makefile.in generated after Makefile.am; if the
// unpacked tree does not keep that order, make runs automake (ragel 6.10 in
// vectorscan's build wanted automake-1.15 that way).
func TestKeepsMemberTimes(t *testing.T) {
	am := time.Date(2017, 3, 24, 10, 0, 0, 0, time.UTC)
	in := am.Add(81 * time.Minute)
	future := time.Now().Add(48 * time.Hour)
	a := tarGz(t, []entry{
		{name: "ragel-6.10/", typ: tar.TypeDir, mtime: in},
		{name: "ragel-6.10/Makefile.in", body: "all:\n", typ: tar.TypeReg, mtime: in},
		{name: "ragel-6.10/Makefile.am", body: "SUBDIRS =\n", typ: tar.TypeReg, mtime: am},
		{name: "ragel-6.10/later", body: "x", typ: tar.TypeReg, mtime: future},
	})
	dir := t.TempDir()
	before := time.Now()
	if _, err := Archive(a, dir, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	mt := func(name string) time.Time {
		st, err := os.Stat(filepath.Join(dir, "ragel-6.10", name))
		if err != nil {
			t.Fatal(err)
		}
		return st.ModTime()
	}
	if !mt("Makefile.am").Equal(am) || !mt("Makefile.in").Equal(in) {
		t.Errorf("Makefile.am %v, Makefile.in %v; want the archive's %v, %v", mt("Makefile.am"), mt("Makefile.in"), am, in)
	}
	if !mt(".").Equal(in) {
		t.Errorf("directory time %v, want the archive's %v (set after its members)", mt("."), in)
	}
	if got := mt("later"); got.After(time.Now()) || got.Before(before) {
		t.Errorf("a member dated in the future got %v, want it clamped to the time of unpacking", got)
	}
}

func TestGitArchiveWithGlobalHeader(t *testing.T) {
	a := tarGz(t, []entry{
		{typ: tar.TypeXGlobalHeader},
		{name: "pkg-1.0/", typ: tar.TypeDir},
		{name: "pkg-1.0/configure", body: "#!/bin/sh\n", typ: tar.TypeReg, mode: 0o755},
		{name: "pkg-1.0/src/a.c", body: "int a;\n", typ: tar.TypeReg},
		{name: "pkg-1.0/src/b.c", body: "int b;\n", typ: tar.TypeCont},
		{name: "pkg-1.0/include", link: "src", typ: tar.TypeSymlink},
		{name: "pkg-1.0/src/a2.c", link: "pkg-1.0/src/a.c", typ: tar.TypeLink},
	})
	dir := t.TempDir()
	tops, err := Archive(a, dir, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(tops) != 1 || tops[0] != "pkg-1.0" {
		t.Fatalf("tops %v, want only pkg-1.0 (the global header is metadata)", tops)
	}
	if _, err := os.Stat(filepath.Join(dir, "pax_global_header")); err == nil {
		t.Error("pax_global_header was unpacked as a file")
	}
	st, err := os.Stat(filepath.Join(dir, "pkg-1.0", "configure"))
	if err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("configure lost its execute bit: %v %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "pkg-1.0", "include", "b.c")); string(b) != "int b;\n" {
		t.Errorf("contiguous file through the symlink: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "pkg-1.0", "src", "a2.c")); string(b) != "int a;\n" {
		t.Errorf("hard link: %q", b)
	}
}

func TestHostileArchives(t *testing.T) {
	outside := t.TempDir()
	for name, c := range map[string]struct {
		entries []entry
		lim     Limits
		want    string
	}{
		"traversal": {[]entry{{name: "../evil", body: "x", typ: tar.TypeReg}}, DefaultLimits, "outside the tree"},
		"absolute":  {[]entry{{name: "/tmp/evil", body: "x", typ: tar.TypeReg}}, DefaultLimits, "outside the tree"},
		"link out":  {[]entry{{name: "p/l", link: "../../etc", typ: tar.TypeSymlink}}, DefaultLimits, "p/l -> ../../etc climbs above the root"},
		// a/b/u/../../etc/passwd cleans to a/etc/passwd, but the kernel reads
		// a/b/u as a, a/.. as the root and the root's .. as outside.
		"link chain": {[]entry{{name: "a/b/", typ: tar.TypeDir}, {name: "a/b/u", link: "..", typ: tar.TypeSymlink},
			{name: "a/passwd", link: "b/u/../../etc/passwd", typ: tar.TypeSymlink}}, DefaultLimits, "a/passwd -> b/u/../../etc/passwd climbs above the root"},
		// Inside when made; a later member turns the directory it goes
		// through into a link that takes it out.
		"link made outside later": {[]entry{{name: "a/b/", typ: tar.TypeDir}, {name: "a/l", link: "b/../../x", typ: tar.TypeSymlink},
			{name: "c/", typ: tar.TypeDir}, {name: "a/b", link: "..", typ: tar.TypeSymlink}}, DefaultLimits, "a/l -> b/../../x climbs above the root"},
		"absolute link":  {[]entry{{name: "p/l", link: outside, typ: tar.TypeSymlink}}, DefaultLimits, "absolute path"},
		"write via link": {[]entry{{name: "p/", typ: tar.TypeDir}, {name: "p/l", link: ".", typ: tar.TypeSymlink}, {name: "p/l/x", body: "x", typ: tar.TypeReg}}, DefaultLimits, "written through the link"},
		"hard link out":  {[]entry{{name: "p/h", link: "../../etc/passwd", typ: tar.TypeLink}}, DefaultLimits, "hard link"},
		"too big":        {[]entry{{name: "p/a", body: strings.Repeat("x", 100), typ: tar.TypeReg}}, Limits{Bytes: 10, Entries: 10}, "more than 10 uncompressed bytes"},
		"too many":       {[]entry{{name: "p/a", typ: tar.TypeDir}, {name: "p/b", typ: tar.TypeDir}, {name: "p/c", typ: tar.TypeDir}}, Limits{Bytes: 1 << 20, Entries: 2}, "more than 2 archive entries"},
		"device":         {[]entry{{name: "p/dev", typ: tar.TypeChar}}, DefaultLimits, "not a file"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := Archive(tarGz(t, c.entries), dir, c.lim)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("something was written outside: %v", ents)
	}
}

// An archive that lies about its size, or whose gzip stream is cut, fails.
func TestTruncatedArchive(t *testing.T) {
	a := tarGz(t, []entry{{name: "p/a", body: strings.Repeat("y", 50000), typ: tar.TypeReg}})
	data, _ := os.ReadFile(a)
	os.WriteFile(a, data[:len(data)/2], 0o644)
	if _, err := Archive(a, t.TempDir(), DefaultLimits); err == nil {
		t.Fatal("a truncated archive unpacked")
	}
}

func TestZipAndXZ(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("rapidjson-1a80/include/r.h")
	w.Write([]byte("// r\n"))
	zw.Close()
	z := filepath.Join(dir, "r.zip")
	os.WriteFile(z, buf.Bytes(), 0o644)
	out := t.TempDir()
	if tops, err := Archive(z, out, DefaultLimits); err != nil || len(tops) != 1 || tops[0] != "rapidjson-1a80" {
		t.Fatalf("zip: %v %v", tops, err)
	}
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz is not installed")
	}
	gz := tarGz(t, []entry{{name: "x-1/a", body: "a", typ: tar.TypeReg}})
	raw, _ := exec.Command("sh", "-c", "gzip -dc "+gz+" | xz -c > "+filepath.Join(dir, "x-1.tar.xz")).CombinedOutput()
	if tops, err := Archive(filepath.Join(dir, "x-1.tar.xz"), t.TempDir(), DefaultLimits); err != nil || len(tops) != 1 || tops[0] != "x-1" {
		t.Fatalf("xz: %v %v %s", tops, err, raw)
	}
	if _, err := Archive(filepath.Join(dir, "x.rar"), t.TempDir(), DefaultLimits); err == nil {
		t.Error("an unknown archive type was accepted")
	}
}

// Real GitHub tag archives (with git's global header) and Debian's bzip2
// original unpack to exactly the directory Doris's vars.sh names.
func TestRealArchives(t *testing.T) {
	mirror := filepath.Join(testproc.Corpus(t), "mirror")
	for archive, top := range map[string]string{"lz4-1.9.4.tar.gz": "lz4-1.9.4", "snappy-1.1.8.tar.gz": "snappy-1.1.8",
		"bitshuffle-0.5.1.tar.gz": "bitshuffle-0.5.1", "bzip2-1.0.8.tar.gz": "bzip2-1.0.8"} {
		dir := t.TempDir()
		tops, err := Archive(filepath.Join(mirror, archive), dir, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if len(tops) != 1 || tops[0] != top {
			t.Errorf("%s: unpacked to %v, want %s", archive, tops, top)
		}
		// GNU tar agrees on every file.
		ref := t.TempDir()
		if out, err := exec.Command("tar", "xzf", filepath.Join(mirror, archive), "-C", ref).CombinedOutput(); err != nil {
			t.Fatalf("tar: %v %s", err, out)
		}
		if out, err := exec.Command("diff", "-r", "--no-dereference", filepath.Join(ref, top), filepath.Join(dir, top)).CombinedOutput(); err != nil {
			t.Errorf("%s differs from GNU tar's unpack: %s", archive, out)
		}
	}
}

// TestRewriteLink: under Rebase a link that is absolute or climbs out of the
// root is stored as the relative path of the same place inside it.
func TestRewriteLink(t *testing.T) {
	for _, c := range []struct{ dir, target, want string }{
		{"usr/lib", "/lib/x.so", "../../lib/x.so"},
		{"usr/lib", "x.so.1", "x.so.1"},
		{"usr/lib", "../../lib/x", "../../lib/x"},
		{"usr/lib", "../../../x", "../../x"},
		{"usr/lib", "a/../../x", "../x"},
		{".", "/", "."},
		{"lib64", "/lib/aarch64-linux-gnu/ld-2.31.so", "../lib/aarch64-linux-gnu/ld-2.31.so"},
	} {
		if got := rewriteLink(c.dir, c.target); got != c.want {
			t.Errorf("rewriteLink(%q, %q) = %q, want %q", c.dir, c.target, got, c.want)
		}
	}
}

// TestRebaseLinkChain: the chain Confine refuses (a/b/u -> .., then
// a/passwd -> b/u/../../etc/passwd) is, in a root filesystem, a link kept
// inside the root, and a write through a/b/u lands in a, inside it too.
func TestRebaseLinkChain(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	tr := New(root, Options{Links: Rebase})
	a := tarGz(t, []entry{{name: "a/b/", typ: tar.TypeDir}, {name: "a/b/u", link: "..", typ: tar.TypeSymlink},
		{name: "a/passwd", link: "b/u/../../etc/passwd", typ: tar.TypeSymlink},
		{name: "a/b/u/x", body: "x", typ: tar.TypeReg}})
	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Apply(context.Background(), zr, "chain"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.Readlink(filepath.Join(dir, "a", "passwd"))
	if !StaysInside("a", got) {
		t.Errorf("a/passwd -> %q leaves the root", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a", "x")); err != nil || string(b) != "x" {
		t.Errorf("a/b/u/x was not written to a/x: %q %v", b, err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("written beside the root: %v", ents)
	}
}
