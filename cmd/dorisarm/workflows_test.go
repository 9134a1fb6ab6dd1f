package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// TestWorkflowsLint runs actionlint (installed by scripts/install-deps.sh
// into .cache/bin) over .github/workflows.
func TestWorkflowsLint(t *testing.T) {
	bin := filepath.Join(repo, ".cache", "bin", "actionlint")
	if _, err := os.Stat(bin); err != nil {
		t.Skip("actionlint not installed (scripts/install-deps.sh)")
	}
	files, _ := filepath.Glob(filepath.Join(repo, ".github", "workflows", "*.yml"))
	if len(files) < 4 {
		t.Fatalf("workflows: %v", files)
	}
	if out, err := exec.Command(bin, files...).CombinedOutput(); err != nil {
		t.Fatalf("actionlint: %v\n%s", err, out)
	}
}

// TestWorkflowsCallRealThings checks what the workflows call: every `dagger
// call FUNCTION --flag` names a function of the Dagger module and its
// parameters, and every dorisarm command line names real flags.
func TestWorkflowsCallRealThings(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(repo, "ci", "main.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]map[string]bool{} // kebab function -> kebab params
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || !fn.Name.IsExported() {
			continue
		}
		ps := map[string]bool{}
		for _, field := range fn.Type.Params.List {
			for _, n := range field.Names {
				ps[kebab(n.Name)] = true
			}
		}
		params[kebab(fn.Name.Name)] = ps
	}
	root := newRoot()
	files, _ := filepath.Glob(filepath.Join(repo, ".github", "workflows", "*.yml"))
	calls := 0
	for _, file := range files {
		data, _ := os.ReadFile(file)
		var wf struct {
			Jobs map[string]struct {
				Steps []struct {
					Uses string            `yaml:"uses"`
					With map[string]string `yaml:"with"`
				} `yaml:"steps"`
			} `yaml:"jobs"`
		}
		if err := yaml.Unmarshal(data, &wf); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, job := range wf.Jobs {
			for _, st := range job.Steps {
				if !strings.HasPrefix(st.Uses, "dagger/dagger-for-github") || st.With["verb"] != "call" {
					continue
				}
				words := strings.Fields(st.With["args"])
				fn, ok := params[words[0]]
				if !ok {
					t.Errorf("%s: dagger call %s: the module has no such function", file, words[0])
					continue
				}
				calls++
				for _, w := range words[1:] {
					if w == "export" {
						break // a call on the returned directory
					}
					if name, ok := strings.CutPrefix(w, "--"); ok {
						name, _, _ = strings.Cut(name, "=")
						if !fn[name] {
							t.Errorf("%s: dagger call %s --%s: no such parameter", file, words[0], name)
						}
					}
				}
			}
		}
		lines := strings.Split(string(data), "\n")
		for n, line := range lines {
			i := strings.Index(line, "./cmd/dorisarm ")
			if i < 0 {
				continue
			}
			// A command continued over lines with backslashes.
			text := line[i+len("./cmd/dorisarm "):]
			for k := n; strings.HasSuffix(strings.TrimSpace(lines[k]), "\\") && k+1 < len(lines); k++ {
				text += " " + lines[k+1]
			}
			var words []string
			for _, w := range strings.Fields(strings.ReplaceAll(text, "\\", "")) {
				if strings.HasPrefix(w, "\"") || strings.HasPrefix(w, "$") {
					continue // an argument from the environment, not a flag
				}
				words = append(words, w)
			}
			cmd, rest, err := root.Find(words)
			if err != nil || cmd == root {
				t.Errorf("%s: dorisarm %v: no such command", file, words)
				continue
			}
			calls++
			for _, w := range rest {
				name, ok := strings.CutPrefix(w, "--")
				name, _, _ = strings.Cut(name, "=")
				if ok && cmd.Flags().Lookup(name) == nil {
					t.Errorf("%s: dorisarm %s --%s: no such flag", file, cmd.Name(), name)
				}
			}
		}
	}
	if calls < 3 {
		t.Errorf("found only %d calls in the workflows", calls)
	}
}

func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Only pushes to main may write the shared step cache: no workflow that
// uses it grants
// packages: write at the top, a job that has it runs only on a push to
// main, and a job that pushes the cache is such a job (every other says
// --push-cache=false).
func TestWorkflowsCacheWritesOnlyFromMain(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repo, ".github", "workflows", "*.yml"))
	pushes := 0
	for _, file := range files {
		data, _ := os.ReadFile(file)
		if !strings.Contains(string(data), "--cache-repo") {
			continue // does not touch the shared step cache (a release publishes images)
		}
		var wf struct {
			Permissions map[string]string `yaml:"permissions"`
			Jobs        map[string]struct {
				If          string            `yaml:"if"`
				Permissions map[string]string `yaml:"permissions"`
				Steps       []struct {
					With map[string]string `yaml:"with"`
				} `yaml:"steps"`
			} `yaml:"jobs"`
		}
		if err := yaml.Unmarshal(data, &wf); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if wf.Permissions["packages"] == "write" {
			t.Errorf("%s: packages: write for every job; give it only to the job that runs on pushes to main", file)
		}
		for name, job := range wf.Jobs {
			mainOnly := strings.Contains(job.If, "github.event_name == 'push'") && strings.Contains(job.If, "refs/heads/main")
			if job.Permissions["packages"] == "write" && !mainOnly {
				t.Errorf("%s: job %s has packages: write but runs on more than pushes to main (if: %q)", file, name, job.If)
			}
			for _, st := range job.Steps {
				args := st.With["args"]
				if !strings.Contains(args, "--push-cache") {
					continue
				}
				switch {
				case strings.Contains(args, "--push-cache=true"):
					pushes++
					if !mainOnly || job.Permissions["packages"] != "write" {
						t.Errorf("%s: job %s pushes the cache but is not the main-only job with packages: write", file, name)
					}
				case !strings.Contains(args, "--push-cache=false"):
					t.Errorf("%s: job %s: --push-cache must be a literal true (main-only job) or false", file, name)
				}
			}
		}
	}
	if pushes == 0 {
		t.Error("no workflow pushes the shared cache from main")
	}
}
