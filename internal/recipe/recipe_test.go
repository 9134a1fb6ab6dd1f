package recipe

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

func TestRepositoryRecipesLoad(t *testing.T) {
	for _, f := range []string{"doris.yaml", "minidoris.yaml"} {
		r, err := Load(filepath.Join("..", "..", "recipes", f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if got := strings.Join(r.StepNames(), ","); got != "be,fe" {
			t.Errorf("%s: steps %s", f, got)
		}
	}
}

// TestShipsThirdparty: what a third-party-only build ships is data. Every
// shared object a dynamic-OpenSSL BE collects from the install ships; the
// third-party build tools do not.
func TestShipsThirdparty(t *testing.T) {
	for _, f := range []string{"doris.yaml", "minidoris.yaml"} {
		r, err := Load(filepath.Join("..", "..", "recipes", f))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Ships.Thirdparty) == 0 {
			t.Fatalf("%s: ships.thirdparty is empty: a --packages build would judge its build tools as shipped", f)
		}
		shipped := func(p string) bool {
			for _, g := range r.Ships.Thirdparty {
				for q := p; q != "." && q != "/"; q = path.Dir(q) {
					if ok, _ := path.Match(g, q); ok {
						return true
					}
				}
			}
			return false
		}
		for _, c := range r.Collect {
			if strings.HasPrefix(c.From, r.Thirdparty.Install+"/") && !shipped(strings.ReplaceAll(c.From, "*", "x")) {
				t.Errorf("%s: collect %s takes it from the install for the BE, but ships.thirdparty does not ship it", f, c.From)
			}
		}
		for _, p := range []string{"thirdparty/installed/bin/openssl", "thirdparty/installed/bin/protoc", "thirdparty/installed/lib/libssl.a", "thirdparty/installed/lib/libbrpc.so"} {
			if shipped(p) {
				t.Errorf("%s: ships %s", f, p)
			}
		}
	}
}

func TestBadRecipes(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "bad", "*.yaml"))
	if len(files) < 8 {
		t.Fatalf("corpus too small: %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, _ := os.ReadFile(f)
			_, err := Load(f)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), f+":") {
				t.Errorf("error does not name the file: %v", err)
			}
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok && !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestExpand(t *testing.T) {
	ctx := Context{CPU: &matrix.CPU{Name: "tsv110", OpenBLASTarget: "TSV110"}, Allowed: []string{"fp", "simd"}}
	for in, want := range map[string]string{
		"TARGET={{.CPU.OpenBLASTarget}}":             "TARGET=TSV110",
		`{{if .Has "sve"}}sve{{else}}generic{{end}}`: "generic",
		"plain": "plain",
	} {
		got, err := Expand(in, ctx)
		if err != nil || got != want {
			t.Errorf("Expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Expand("{{.Nope}}", ctx); err == nil {
		t.Error("unknown field accepted")
	}
}

// A recipe that cannot be read is bad input that still names its cause, so a
// caller can tell "no such file" from a broken recipe with errors.Is.
func TestLoadMissingKeepsCause(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.yaml")
	_, err := Load(missing)
	if err == nil {
		t.Fatal("a missing recipe loaded")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the cause is lost: %v", err)
	}
	if !fault.IsInput(err) {
		t.Errorf("not bad input: %v", err)
	}
	if !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "--recipe") {
		t.Errorf("message does not name the file and the flag: %v", err)
	}
}
