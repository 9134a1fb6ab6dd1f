package main

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/semver"
)

// The Dagger module (ci/) cannot run here: no engine. These tests do the two
// things that decide whether it can load at all, with the real SDK from the
// Go module proxy:
//
//   - TestDaggerModuleWithRealSDK/resolves: ci/go.mod goes through what
//     Dagger's Go code generator does to it on every load (add the SDK's
//     requirements and replace lines, `go get -u dagger.io/dagger@VERSION`,
//     `go mod tidy`; two passes, as on a fresh checkout), and after each pass
//     the packages the generated code imports build.
//   - TestDaggerModuleWithRealSDK/type-checks: ci/main.go builds and vets
//     against dagger.io/dagger at dagger.json's engineVersion. The generated
//     internal/dagger package is the SDK's client API generated from the same
//     engine schema, so the test stands in a package that aliases every
//     exported name of dagger.io/dagger (Client, Container, the *Opts
//     structs, the enums ...) and a dagger.gen.go that declares dag.
//
// They need the network, so they run only with DORISARM_CI_MODULE=1 (`make
// test-ci-module`, which .ci/run runs).

// generatedImports are the packages Dagger v0.21.0's Go code generator makes
// a module import (cmd/codegen/generator/go/templates/src: module.go.tmpl
// for dagger.gen.go, defs.go.tmpl and _dep.gen.go.tmpl for internal/dagger).
// They decide which modules `go mod tidy` keeps.
var generatedImports = []string{
	"dagger.io/dagger/querybuilder",
	"github.com/Khan/genqlient/graphql",
	"github.com/dagger/otel-go",
	"github.com/vektah/gqlparser/v2/gqlerror",
	"go.opentelemetry.io/otel",
	"go.opentelemetry.io/otel/propagation",
	"go.opentelemetry.io/otel/sdk/resource",
	"go.opentelemetry.io/otel/semconv/v1.40.0",
	"go.opentelemetry.io/otel/trace",
}

func TestDaggerModuleWithRealSDK(t *testing.T) {
	if os.Getenv("DORISARM_CI_MODULE") == "" {
		t.Skip("needs the Go module proxy: run `make test-ci-module` (sets DORISARM_CI_MODULE=1)")
	}
	version := daggerEngineVersion(t)
	needProxy(t, version)

	dir := t.TempDir()
	goCmd := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := goCmd(args...)
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	// The SDK at the engine's version: its go.mod is what the generator
	// embeds and merges in; its package is what the generated client mirrors.
	writeFile(t, dir, "go.mod", "module probe\n\ngo 1.26\n")
	var sdk struct{ Dir, GoMod string }
	if err := json.Unmarshal([]byte(must("mod", "download", "-json", "dagger.io/dagger@"+version)), &sdk); err != nil {
		t.Fatal(err)
	}
	sdkMod := goModJSON(t, goCmd, sdk.GoMod)

	mod, err := os.ReadFile(filepath.Join(repo, "ci", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(repo, "ci", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "go.mod", string(mod))
	writeFile(t, dir, "main.go", string(src))
	writeFile(t, dir, "dagger.gen.go", "// Stands in for what `dagger develop` generates next to main.go.\npackage main\n\n"+
		"import \"dagger/dorisarm/internal/dagger\"\n\nvar dag *dagger.Client\n\nfunc main() { _ = &Dorisarm{} }\n")
	writeFile(t, dir, "internal/dagger/dagger.gen.go", sdkAliases(t, sdk.Dir))

	resolved := t.Run("resolves", func(t *testing.T) {
		for pass := 1; pass <= 2; pass++ {
			for _, args := range codegenPass(t, goCmd, sdkMod, version) {
				if out, err := goCmd(args...); err != nil {
					t.Fatalf("pass %d: go %s (what Dagger's code generator runs on ci/go.mod): %v\n%s\nci/go.mod then:\n%s",
						pass, strings.Join(args, " "), err, out, readFile(t, dir, "go.mod"))
				}
			}
			if out, err := goCmd("build", "./internal/dagger"); err != nil {
				t.Fatalf("pass %d: the packages the generated code imports do not build after `go get -u dagger.io/dagger@%s` and `go mod tidy`:\n%s\n"+
					"Pin the modules named above with replace lines in ci/go.mod (see the comment there); the go.mod the generator left:\n%s",
					pass, version, out, readFile(t, dir, "go.mod"))
			}
		}
	})
	t.Run("type-checks", func(t *testing.T) {
		if !resolved {
			t.Skip("ci/go.mod does not resolve (see resolves)")
		}
		if out, err := goCmd("build", "-o", os.DevNull, "."); err != nil {
			t.Fatalf("ci/main.go does not compile against dagger.io/dagger %s:\n%s", version, out)
		}
		if out, err := goCmd("vet", "."); err != nil {
			t.Fatalf("go vet on ci/main.go against dagger.io/dagger %s:\n%s", version, out)
		}
	})
}

// daggerEngineVersion is dagger.json's engineVersion: the engine runs its
// own SDK version (the generator's LibVersion).
func daggerEngineVersion(t *testing.T) string {
	t.Helper()
	var dj struct {
		EngineVersion string `json:"engineVersion"`
	}
	data, err := os.ReadFile(filepath.Join(repo, "dagger.json"))
	if err != nil || json.Unmarshal(data, &dj) != nil || !semver.IsValid(dj.EngineVersion) {
		t.Fatalf("dagger.json: want an engineVersion like v0.21.0: %v %s", err, data)
	}
	return dj.EngineVersion
}

// needProxy skips the test when the first proxy in GOPROXY does not serve
// the SDK's version.
func needProxy(t *testing.T, version string) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		t.Fatalf("go env GOPROXY: %v", err)
	}
	proxy := ""
	for _, p := range strings.FieldsFunc(strings.TrimSpace(string(out)), func(r rune) bool { return r == ',' || r == '|' }) {
		if strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://") {
			proxy = strings.TrimSuffix(p, "/")
			break
		}
	}
	if proxy == "" {
		t.Skipf("GOPROXY=%s names no module proxy: the test resolves ci/go.mod as Dagger's engine does, against a proxy (e.g. GOPROXY=https://proxy.golang.org)", strings.TrimSpace(string(out)))
	}
	url := proxy + "/dagger.io/dagger/@v/" + version + ".info"
	c := http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Skipf("the Go module proxy is unreachable (%v): this test needs it to resolve ci/go.mod as Dagger's engine does", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Skipf("%s: %s: the proxy does not serve dagger.io/dagger %s (is dagger.json's engineVersion a released SDK version?)", url, resp.Status, version)
	}
}

