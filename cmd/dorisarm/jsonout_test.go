package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/source"
)

// runJSON runs dorisarm in the repository root and decodes its stdout into v.
func runJSON(t *testing.T, v any, args ...string) (code int) {
	t.Helper()
	stdout, errOut, code := run(t, args...)
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		t.Fatalf("%v: exit %d, not JSON (%v):\n%s\n%s", args, code, err, stdout, errOut)
	}
	return code
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func repoMatrix(t *testing.T) *matrix.Matrix {
	t.Helper()
	m, err := matrix.Load(filepath.Join(repo, "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// samplePatchFiles are the sample's patch files: id (component/name) → sha256.
func samplePatchFiles(t *testing.T) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repo, samplePatches, "*", "*.patch"))
	if len(files) == 0 {
		t.Fatal("the sample has no patches")
	}
	out := map[string]string{}
	for _, f := range files {
		id := filepath.Base(filepath.Dir(f)) + "/" + strings.TrimSuffix(filepath.Base(f), ".patch")
		out[id] = fileSHA256(t, f)
	}
	return out
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestJSONOutputs: what the commands that need no build, registry or key
// print with -o json, checked against the repository's data: the matrix,
// the sample's patches, its lock and mirror.
func TestJSONOutputs(t *testing.T) {
	m := repoMatrix(t)
	t.Run("version", func(t *testing.T) {
		var v struct {
			Version, Go string
			Data        struct {
				Source string
				Matrix struct{ Path, SHA256 string }
			}
		}
		if code := runJSON(t, &v, "version", "-o", "json"); code != 0 {
			t.Fatalf("exit %d", code)
		}
		// The binary was built by the go running this test.
		if v.Version == "" || v.Go != runtime.Version() {
			t.Errorf("version %q, go %q (want %s)", v.Version, v.Go, runtime.Version())
		}
		// In the repository root it reads the files there, not its built-in copy.
		if v.Data.Source != "files" || v.Data.Matrix.Path != "matrix.yaml" || v.Data.Matrix.SHA256 != "sha256:"+fileSHA256(t, filepath.Join(repo, "matrix.yaml")) {
			t.Errorf("data %+v", v.Data)
		}
	})
	t.Run("matrix", func(t *testing.T) {
		var cells []struct{ Cell, Doris, Target, CPU, OS, March string }
		if code := runJSON(t, &cells, "matrix", "-o", "json"); code != 0 {
			t.Fatalf("exit %d", code)
		}
		want := m.Cells()
		if len(cells) != len(want) || len(want) == 0 {
			t.Fatalf("%d cells, the matrix has %d", len(cells), len(want))
		}
		k, err := m.Target("kunpeng920")
		if err != nil {
			t.Fatal(err)
		}
		kunpeng := 0
		for i, c := range cells {
			w := want[i]
			if c.Cell != w.Doris.Series+"/"+w.Target.Name || c.Target != w.Target.Name || c.CPU != w.CPU.Name || c.OS != w.OS.ID {
				t.Errorf("cell %d: %+v, the matrix says %s/%s cpu %s os %s", i, c, w.Doris.Series, w.Target.Name, w.CPU.Name, w.OS.ID)
			}
			if c.Target == "kunpeng920" {
				kunpeng++
				if c.CPU != k.CPU || c.OS != k.OS {
					t.Errorf("kunpeng920: cpu %s os %s, the matrix says %s %s", c.CPU, c.OS, k.CPU, k.OS)
				}
			}
		}
		if kunpeng != len(m.SeriesNames()) {
			t.Errorf("%d kunpeng920 cells for %d series", kunpeng, len(m.SeriesNames()))
		}
	})
	t.Run("plan", func(t *testing.T) {
		var p struct {
			Schema       int    `json:"schema"`
			MatrixDigest string `json:"matrix_digest"`
			Cell         struct{ Target, CPU, OS, Series string }
			Patches      []struct{ ID, Component, SHA256 string }
			Steps        []struct{ ID, Kind, Key string }
		}
		if code := runJSON(t, &p, "plan", "--target", "kunpeng920", "-o", "json"); code != 0 {
			t.Fatalf("exit %d", code)
		}
		k, _ := m.Target("kunpeng920")
		if p.Schema != plan.Schema || p.Cell.Target != "kunpeng920" || p.Cell.CPU != k.CPU || p.Cell.OS != k.OS ||
			p.MatrixDigest != "sha256:"+fileSHA256(t, filepath.Join(repo, "matrix.yaml")) {
			t.Errorf("schema %d (want %d), matrix %s, cell %+v", p.Schema, plan.Schema, p.MatrixDigest, p.Cell)
		}
		files := samplePatchFiles(t)
		var ids []string
		for _, pp := range p.Patches {
			ids = append(ids, pp.ID)
			if files[pp.ID] != pp.SHA256 || !strings.HasPrefix(pp.ID, pp.Component+"/") {
				t.Errorf("patch %+v: the file's sha256 is %q", pp, files[pp.ID])
			}
		}
		// The patches the matrix requires for the target are in the plan.
		for _, name := range k.Patches {
			if !slices.ContainsFunc(ids, func(id string) bool { return strings.HasSuffix(id, "-"+name) }) {
				t.Errorf("the matrix requires patch %s for kunpeng920; the plan has %v", name, ids)
			}
		}
		seen := map[string]bool{}
		kinds := map[string]bool{}
		for _, s := range p.Steps {
			if s.ID == "" || seen[s.ID] || s.Kind == "" || !hex64.MatchString(s.Key) {
				t.Errorf("step %+v: want a unique id, a kind and a sha256 key", s)
			}
			seen[s.ID], kinds[s.Kind] = true, true
		}
		for _, k := range []string{"fetch", "patch", "build", "scan"} {
			if !kinds[k] {
				t.Errorf("no %s step in %d steps", k, len(p.Steps))
			}
		}
	})
	t.Run("patch list", func(t *testing.T) {
		var rows []struct{ ID, Component, SHA256 string }
		if code := runJSON(t, &rows, "patch", "list", "--patches", samplePatches, "-o", "json"); code != 0 {
			t.Fatalf("exit %d", code)
		}
		files := samplePatchFiles(t)
		if len(rows) != len(files) {
			t.Errorf("%d rows for %d patch files", len(rows), len(files))
		}
		for _, r := range rows {
			if files[r.ID] == "" || files[r.ID] != r.SHA256 || !strings.HasPrefix(r.ID, r.Component+"/") {
				t.Errorf("row %+v: the file's sha256 is %q", r, files[r.ID])
			}
		}
	})
	t.Run("sources list", func(t *testing.T) {
		var rows []struct{ Entry, Archive, MD5, SHA256 string }
		if code := runJSON(t, &rows, "sources", "list", "-o", "json"); code != 0 {
			t.Fatalf("exit %d", code)
		}
		lock, err := source.ReadLock(filepath.Join(repo, "recipes", "minidoris.lock"))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(lock.Archives) {
			t.Errorf("%d sources, the lock pins %d", len(rows), len(lock.Archives))
		}
		for _, r := range rows {
			pin := lock.Archives[r.Archive]
			// The pin is the archive in the sample's mirror.
			if pin.SHA256 == "" || r.SHA256 != pin.SHA256 || r.MD5 != pin.MD5 ||
				fileSHA256(t, filepath.Join(repo, "examples/minidoris/thirdparty/mirror", r.Archive)) != pin.SHA256 {
				t.Errorf("%+v: the lock pins %+v", r, pin)
			}
		}
	})
	t.Run("cache prune", func(t *testing.T) {
		dir, tree := t.TempDir(), t.TempDir()
		c := &build.Cache{Dir: dir}
		os.WriteFile(filepath.Join(tree, "out.txt"), []byte("a step's output\n"), 0o644)
		if err := c.Init(); err != nil {
			t.Fatal(err)
		}
		if err := c.Put(build.Meta{Key: strings.Repeat("ab", 32), Step: "thirdparty:X"}, tree, []string{"out.txt"}); err != nil {
			t.Fatal(err)
		}
		entries, _ := c.Entries()
		if len(entries) != 1 || entries[0].Bytes == 0 {
			t.Fatalf("entries %+v", entries)
		}
		var v struct {
			EntriesLeft    int   `json:"entries_left"`
			RemovedBytes   int64 `json:"removed_bytes"`
			RemovedEntries int   `json:"removed_entries"`
		}
		if code := runJSON(t, &v, "cache", "prune", "--cache", dir, "--max-size", "0", "-o", "json"); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if v.RemovedEntries != 1 || v.RemovedBytes != entries[0].Bytes || v.EntriesLeft != 0 {
			t.Errorf("prune: %+v, the cache held %+v", v, entries)
		}
	})
	t.Run("scan", func(t *testing.T) {
		elf := arm64Program(t)
		var r struct {
			Target string
			Policy struct {
				CPU      string   `json:"cpu"`
				OS       string   `json:"os"`
				GlibcMax string   `json:"glibc_max"`
				Allowed  []string `json:"allowed_extensions"`
			}
			Inputs  []string
			Files   []struct{ Path, Machine string }
			Summary struct {
				Files, ELF, Violations int
				TextBytes              int64 `json:"text_bytes"`
				Machines               map[string]int
				Clean                  bool
			}
		}
		code := runJSON(t, &r, "scan", "--target", "kunpeng920", "-o", "json", elf)
		k, _ := m.Target("kunpeng920")
		cell, err := m.Cell(m.SeriesNames()[0], "kunpeng920")
		if err != nil {
			t.Fatal(err)
		}
		if r.Target != "kunpeng920" || r.Policy.CPU != k.CPU || r.Policy.OS != k.OS || r.Policy.GlibcMax != cell.OS.Glibc ||
			!slices.Equal(r.Policy.Allowed, cell.Allowed) {
			t.Errorf("policy %+v, the matrix says cpu %s os %s glibc %s allowed %v", r.Policy, k.CPU, k.OS, cell.OS.Glibc, cell.Allowed)
		}
		s := r.Summary
		if s.Files != 1 || s.ELF != 1 || s.Machines["aarch64"] != 1 || s.TextBytes <= 0 || len(r.Files) != 1 || r.Files[0].Machine != "aarch64" ||
			len(r.Inputs) != 1 || r.Inputs[0] != elf {
			t.Errorf("scan of one arm64 program: %+v %+v %v", s, r.Files, r.Inputs)
		}
		if s.Clean != (s.Violations == 0) || (code == 0) != s.Clean {
			t.Errorf("clean %v, %d violations, exit %d", s.Clean, s.Violations, code)
		}
	})
}

var arm64Once struct {
	sync.Once
	path string
	err  error
	out  []byte
}

// arm64Program is a small real aarch64 Linux executable: an empty Go
// program cross-compiled by the go running the tests.
func arm64Program(t *testing.T) string {
	t.Helper()
	arm64Once.Do(func() {
		dir := filepath.Dir(bin)
		src := filepath.Join(dir, "tiny")
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "go.mod"), []byte("module tiny\n\ngo 1.22\n"), 0o644)
		os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
		arm64Once.path = filepath.Join(dir, "tiny-arm64")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", arm64Once.path, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
		arm64Once.out, arm64Once.err = cmd.CombinedOutput()
	})
	if arm64Once.err != nil {
		t.Fatalf("cross-compiling a Go program for arm64: %v\n%s", arm64Once.err, arm64Once.out)
	}
	return arm64Once.path
}
