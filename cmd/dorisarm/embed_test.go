package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/datafs"
)

// emptyDir is a fresh directory outside the repository.
func emptyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	abs, _ := filepath.Abs(repo)
	if strings.HasPrefix(dir, abs+string(filepath.Separator)) {
		t.Fatalf("%s is inside the repository %s", dir, abs)
	}
	if _, err := os.Stat(filepath.Join(dir, "matrix.yaml")); err == nil {
		t.Fatal("the empty directory has a matrix")
	}
	return dir
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// seriesSHA computes a series digest the way version documents it, from
// the files: sha256 of "<component>/<file> <sha256 hex>\n", sorted.
func seriesSHA(t *testing.T, dir string) (string, int) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.patch"))
	var lines []string
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		lines = append(lines, filepath.ToSlash(rel)+" "+strings.TrimPrefix(fileSHA(t, f), "sha256:")+"\n")
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "")))
	return "sha256:" + hex.EncodeToString(sum[:]), len(files)
}

type versionOut struct {
	Version string `json:"version"`
	Data    struct {
		Source  string        `json:"source"`
		Matrix  datafs.Item   `json:"matrix"`
		Recipes []datafs.Item `json:"recipes"`
		Patches []datafs.Item `json:"patches"`
		Sample  string        `json:"sample"`
	} `json:"data"`
}

func versionIn(t *testing.T, dir string, args ...string) versionOut {
	t.Helper()
	out, errOut, code := runIn(t, dir, append([]string{"version", "-o", "json"}, args...)...)
	var v versionOut
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("version -o json in %s: %d %s\n%s", dir, code, errOut, out)
	}
	return v
}

// stepKeys are a plan's step IDs and cache keys.
func stepKeys(t *testing.T, out string) map[string]string {
	t.Helper()
	var p struct {
		Steps []struct{ ID, Key string }
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Steps) == 0 {
		t.Fatalf("not a plan (%v):\n%s", err, out)
	}
	keys := map[string]string{}
	for _, s := range p.Steps {
		keys[s.ID] = s.Key
	}
	return keys
}

// TestEmbeddedDataFromAnEmptyDirectory: matrix, plan and scan work with
// nothing but the binary, and give what they give in the checkout.
func TestEmbeddedDataFromAnEmptyDirectory(t *testing.T) {
	dir := emptyDir(t)

	out, errOut, code := runIn(t, dir, "matrix")
	if code != 0 || !strings.Contains(out, "28 cells; embedded:matrix.yaml is valid") {
		t.Fatalf("matrix: %d %s\n%s", code, errOut, out)
	}
	inRepo, _, _ := run(t, "matrix", "-o", "json")
	if emb, _, _ := runIn(t, dir, "matrix", "-o", "json"); emb != inRepo {
		t.Error("matrix -o json differs between the built-in matrix and the checkout's")
	}

	// The plan of the built-in sample (written to the cache directory) has
	// the same cache keys as the checkout's: same recipe, patches and tree
	// (file contents and executable bits).
	out, errOut, code = runIn(t, dir, "plan", "--target", "kunpeng920", "-o", "json")
	if code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	emb := stepKeys(t, out)
	out, errOut, code = run(t, "plan", "--target", "kunpeng920", "-o", "json")
	if code != 0 {
		t.Fatalf("plan in the checkout: %d %s", code, errOut)
	}
	if want := stepKeys(t, out); fmt.Sprint(emb) != fmt.Sprint(want) {
		t.Errorf("plan keys differ from the checkout's:\n%v\n%v", emb, want)
	}
	if out, _, code := runIn(t, dir, "plan", "--target", "kunpeng920"); code != 0 || !strings.Contains(out, "patch     bitshuffle/0001-scalar-bitshuffle") {
		t.Errorf("plan: %d\n%s", code, out)
	}

	// scan applies the built-in matrix's policy for the target.
	elf := arm64ELF(t)
	out, errOut, code = runIn(t, dir, "scan", "--target", "kunpeng920", elf)
	if code != 0 || !strings.Contains(out, "os kylin-v10-sp1: glibc <= 2.28, 64 KiB pages") {
		t.Errorf("scan: %d %s\n%s", code, errOut, out)
	}
	out, _, code = runIn(t, dir, "scan", "--target", "kunpeng930", elf)
	if code != 2 {
		t.Errorf("scan of an unknown target: %d, want 2\n%s", code, out)
	}

	// Nothing was written next to the data, and writes to it are refused.
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the working directory is no longer empty: %v", ents)
	}
	_, errOut, code = runIn(t, dir, "patch", "refresh", "scalar-bitshuffle", "--source", dir)
	if code != 2 || !strings.Contains(errOut, "embedded:patches/bitshuffle/0001-scalar-bitshuffle.patch is the copy built into dorisarm") {
		t.Errorf("patch refresh of a built-in patch: %d %s", code, errOut)
	}
}

