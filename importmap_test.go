package dorisarm

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestImportMap holds the packages to docs/architecture.md's table: each
// imports of this module only what its row names, every package has a
// row, and every row a package. A new import between packages is then a
// line of the table, reviewed, not an accident (build importing scan is
// fine; scan importing build would make the scanner depend on the runner).
func TestImportMap(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	const head = "| package | job | may import (of this module) |"
	i := strings.Index(string(doc), head)
	if i < 0 {
		t.Fatalf("docs/architecture.md has no table headed %q", head)
	}
	table, _, _ := strings.Cut(string(doc)[i:], "\n\n")
	row := regexp.MustCompile("(?m)^\\| `([^`]+)`(?: \\(`embed.go`\\))? \\| .* \\| ([^|]*) \\|$")
	allowed := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		var names []string
		for _, f := range strings.Split(m[2], ",") {
			if f = strings.Trim(strings.TrimSpace(f), "`"); f != "" && f != "none" {
				names = append(names, f)
			}
		}
		allowed[m[1]] = names
	}
	if len(allowed) < 20 {
		t.Fatalf("docs/architecture.md's package table has %d rows: its format changed?", len(allowed))
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/dorisarm/dorisarm"
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, imports, _ := strings.Cut(line, "|")
		pkg := strings.TrimPrefix(strings.TrimPrefix(path, mod), "/")
		if pkg == "" {
			pkg = "dorisarm"
		}
		seen[pkg] = true
		may, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %s has no row in docs/architecture.md's table (its job, and what it may import)", pkg)
			continue
		}
		if slices.Contains(may, "any") {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			dep, ok := strings.CutPrefix(imp, mod+"/")
			if !ok {
				continue
			}
			if !slices.Contains(may, strings.TrimPrefix(dep, "internal/")) {
				t.Errorf("%s imports %s, which its row in docs/architecture.md does not allow (may import: %s): add it there if it is meant", pkg, dep, strings.Join(may, ", "))
			}
		}
	}
	for pkg := range allowed {
		if !seen[pkg] {
			t.Errorf("docs/architecture.md's table names %s, which is not a package of the module", pkg)
		}
	}
}
