package dorisarm

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds a function of the project's own code (tests and
// generated files aside), as gocyclo -over 40 (make lint) bounds its
// branches: a function longer than a screenful or two is several jobs,
// and the next maintainer reads it whole to change one of them.
const maxFuncLines = 120

// TestFunctionLength fails on a function of the module's or the Dagger
// module's code longer than maxFuncLines, naming it.
func TestFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != "." || d.Name() == "testdata" || d.Name() == "out") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n++
			if lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; lines > maxFuncLines {
				t.Errorf("%s: %s is %d lines, over %d: split it along its own sections", fset.Position(fd.Pos()), fd.Name.Name, lines, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("read %d functions: the walk missed the code", n)
	}
}