type goMod struct {
	Require []struct {
		Path     string
		Version  string
		Indirect bool
	}
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

func goModJSON(t *testing.T, goCmd func(...string) (string, error), file string) goMod {
	t.Helper()
	out, err := goCmd("mod", "edit", "-json", file)
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v\n%s", file, err, out)
	}
	var m goMod
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// codegenPass is one pass of Dagger v0.21.0's Go code generator over the
// module's go.mod (cmd/codegen/generator/go/generate_module.go,
// syncModReplaceAndTidy): each SDK requirement the module has at a lower
// version (or not at all) is raised to the SDK's; each of the SDK's replace
// lines whose target the module requires is copied; then, unless the module
// replaces dagger.io/dagger itself, `go get -u dagger.io/dagger@VERSION`;
// then `go mod tidy`. The commands are returned in that order.
func codegenPass(t *testing.T, goCmd func(...string) (string, error), sdk goMod, version string) [][]string {
	t.Helper()
	mod := goModJSON(t, goCmd, "go.mod")
	have := map[string]string{}
	for _, r := range mod.Require {
		have[r.Path] = r.Version
	}
	var cmds [][]string
	for _, r := range sdk.Require {
		if v, ok := have[r.Path]; ok && semver.Compare(v, r.Version) >= 0 {
			continue
		}
		have[r.Path] = r.Version
		cmds = append(cmds, []string{"mod", "edit", "-require=" + r.Path + "@" + r.Version})
	}
	for _, r := range sdk.Replace {
		if _, ok := have[r.New.Path]; ok {
			cmds = append(cmds, []string{"mod", "edit", "-replace=" + r.Old.Path + "=" + r.New.Path + "@" + r.New.Version})
		}
	}
	replaced := false
	for _, r := range mod.Replace {
		replaced = replaced || r.Old.Path == "dagger.io/dagger"
	}
	if !replaced {
		cmds = append(cmds, []string{"get", "-u", "dagger.io/dagger@" + version})
	}
	return append(cmds, []string{"mod", "tidy"})
}

// sdkAliases is a Go package dagger that re-exports every exported name of
// the SDK's package in dir (types as aliases, so methods come along) and
// imports what the generated code imports.
func sdkAliases(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var types, values []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "dagger" {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() && d.Type.TypeParams == nil {
					values = append(values, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && s.TypeParams == nil {
							types = append(types, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								values = append(values, n.Name)
							}
						}
					}
				}
			}
		}
	}
	if len(types) < 50 {
		t.Fatalf("found only %d exported types in %s: not the Dagger SDK?", len(types), dir)
	}
	sort.Strings(types)
	sort.Strings(values)
	var b strings.Builder
	b.WriteString("// Stands in for the generated internal/dagger: the SDK's client API.\npackage dagger\n\nimport (\n\tsdk \"dagger.io/dagger\"\n")
	for _, p := range generatedImports {
		fmt.Fprintf(&b, "\t_ %q\n", p)
	}
	b.WriteString(")\n\n")
	for _, n := range types {
		fmt.Fprintf(&b, "type %s = sdk.%s\n", n, n)
	}
	for _, n := range values {
		fmt.Fprintf(&b, "var %s = sdk.%s\n", n, n)
	}
	return b.String()
}

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err.Error()
	}
	return string(data)
}
