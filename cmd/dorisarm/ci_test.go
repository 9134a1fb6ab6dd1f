package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDaggerModuleCommands checks every dorisarm command line in the Dagger
// module (ci/main.go, which cannot run here) against the real CLI: the
// subcommand exists and every --flag it passes is one the subcommand takes.
func TestDaggerModuleCommands(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(repo, "ci", "main.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	// In each function: every []string{"dorisarm", "cmd", ...} literal is a
	// command line, and append(args, "--flag", ...) adds flags to the
	// function's command line.
	var lines [][]string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		cmds := map[string][]string{} // variable -> the command line it holds
		words := func(elts []ast.Expr) []string {
			if len(elts) < 2 {
				return nil
			}
			first, ok1 := literal(elts[0])
			_, ok2 := literal(elts[1])
			if !ok1 || !ok2 || first != "dorisarm" {
				return nil // not a command line (e.g. a cache key)
			}
			var w []string
			for _, e := range elts {
				if s, ok := literal(e); ok {
					w = append(w, s)
				}
			}
			return w
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if len(n.Lhs) == 1 && len(n.Rhs) == 1 {
					if id, ok := n.Lhs[0].(*ast.Ident); ok {
						if cl, ok := n.Rhs[0].(*ast.CompositeLit); ok {
							if w := words(cl.Elts); w != nil {
								cmds[id.Name] = w
							}
						}
					}
				}
			case *ast.CompositeLit:
				if w := words(n.Elts); w != nil {
					lines = append(lines, w)
				}
			case *ast.CallExpr:
				id, ok := n.Fun.(*ast.Ident)
				if !ok || id.Name != "append" || len(n.Args) < 2 {
					return true
				}
				v, ok := n.Args[0].(*ast.Ident)
				if !ok {
					return true
				}
				base, ok := cmds[v.Name]
				if !ok {
					if strings.HasSuffix(v.Name, "args") {
						t.Errorf("ci/main.go: %s appends to %s, which holds no dorisarm command line", fn.Name.Name, v.Name)
					}
					return true
				}
				var extra []string
				for _, e := range n.Args[1:] {
					if s, ok := literal(e); ok {
						extra = append(extra, s)
					}
				}
				lines = append(lines, append(append([]string{}, base[:2]...), extra...))
			}
			return true
		})
	}
	if len(lines) < 4 {
		t.Fatalf("found only %d dorisarm command lines in ci/main.go", len(lines))
	}
	root := newRoot()
	for _, words := range lines {
		cmd, rest, err := root.Find(words[1:])
		if err != nil || cmd == root {
			t.Errorf("ci/main.go runs %v: no such subcommand", words)
			continue
		}
		for _, w := range rest {
			if name, ok := strings.CutPrefix(w, "--"); ok && cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
				t.Errorf("ci/main.go passes %s to dorisarm %s, which has no such flag", w, cmd.Name())
			}
		}
	}
	var dj struct {
		Name   string `json:"name"`
		Source string `json:"source"`
		SDK    struct {
			Source string `json:"source"`
		} `json:"sdk"`
	}
	data, err := os.ReadFile(filepath.Join(repo, "dagger.json"))
	if err != nil || json.Unmarshal(data, &dj) != nil || dj.Source != "ci" || dj.SDK.Source != "go" {
		t.Errorf("dagger.json: %v %s", err, data)
	}
}

func literal(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

// TestDaggerModuleLayering checks what the engine would otherwise only show
// by being slow or wrong: every function takes the repository by default
// and without .git (source trees are uploaded whole otherwise), the build
// setup is installed before the source tree and the target's cache volume
// join the container (else every source change and every target reruns
// it), apt's cache volumes are LOCKED and unmounted after the install, and
// Go's caches are where Go looks (GOMODCACHE, GOCACHE set, no GOPATH guess).
func TestDaggerModuleLayering(t *testing.T) {
	slow(t, "builds the Dagger module")
	path := filepath.Join(repo, "ci", "main.go")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, data, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	// A parameter's comment (where Dagger reads its pragmas) ends on the
	// line above it; go/parser does not attach it to the parameter.
	above := map[int]string{}
	for _, cg := range f.Comments {
		above[fset.Position(cg.End()).Line+1] = cg.Text()
	}
	functions := 0
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || !fn.Name.IsExported() {
			continue
		}
		functions++
		for _, field := range fn.Type.Params.List {
			for _, n := range field.Names {
				doc := above[fset.Position(field.Pos()).Line]
				switch n.Name {
				case "source":
					if !strings.Contains(doc, `+defaultPath="/"`) || !strings.Contains(doc, `+ignore=[".git"`) {
						t.Errorf("ci/main.go: %s's source wants +defaultPath=\"/\" and +ignore=[\".git\", ...] (the repository by default, without .git): %q", fn.Name.Name, doc)
					}
				case "dorisSource":
					if !strings.Contains(doc, `+ignore=[".git"`) {
						t.Errorf("ci/main.go: %s's dorisSource wants +ignore=[\".git\"] (Doris's .git is over a gigabyte and no build reads it): %q", fn.Name.Name, doc)
					}
				}
			}
		}
	}
	if functions < 4 {
		t.Fatalf("found %d functions in ci/main.go", functions)
	}
	at := func(s string) int {
		i := strings.Index(src, s)
		if i < 0 {
			t.Fatalf("ci/main.go has no %s", s)
		}
		return i
	}
	install := at(`"--profile", "build"`)
	for _, later := range []string{"WithDirectory(work, source)", "WithMountedCache(cacheDir", `WithDirectory("/src", source)`} {
		if at(later) < install {
			t.Errorf("ci/main.go: %s comes before install-deps.sh runs, so the install reruns for every source change or target", later)
		}
	}
	for _, apt := range []string{`"/var/cache/apt"`, `"/var/lib/apt/lists"`} {
		mount := at("WithMountedCache(" + apt)
		if line := src[mount : mount+strings.Index(src[mount:], "\n")]; !strings.HasSuffix(strings.TrimSpace(line), "locked).") {
			t.Errorf("ci/main.go: the apt cache %s must be mounted LOCKED (apt locks it): %s", apt, line)
		}
		if at("WithoutMount("+apt+")") < install {
			t.Errorf("ci/main.go: %s must be unmounted after the install, else the LOCKED volume serialises every later step", apt)
		}
	}
	for _, env := range []string{`WithEnvVariable("GOMODCACHE", goModCache)`, `WithEnvVariable("GOCACHE", goBuildCache)`, "WithMountedCache(goModCache", "WithMountedCache(goBuildCache"} {
		at(env)
	}
	if strings.Contains(src, "/root/go") {
		t.Errorf("ci/main.go mounts a cache under /root/go, where golang images do not look (GOPATH=/go)")
	}
}
