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
	var lines [][]string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		// append(args, "--flag", value) adds flags to a dorisarm command line.
		if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "append" && len(call.Args) > 1 {
			if a, ok := call.Args[0].(*ast.Ident); ok && a.Name == "args" {
				var extra []string
				for _, e := range call.Args[1:] {
					if s, ok := literal(e); ok {
						extra = append(extra, s)
					}
				}
				lines = append(lines, append([]string{"dorisarm", "build"}, extra...))
			}
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok || len(cl.Elts) == 0 {
			return true
		}
		if s, ok := literal(cl.Elts[0]); ok && s == "dorisarm" && len(cl.Elts) > 1 {
			if _, ok := literal(cl.Elts[1]); !ok {
				return true // not a command line (a cache key)
			}
			var words []string
			for _, e := range cl.Elts {
				if s, ok := literal(e); ok {
					words = append(words, s)
				}
			}
			lines = append(lines, words)
		}
		return true
	})
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
