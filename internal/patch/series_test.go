package patch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
)

const good = `Description: Do a thing.
 Second line of the description.
Author: someone
Applies-To: bitshuffle = 0.5.1
Targets: kunpeng920, !sve
Evidence: measured

--- a/x.c
+++ b/x.c
@@ -1 +1 @@
-a
+b
`

func TestParseHeader(t *testing.T) {
	p, err := Parse("patches/bitshuffle/0007-do-thing.patch", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if p.ID() != "bitshuffle/0007-do-thing" || p.Summary() != "Do a thing." || p.AppliesTo != "= 0.5.1" || p.BodyLine != 8 {
		t.Errorf("parsed %+v", p)
	}
	if strings.Join(p.Targets, "|") != "kunpeng920|!sve" {
		t.Errorf("targets %v", p.Targets)
	}
	if !p.MatchesVersion("0.5.1") || p.MatchesVersion("0.5.2") {
		t.Error("version matching wrong")
	}
	if !strings.HasPrefix(string(p.Body), "--- a/x.c") {
		t.Errorf("body %q", p.Body)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, path, data, want string }{
		{"bad name", "patches/x/fix.patch", good, "must be NNNN-name.patch"},
		{"missing evidence", "patches/bitshuffle/0001-a.patch", strings.Replace(good, "Evidence: measured\n", "", 1), "header field Evidence is required"},
		{"unknown field", "patches/bitshuffle/0001-a.patch", "Colour: blue\n" + good, `1:1: unknown header field "Colour"`},
		{"twice", "patches/bitshuffle/0001-a.patch", strings.Replace(good, "Author: someone\n", "Author: a\nAuthor: b\n", 1), "4:1: header field Author appears twice"},
		{"wrong component", "patches/zstd/0001-a.patch", good, `Applies-To names component "bitshuffle" but the patch lives under zstd/`},
		{"bad constraint", "patches/bitshuffle/0001-a.patch", strings.Replace(good, "= 0.5.1", "about 0.5", 1), "4:1: Applies-To: bad version constraint"},
		{"no diff", "patches/bitshuffle/0001-a.patch", good[:strings.Index(good, "---")], "no diff found"},
		{"needs a path outside", "patches/bitshuffle/0001-a.patch", strings.Replace(good, "Evidence:", "Needs-Path: ../etc/passwd\nEvidence:", 1), `Needs-Path "../etc/passwd" must be a path inside`},
		{"steps not a name", "patches/bitshuffle/0001-a.patch", strings.Replace(good, "Evidence:", "Steps: be, ../be\nEvidence:", 1), `Steps "../be" is not a step name`},
	}
	for _, c := range cases {
		_, err := Parse(c.path, []byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: err = %v, want %q with the file name", c.name, err, c.want)
		}
	}
}

func TestSeriesOrderAndDuplicates(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"zstd/0002-b.patch", "zstd/0001-a.patch", "bitshuffle/0003-c.patch"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		comp := filepath.Dir(f)
		os.WriteFile(filepath.Join(dir, f), []byte(strings.Replace(good, "bitshuffle = 0.5.1", comp, 1)), 0o644)
	}
	s, err := LoadSeries(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range s.Patches {
		ids = append(ids, p.ID())
	}
	if strings.Join(ids, " ") != "bitshuffle/0003-c zstd/0001-a zstd/0002-b" {
		t.Errorf("order %v", ids)
	}
	os.WriteFile(filepath.Join(dir, "zstd", "0001-again.patch"), []byte(strings.Replace(good, "bitshuffle = 0.5.1", "zstd", 1)), 0o644)
	if _, err := LoadSeries(dir); err == nil || !strings.Contains(err.Error(), "patch number 0001 is also used") {
		t.Errorf("duplicate number: %v", err)
	}
	if s, err := LoadSeries(filepath.Join(dir, "missing")); err != nil || len(s.Patches) != 0 {
		t.Errorf("missing dir: %v", err)
	}
}

func TestTargetSelectors(t *testing.T) {
	m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cell := func(name string) matrix.Cell {
		c, err := m.Cell("2.1", name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cases := []struct {
		targets []string
		yes, no []string
	}{
		{[]string{"kunpeng920"}, []string{"kunpeng920"}, []string{"graviton2"}},
		{[]string{"!sve"}, []string{"kunpeng920", "graviton2", "generic-armv8"}, []string{"graviton3", "graviton4", "x86_64"}},
		{[]string{"+sve"}, []string{"graviton3", "graviton4"}, []string{"kunpeng920"}},
		{[]string{"rcpc"}, []string{"graviton2", "ampere-altra"}, []string{"kunpeng920", "generic-armv8"}},
		{[]string{"all"}, []string{"x86_64", "kunpeng920"}, nil},
		{nil, []string{"graviton4"}, nil},
	}
	for _, c := range cases {
		p := &Patch{Targets: c.targets}
		for _, y := range c.yes {
			if !p.MatchesTarget(m, cell(y)) {
				t.Errorf("Targets %v should select %s", c.targets, y)
			}
		}
		for _, n := range c.no {
			if p.MatchesTarget(m, cell(n)) {
				t.Errorf("Targets %v should not select %s", c.targets, n)
			}
		}
	}
	s := &Series{Patches: []*Patch{{Path: "p", Targets: []string{"kunpeng921"}}}}
	if err := s.CheckTargets(m); err == nil || !strings.Contains(err.Error(), `"kunpeng921" is neither a target`) {
		t.Errorf("CheckTargets: %v", err)
	}
}

func TestSamplePatchesParse(t *testing.T) {
	s, err := LoadSeries(filepath.Join("..", "..", "examples", "minidoris", "patches"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Patches) != 5 {
		t.Fatalf("%d sample patches", len(s.Patches))
	}
}

// Needs-Path is looked up inside the tree: a path reached through a
// symbolic link out of it (be/src/foo -> /etc satisfying be/src/foo/passwd
// before) or through a link to nothing is missing, and the skip names the
// link; a link that stays in the tree is followed.
func TestNeedsPathThroughALinkOutOfTheTree(t *testing.T) {
	m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pdir := filepath.Join(dir, "patches", "doris")
	os.MkdirAll(pdir, 0o755)
	sub := strings.NewReplacer("bitshuffle = 0.5.1", "doris >= 2.1", "Targets: kunpeng920, !sve\n", "Needs-Path: sub/x.c\n").Replace(good)
	os.WriteFile(filepath.Join(pdir, "0001-sub.patch"), []byte(sub), 0o644)
	s, err := LoadSeries(filepath.Join(dir, "patches"))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Patches[0]
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x.c"), []byte("a\n"), 0o644)

	tree := t.TempDir()
	os.WriteFile(filepath.Join(tree, "x.c"), []byte("a\n"), 0o644)
	os.Symlink(outside, filepath.Join(tree, "sub"))
	miss, why := p.Missing(tree)
	if miss != "sub/x.c" || why != "sub is a symbolic link out of the tree, to "+outside {
		t.Errorf("through an absolute link out: Missing = %q, %q", miss, why)
	}
	res, err := s.ApplyTo(m, Query{Component: "doris", Version: "2.1.7"}, tree, false)
	if err != nil || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], "doris/0001-sub: the tree has no sub/x.c (Needs-Path; sub is a symbolic link out of the tree") {
		t.Fatalf("through a link out: %+v, %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "x.c")); string(b) != "a\n" {
		t.Errorf("the file out of the tree changed: %q", b)
	}

	rel, _ := filepath.Rel(tree, outside)
	for name, c := range map[string]struct {
		target, needs, miss, why string
	}{
		"relative link out":          {rel, "sub/x.c", "sub/x.c", "sub is a symbolic link out of the tree, to " + rel},
		"the path itself a link out": {outside, "sub", "sub", "sub is a symbolic link out of the tree, to " + outside},
		"link to nothing":            {"gone", "sub/x.c", "sub/x.c", "sub is a symbolic link to gone, which is not in the tree"},
		"link in the tree":           {"real", "sub/x.c", "", ""},
		"no such path":               {"real", "other/x.c", "other/x.c", ""},
	} {
		tree := t.TempDir()
		os.MkdirAll(filepath.Join(tree, "real"), 0o755)
		os.WriteFile(filepath.Join(tree, "real", "x.c"), []byte("a\n"), 0o644)
		os.Symlink(c.target, filepath.Join(tree, "sub"))
		p.NeedsPath = []string{c.needs}
		if miss, why := p.Missing(tree); miss != c.miss || why != c.why {
			t.Errorf("%s: Missing = %q, %q; want %q, %q", name, miss, why, c.miss, c.why)
		}
	}
}

// A patch to a submodule's file says so (Needs-Path): a tree without the
// submodule skips it, saying why, instead of failing the whole series.
func TestNeedsPath(t *testing.T) {
	m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pdir := filepath.Join(dir, "patches", "doris")
	os.MkdirAll(pdir, 0o755)
	sub := strings.NewReplacer("bitshuffle = 0.5.1", "doris >= 2.1", "Targets: kunpeng920, !sve\n", "Needs-Path: sub/x.c\n", "a/x.c", "a/sub/x.c", "b/x.c", "b/sub/x.c").Replace(good)
	top := strings.NewReplacer("bitshuffle = 0.5.1", "doris >= 2.1", "Targets: kunpeng920, !sve\n", "").Replace(good)
	os.WriteFile(filepath.Join(pdir, "0001-top.patch"), []byte(top), 0o644)
	os.WriteFile(filepath.Join(pdir, "0002-sub.patch"), []byte(sub), 0o644)
	s, err := LoadSeries(filepath.Join(dir, "patches"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Patches[1].NeedsPath; len(got) != 1 || got[0] != "sub/x.c" {
		t.Fatalf("Needs-Path parsed as %v", got)
	}
	tree := t.TempDir()
	os.WriteFile(filepath.Join(tree, "x.c"), []byte("a\n"), 0o644)
	res, err := s.ApplyTo(m, Query{Component: "doris", Version: "2.1.7"}, tree, false)
	if err != nil || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], "doris/0002-sub: the tree has no sub/x.c") {
		t.Fatalf("without the submodule: %+v, %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(tree, "x.c")); string(b) != "b\n" {
		t.Errorf("the other patch did not apply: %q", b)
	}
	os.WriteFile(filepath.Join(tree, "x.c"), []byte("a\n"), 0o644)
	os.MkdirAll(filepath.Join(tree, "sub"), 0o755)
	os.WriteFile(filepath.Join(tree, "sub", "x.c"), []byte("a\n"), 0o644)
	res, err = s.ApplyTo(m, Query{Component: "doris", Version: "2.1.7"}, tree, false)
	if err != nil || len(res.Skipped) != 0 {
		t.Fatalf("with the submodule: %+v, %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(tree, "sub", "x.c")); string(b) != "b\n" {
		t.Errorf("the submodule patch did not apply: %q", b)
	}
}
