package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
			On          map[string]any    `yaml:"on"`
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
		// A workflow only tags start (a release: it publishes images, it
		// reads the cache and never writes it) may give every job
		// packages: write; one that pull requests or a dispatch start may not.
		_, pr := wf.On["pull_request"]
		_, dispatch := wf.On["workflow_dispatch"]
		if wf.Permissions["packages"] == "write" && (pr || dispatch) {
			t.Errorf("%s: packages: write for every job of a workflow pull requests or dispatches start; give it only to the job that runs on pushes to main", file)
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

// TestWorkflowsSignWithFreshTokens: GitHub's OIDC tokens expire minutes
// after they are fetched, so no workflow fetches one up front and hands
// it to a long build: every keyless dagger call gets the runner's token
// endpoint (dorisarm fetches a token per certificate).
func TestWorkflowsSignWithFreshTokens(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repo, ".github", "workflows", "*.yml"))
	keyless := 0
	for _, file := range files {
		data, _ := os.ReadFile(file)
		text := string(data)
		for _, early := range []string{"getIDToken", "sigstore-token", "--id-token", "--cache-id-token", "SIGSTORE_ID_TOKEN"} {
			if strings.Contains(text, early) {
				t.Errorf("%s: %s: a token fetched at the start of the job expires before the build signs", file, early)
			}
		}
		for _, call := range strings.Split(text, "dagger/dagger-for-github")[1:] {
			if !strings.Contains(call, "--keyless") && !strings.Contains(call, "--push-cache=true") {
				continue
			}
			keyless++
			if !strings.Contains(call, "--actions-token-url=env:ACTIONS_ID_TOKEN_REQUEST_URL") || !strings.Contains(call, "--actions-token=env:ACTIONS_ID_TOKEN_REQUEST_TOKEN") {
				t.Errorf("%s: a dagger call that signs keyless without the runner's token endpoint", file)
			}
		}
	}
	if keyless == 0 {
		t.Error("no workflow signs keyless")
	}
	rel, _ := os.ReadFile(filepath.Join(repo, ".github", "workflows", "release.yml"))
	if !strings.Contains(string(rel), "concurrency:") || !strings.Contains(string(rel), "--cache-repo=") {
		t.Error("release.yml: no concurrency group, or it does not restore from the shared cache")
	}
}

// TestIdentityRegexpsMatchReleaseTags: the certificate identity regexps
// the docs and workflows give for release.yml's signatures match the ref
// of a tag the release workflow runs on (doris-*), and not another's.
func TestIdentityRegexpsMatchReleaseTags(t *testing.T) {
	rel, err := os.ReadFile(filepath.Join(repo, ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On struct {
			Push struct {
				Tags []string `yaml:"tags"`
			} `yaml:"push"`
		} `yaml:"on"`
	}
	if err := yaml.Unmarshal(rel, &wf); err != nil || len(wf.On.Push.Tags) == 0 {
		t.Fatalf("release.yml: no push tags (%v)", err)
	}
	var tags []string
	for _, glob := range wf.On.Push.Tags {
		for _, v := range []string{"2.1.8", "3.0.3", "2.1.7-rc01"} {
			tags = append(tags, strings.Replace(glob, "*", v, 1))
		}
	}
	var files []string
	for _, g := range []string{"docs/*.md", "README.md", ".github/workflows/*.yml"} {
		m, _ := filepath.Glob(filepath.Join(repo, g))
		files = append(files, m...)
	}
	re := regexp.MustCompile(`--certificate-identity-regexp[ =]['"]([^'"]+)['"]`)
	checked := 0
	for _, file := range files {
		data, _ := os.ReadFile(file)
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			if !strings.Contains(m[1], "release") {
				continue
			}
			pattern := strings.NewReplacer("${{ github.repository }}", "ORG/REPO").Replace(m[1])
			r, err := regexp.Compile(pattern)
			if err != nil {
				t.Errorf("%s: %q: %v", file, m[1], err)
				continue
			}
			checked++
			for _, tag := range tags {
				if id := "https://github.com/ORG/REPO/.github/workflows/release.yml@refs/tags/" + tag; !r.MatchString(id) {
					t.Errorf("%s: %q does not match the release of tag %s (%s)", file, m[1], tag, id)
				}
			}
			if r.MatchString("https://github.com/ORG/REPO/.github/workflows/release.yml@refs/heads/main") {
				t.Errorf("%s: %q matches a branch's signature too", file, m[1])
			}
		}
	}
	if checked == 0 {
		t.Error("no identity regexp for release.yml found in the docs or workflows")
	}
}