// arm64ELF compiles a small static arm64 program that needs nothing of the
// C library, so that it passes every target's policy.
func arm64ELF(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("aarch64-linux-gnu-gcc")
	if err != nil {
		t.Skip("aarch64-linux-gnu-gcc is not installed (make deps)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "tiny.c")
	os.WriteFile(src, []byte("void _start(void) { for (;;) __asm__ volatile(\"mov x8, #93\\n mov x0, #0\\n svc #0\"); }\n"), 0o644)
	exe := filepath.Join(dir, "tiny")
	if out, err := exec.Command(cc, "-O2", "-march=armv8-a", "-static", "-nostdlib", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	return exe
}

// TestVersionSaysWhichData: "embedded" with the built-in copies' digests
// outside a checkout, the checkout's files and their digests inside it, and
// --matrix or a matrix.yaml in the working directory overriding.
func TestVersionSaysWhichData(t *testing.T) {
	dir := emptyDir(t)
	emb := versionIn(t, dir)
	if emb.Version == "" || emb.Data.Source != "embedded" {
		t.Errorf("outside a checkout: version %q, data %q; want embedded", emb.Version, emb.Data.Source)
	}
	in := versionIn(t, repo)
	if in.Data.Source != "files" {
		t.Errorf("in the checkout: data %q; want files", in.Data.Source)
	}
	check := func(what string, got datafs.Item, wantPath string) {
		t.Helper()
		if got.Path != wantPath {
			t.Errorf("%s: %s, want %s", what, got.Path, wantPath)
		}
		file := filepath.Join(repo, filepath.FromSlash(got.Name))
		var sum string
		if got.Patches != nil {
			var n int
			sum, n = seriesSHA(t, file)
			if *got.Patches != n || n == 0 {
				t.Errorf("%s: %d patches, the directory has %d", what, *got.Patches, n)
			}
		} else {
			sum = fileSHA(t, file)
		}
		if got.SHA256 != sum {
			t.Errorf("%s: %s, the file's sha256 is %s", what, got.SHA256, sum)
		}
	}
	for _, v := range []struct {
		where  string
		v      versionOut
		prefix string
	}{{"embedded", emb, "embedded:"}, {"checkout", in, ""}} {
		check(v.where+" matrix", v.v.Data.Matrix, v.prefix+"matrix.yaml")
		recipes, _ := filepath.Glob(filepath.Join(repo, "recipes", "*"))
		if len(v.v.Data.Recipes) != len(recipes) {
			t.Errorf("%s: %d recipe files, recipes/ has %d", v.where, len(v.v.Data.Recipes), len(recipes))
		}
		for _, r := range v.v.Data.Recipes {
			check(v.where+" "+r.Name, r, v.prefix+r.Name)
		}
		if len(v.v.Data.Patches) != 2 {
			t.Errorf("%s: %d patch series, want patches/ and the sample's", v.where, len(v.v.Data.Patches))
		}
		for _, p := range v.v.Data.Patches {
			check(v.where+" "+p.Name, p, v.prefix+p.Name)
		}
	}

	// --matrix wins: its file and digest, the rest still built in.
	custom := filepath.Join(t.TempDir(), "my-matrix.yaml")
	m, _ := os.ReadFile(filepath.Join(repo, "matrix.yaml"))
	os.WriteFile(custom, append(m, "# a local change\n"...), 0o644)
	v := versionIn(t, dir, "--matrix", custom)
	if v.Data.Matrix.Path != custom || v.Data.Matrix.SHA256 != fileSHA(t, custom) || v.Data.Source != "mixed" {
		t.Errorf("--matrix: %+v, source %s", v.Data.Matrix, v.Data.Source)
	}
	if out, _, code := runIn(t, dir, "matrix", "--matrix", custom); code != 0 || !strings.Contains(out, custom+" is valid") {
		t.Errorf("matrix --matrix: %d\n%s", code, out)
	}
	// A matrix.yaml in the working directory wins over the built-in one.
	os.WriteFile(filepath.Join(dir, "matrix.yaml"), append(m, "# here\n"...), 0o644)
	v = versionIn(t, dir)
	if v.Data.Matrix.Path != "matrix.yaml" || v.Data.Matrix.SHA256 != fileSHA(t, filepath.Join(dir, "matrix.yaml")) {
		t.Errorf("./matrix.yaml: %+v", v.Data.Matrix)
	}
	// A missing --matrix is still an error, not a silent fall-back.
	if _, errOut, code := runIn(t, dir, "version", "--matrix", "no/such.yaml"); code != 2 || !strings.Contains(errOut, "no/such.yaml") {
		t.Errorf("version --matrix no/such.yaml: %d %s", code, errOut)
	}
	if _, errOut, code := runIn(t, dir, "matrix", "--matrix", "no/such.yaml"); code != 2 || !strings.Contains(errOut, "no/such.yaml") {
		t.Errorf("matrix --matrix no/such.yaml: %d %s", code, errOut)
	}

	// The text form names the same data.
	out, _, code := runIn(t, emptyDir(t), "version")
	if code != 0 || !strings.Contains(out, "data: embedded") || !strings.Contains(out, emb.Data.Matrix.SHA256) {
		t.Errorf("version text: %d\n%s", code, out)
	}
}

// BenchmarkVersionData is what version adds to start-up: finding and
// hashing the data (here the built-in copy).
func BenchmarkVersionData(b *testing.B) {
	dir := b.TempDir()
	wd, _ := os.Getwd()
	os.Chdir(dir)
	defer os.Chdir(wd)
	g := &globals{data: datafs.Locator{CacheDir: b.TempDir()}}
	for i := 0; i < b.N; i++ {
		if _, err := g.data.Info(); err != nil {
			b.Fatal(err)
		}
	}
}
