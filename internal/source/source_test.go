package source

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/recipe"
)

func doris(t *testing.T) *recipe.Recipe {
	t.Helper()
	r, err := recipe.Load(filepath.Join("..", "..", "recipes", "doris.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReadPackagesFollowsTheTreesArchSwitch(t *testing.T) {
	r := doris(t)
	tree := filepath.Join("testdata", "doristree")
	arm, err := ReadPackages(tree, r, "aarch64")
	if err != nil {
		t.Fatal(err)
	}
	x86, err := ReadPackages(tree, r, "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if len(arm) != 4 || len(x86) != 4 {
		t.Fatalf("got %d/%d packages", len(arm), len(x86))
	}
	if arm[2].Name != "vectorscan-5.4.11.tar.gz" || arm[2].Version != "5.4.11" || arm[2].MD5 != "e67b70403cba6c1654a9fef4fd15a2f2" {
		t.Errorf("aarch64 HYPERSCAN = %+v", arm[2])
	}
	if x86[2].Name != "hyperscan-5.4.2.tar.gz" || x86[2].Version != "5.4.2" {
		t.Errorf("x86_64 HYPERSCAN = %+v", x86[2])
	}
	if arm[0].Version != "1.1.1s" { // pinned in the recipe: the name has no dotted version
		t.Errorf("OPENSSL version %q", arm[0].Version)
	}
	if arm[1].Version != "1.81.0" {
		t.Errorf("BOOST version %q", arm[1].Version)
	}
	if arm[3].File != "pdqsort.h" || arm[3].Source != "" {
		t.Errorf("PDQSORT = %+v", arm[3])
	}
	if arm[2].Build != "hyperscan" {
		t.Errorf("build name %q", arm[2].Build)
	}
}

func TestReadPackagesErrors(t *testing.T) {
	r := doris(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "thirdparty"), 0o755)
	write := func(s string) { os.WriteFile(filepath.Join(dir, "thirdparty", "vars.sh"), []byte(s), 0o644) }

	write("X_NAME=x.tgz\nX_DOWNLOAD=u\nX_MD5SUM=nothex\nTP_ARCHIVES=(X)\n")
	if _, err := ReadPackages(dir, r, "aarch64"); err == nil || !strings.Contains(err.Error(), "is not an MD5 sum") {
		t.Errorf("bad md5: %v", err)
	}
	write("TP_ARCHIVES=()\n")
	if _, err := ReadPackages(dir, r, "aarch64"); err == nil || !strings.Contains(err.Error(), "lists no packages") {
		t.Errorf("empty list: %v", err)
	}
	write("exit 3\n")
	if _, err := ReadPackages(dir, r, "aarch64"); err == nil || !strings.Contains(err.Error(), "sourcing it failed") {
		t.Errorf("failing script: %v", err)
	}
	if _, err := ReadPackages(t.TempDir(), r, "aarch64"); err == nil || !strings.Contains(err.Error(), "Doris-style tree") {
		t.Errorf("no vars.sh: %v", err)
	}
}

func TestReadVersion(t *testing.T) {
	r := doris(t)
	v, err := ReadVersion(filepath.Join("testdata", "doristree"), r)
	if err != nil || v != "2.0.4-rc06" {
		t.Errorf("doris tree: %q, %v", v, err)
	}
	v, err = ReadVersion(filepath.Join("..", "..", "examples", "minidoris"), r)
	if err != nil || v != "2.1.8" {
		t.Errorf("minidoris: %q, %v", v, err)
	}
	if _, err := ReadVersion(t.TempDir(), r); err == nil || !strings.Contains(err.Error(), "--doris") {
		t.Errorf("missing: %v", err)
	}
}

func TestLockPinsAndRefuses(t *testing.T) {
	mirror := t.TempDir()
	os.WriteFile(filepath.Join(mirror, "a.tar.gz"), []byte("archive a"), 0o644)
	sum, _ := Sum(strings.NewReader("archive a"))
	pk := Package{Entry: "A", Name: "a.tar.gz", MD5: sum.MD5}

	l, err := LockPackages(&Lock{Archives: map[string]LockEntry{}}, []Package{pk}, mirror, false)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	if err := l.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLock(path)
	if err != nil || back.Archives["a.tar.gz"].SHA256 != sum.SHA256 || back.Archives["a.tar.gz"].Size != 9 {
		t.Fatalf("read back %+v, %v", back, err)
	}
	if w, err := Verify(pk, sum, back); err != nil || w != "" {
		t.Errorf("verify pinned: %q %v", w, err)
	}
	if w, err := Verify(pk, sum, &Lock{Archives: map[string]LockEntry{}}); err != nil || !strings.Contains(w, "not pinned") {
		t.Errorf("verify unpinned: %q %v", w, err)
	}

	// The mirror now serves other bytes: the MD5 check refuses them.
	os.WriteFile(filepath.Join(mirror, "a.tar.gz"), []byte("tampered"), 0o644)
	if _, err := LockPackages(back, []Package{pk}, mirror, false); err == nil || !strings.Contains(err.Error(), "does not match A_MD5SUM") {
		t.Errorf("tampered: %v", err)
	}
	other, _ := Sum(strings.NewReader("tampered"))
	if _, err := Verify(pk, other, back); err == nil {
		t.Error("verify accepted tampered bytes")
	}
	// vars.sh moved to a new archive with a new MD5: the pin still refuses it unless --update.
	pk2 := pk
	pk2.MD5 = other.MD5
	if _, err := LockPackages(back, []Package{pk2}, mirror, false); err == nil || !strings.Contains(err.Error(), "--update") {
		t.Errorf("changed pin: %v", err)
	}
	if l2, err := LockPackages(back, []Package{pk2}, mirror, true); err != nil || l2.Archives["a.tar.gz"].SHA256 != other.SHA256 {
		t.Errorf("update: %v", err)
	}
	// An archive the mirror lacks is listed as missing, not pinned, and the rest is kept.
	if l3, err := LockPackages(back, []Package{{Entry: "B", Name: "b.tar.gz"}}, mirror, false); err != nil || len(l3.Missing) != 1 || l3.Missing[0] != "b.tar.gz" || l3.Archives["a.tar.gz"].SHA256 == "" {
		t.Errorf("missing archive: %+v %v", l3, err)
	}
	if _, err := Open(mirror, "b.tar.gz"); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "not in mirror") {
		t.Errorf("open a missing archive: %v", err)
	}
	if _, err := Open(mirror, "../etc/passwd"); err == nil {
		t.Error("path escape accepted")
	}
	// A named pipe in the mirror is refused at once, by name.
	if err := syscall.Mkfifo(filepath.Join(mirror, "pipe.tar.gz"), 0o644); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() { _, err := Open(mirror, "pipe.tar.gz"); opened <- err }()
	select {
	case err := <-opened:
		if err == nil || !strings.Contains(err.Error(), "pipe.tar.gz") || !strings.Contains(err.Error(), "a named pipe") {
			t.Errorf("open a pipe in the mirror: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("opening a named pipe in the mirror still blocked after 10 s")
	}
	if _, err := ReadLock(filepath.Join("testdata", "doristree", "thirdparty", "vars.sh")); err == nil {
		t.Error("garbage lock accepted")
	}
}

// TestSampleMirrorMatchesItsLock keeps the committed sample archives, the MD5
// sums in its vars.sh and recipes/minidoris.lock in step.
func TestSampleMirrorMatchesItsLock(t *testing.T) {
	r, err := recipe.Load(filepath.Join("..", "..", "recipes", "minidoris.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join("..", "..", "examples", "minidoris")
	pkgs, err := ReadPackages(tree, r, "aarch64")
	if err != nil {
		t.Fatal(err)
	}
	lock, err := ReadLock(r.Path(r.Lock))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		rc, err := Open(filepath.Join(tree, r.Thirdparty.Mirror), p.Name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Sum(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if w, err := Verify(p, got, lock); err != nil || w != "" {
			t.Errorf("%s: %v %s (run thirdparty/pack.sh, update vars.sh, dorisarm sources lock --update)", p.Name, err, w)
		}
	}
}

// TestSampleArchivesMatchTheirSources checks each mirror archive holds exactly
// the files under thirdparty/pkgsrc, so an edited source cannot ship stale.
func TestSampleArchivesMatchTheirSources(t *testing.T) {
	tp := filepath.Join("..", "..", "examples", "minidoris", "thirdparty")
	archives, _ := filepath.Glob(filepath.Join(tp, "mirror", "*.tar.gz"))
	if len(archives) == 0 {
		t.Fatal("no sample archives")
	}
	for _, a := range archives {
		f, err := os.Open(a)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		seen := map[string]bool{}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			got, _ := io.ReadAll(tr)
			want, err := os.ReadFile(filepath.Join(tp, "pkgsrc", h.Name))
			if err != nil || string(got) != string(want) {
				t.Errorf("%s: %s differs from pkgsrc (run thirdparty/pack.sh)", filepath.Base(a), h.Name)
			}
			seen[h.Name] = true
		}
		f.Close()
		name := strings.TrimSuffix(filepath.Base(a), ".tar.gz")
		filepath.Walk(filepath.Join(tp, "pkgsrc", name), func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				rel, _ := filepath.Rel(filepath.Join(tp, "pkgsrc"), p)
				if !seen[filepath.ToSlash(rel)] {
					t.Errorf("%s is not in %s (run thirdparty/pack.sh)", rel, filepath.Base(a))
				}
			}
			return nil
		})
	}
}
