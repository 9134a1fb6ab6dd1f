package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A build's steps see the work tree, the compiler homes and the sysroot at
// fixed paths (/dorisarm/...), so what compilers record is the same
// whatever the cache directory: two builds of one source with two caches
// at two depths give byte-identical outputs and images, and records that
// differ only in times.

// reproBuild builds target from the source args into a fresh out and a
// cache at a path of its own (nested under name, so the two builds' paths
// differ in length too) and returns the out directory. A real-recipe build
// names its target in seedFor: its cache starts with the C++ runtime.
func reproBuild(t *testing.T, name, seedFor string, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name, strings.Repeat("deeper-", len(name)))
	out, cache := filepath.Join(dir, "out"), filepath.Join(dir, "cache")
	if seedFor != "" {
		seedRuntime(t, cache, seedFor)
	}
	stdout, errOut, code := run(t, append([]string{"build", "--out", out, "--cache", cache}, args...)...)
	if code != 0 {
		t.Fatalf("build %v: exit %d\n%s\n%s", args, code, stdout, errOut)
	}
	return out
}

// publishedFiles are the digests of the files under out, the records aside.
func publishedFiles(t *testing.T, out string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "dorisarm-build.json" {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		if d.Type()&fs.ModeSymlink != 0 {
			l, err := os.Readlink(p)
			files[rel] = []byte("link " + l)
			return err
		}
		b, err := os.ReadFile(p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	fa, fb := publishedFiles(t, a), publishedFiles(t, b)
	if len(fa) == 0 {
		t.Fatalf("%s: nothing published", a)
	}
	for rel, ba := range fa {
		bb, ok := fb[rel]
		switch {
		case !ok:
			t.Errorf("%s: in the first build only", rel)
		case !bytes.Equal(ba, bb):
			t.Errorf("%s: differs between the two builds", rel)
		}
	}
	for rel := range fb {
		if _, ok := fa[rel]; !ok {
			t.Errorf("%s: in the second build only", rel)
		}
	}
}

// timeless is a build record without its times.
func timeless(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var drop func(any) any
	drop = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k := range x {
				if strings.Contains(k, "seconds") || strings.HasSuffix(k, "_at") || k == "started" || k == "finished" || k == "date" || k == "compile_cache" {
					delete(x, k)
					continue
				}
				x[k] = drop(x[k])
			}
		case []any:
			for i := range x {
				x[i] = drop(x[i])
			}
		}
		return v
	}
	o, _ := json.MarshalIndent(drop(v), "", " ")
	return string(o)
}

// imageDigests builds the images of out as an OCI layout and returns each
// tag's digest.
func imageDigests(t *testing.T, out string) map[string]string {
	t.Helper()
	layout := filepath.Join(t.TempDir(), "images")
	cmd := exec.Command(bin, "image", "build", "--build", out, "--out", "oci:"+layout, "--base", "scratch", "-o", "json")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("image build: %v\n%s", err, b)
	}
	var refs []struct{ Ref, Digest string }
	if err := json.Unmarshal(b, &refs); err != nil {
		t.Fatalf("image build -o json: %v\n%s", err, b)
	}
	digests := map[string]string{}
	for _, r := range refs {
		// The tag: the layout's path differs between the two builds.
		digests[r.Ref[strings.LastIndex(r.Ref, "/")+1:]] = r.Digest
	}
	if len(digests) == 0 {
		t.Fatalf("image build -o json named no image:\n%s", b)
	}
	return digests
}

// TestReproducibleAcrossCaches: the sample built for graviton3 (clang,
// ThinLTO, PGO) with two caches at two paths gives the same published
// files, the same image digests and the same record but for times; the
// objects record the fixed step paths, never the cache's.
func TestReproducibleAcrossCaches(t *testing.T) {
	slow(t, "builds the sample twice with real compilers")
	// Both through the compile cache (the default where ccache is
	// installed), each its own: ccache reorders the compiler's arguments
	// and adds -fcolor-diagnostics, which -frecord-command-line keeps, so a
	// build through it and one without differ in that section alone.
	a := reproBuild(t, "a", "", "--target", "graviton3")
	b := reproBuild(t, "bb", "", "--target", "graviton3")
	sameFiles(t, a, b)
	rec := filepath.Join("2.1.8", "graviton3", "dorisarm-build.json")
	if ra, rb := timeless(t, filepath.Join(a, rec)), timeless(t, filepath.Join(b, rec)); ra != rb {
		t.Errorf("the records differ in more than times:\n%s\n---\n%s", ra, rb)
	}
	da, db := imageDigests(t, a), imageDigests(t, b)
	for tag, d := range da {
		if db[tag] != d {
			t.Errorf("%s: %s and %s", tag, d, db[tag])
		}
	}
	// What the compilers recorded names /dorisarm/..., not the cache.
	be := filepath.Join(a, "2.1.8", "graviton3", "be", "lib", "doris_be")
	data, err := os.ReadFile(be)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("/dorisarm/src/")) {
		t.Errorf("%s records no /dorisarm/src/ path: are the steps' paths fixed?", be)
	}
	if i := bytes.Index(data, []byte(os.TempDir())); i >= 0 {
		t.Errorf("%s records a path of this machine: %q", be, data[i:min(len(data), i+80)])
	}
}

// TestRealPackageReproducible: a real Doris package (snappy of the 2.1.7
// tree, built by Doris's own build-thirdparty.sh) built twice, with two
// caches and two copies of the tree, gives the same archive bytes.
func TestRealPackageReproducible(t *testing.T) {
	e2eOnly(t, "builds a real package twice")
	tree, mirror := corpusTree(t)
	needTool(t, "clang-16")
	var outs []string
	for _, name := range []string{"a", "bb"} {
		src := copyCorpusTree(t, tree)
		outs = append(outs, reproBuild(t, name, "kunpeng920", "--source", src, "--mirror", mirror, "--packages", "snappy", "--target", "kunpeng920", "--compiler", "clang"))
	}
	lib := filepath.Join("2.1.7-rc01", "kunpeng920", "thirdparty", "installed", "lib", "libsnappy.a")
	la, err := os.ReadFile(filepath.Join(outs[0], lib))
	if err != nil {
		// lib64 on some layouts
		lib = filepath.Join("2.1.7-rc01", "kunpeng920", "thirdparty", "installed", "lib64", "libsnappy.a")
		if la, err = os.ReadFile(filepath.Join(outs[0], lib)); err != nil {
			t.Fatal(err)
		}
	}
	lb, err := os.ReadFile(filepath.Join(outs[1], lib))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(la, lb) {
		t.Errorf("%s differs between two builds with two caches", lib)
	}
	sameFiles(t, outs[0], outs[1])
}
