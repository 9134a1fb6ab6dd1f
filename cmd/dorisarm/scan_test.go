package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestScanCommand(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x.c"), []byte("int f(void){return 1;}\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "tree/be/lib"), 0o755)
	if out, err := exec.Command("gcc", "-shared", "-fPIC", filepath.Join(dir, "x.c"), "-o", filepath.Join(dir, "tree/be/lib/libx.so")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	tree := filepath.Join(dir, "tree")
	// Without a target: a report, exit 0.
	out, _, code := run(t, "scan", tree)
	if code != 0 || !strings.Contains(out, "be/lib/libx.so  x86_64 dyn") {
		t.Errorf("no target: %d\n%s", code, out)
	}
	// An x86 library in an arm64 build: exit 1.
	out, errOut, code := run(t, "scan", "--target", "kunpeng920", "--format", "json", tree)
	var rep struct {
		Findings []struct{ Kind, Path string }
		Summary  struct{ Violations int }
	}
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Summary.Violations != 1 || rep.Findings[0].Path != "be/lib/libx.so" {
		t.Errorf("kunpeng920: %d %s %s", code, out, errOut)
	}
	// The x86_64 target accepts it.
	if _, _, code := run(t, "scan", "--target", "x86_64", tree); code != 0 {
		t.Errorf("x86_64 target: exit %d", code)
	}
	// An allow file waives it and says so.
	allow := filepath.Join(dir, "allow.yaml")
	os.WriteFile(allow, []byte("exceptions:\n  - {path: be/lib/libx.so, kind: foreign-arch, reason: x86 installer helper}\n"), 0o644)
	out, _, code = run(t, "scan", "--target", "kunpeng920", "--allow", allow, tree)
	if code != 0 || !strings.Contains(out, "used 1 time(s)") {
		t.Errorf("allow: %d\n%s", code, out)
	}
	// A scope: the same library as a build tool that does not ship is still
	// foreign code; --ship needs a target and globs of the tree's paths.
	out, _, code = run(t, "scan", "--target", "kunpeng920", "--ship", "be/bin", "-o", "json", tree)
	var scoped struct {
		Policy  struct{ Ships []string }
		Files   []struct{ Path, Scope string }
		Summary struct {
			Violations int
			Scopes     map[string]int
		}
	}
	if code != 1 || json.Unmarshal([]byte(out), &scoped) != nil || scoped.Summary.Violations != 1 || len(scoped.Policy.Ships) != 1 ||
		scoped.Files[0].Scope != "not-shipped" || scoped.Summary.Scopes["not-shipped"] != 1 {
		t.Errorf("--ship: %d %s", code, out)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"scan", "--target", "kunpeng920", "/no/such/dir"}, "scan input /no/such/dir"},
		// A missing path is not sent to a registry unless it clearly names one.
		{[]string{"scan", "docker.io/library/ubuntu"}, "no such file or directory"},
		{[]string{"scan", "out/kunpeng920"}, "no such file or directory"},
		// A FIFO would block the scan forever.
		{[]string{"scan", fifo}, "not a regular file or directory"},
		{[]string{"scan", "--target", "nope", tree}, `unknown target "nope"`},
		{[]string{"scan", "-o", "xml", tree}, `--output/--format "xml"`},
		{[]string{"scan"}, "requires at least 1 arg"},
		{[]string{"scan", "--allow", filepath.Join(dir, "x.c"), tree}, "x.c:1:1"},
		{[]string{"scan", "--ship", "be/lib", tree}, "name the target"},
		{[]string{"scan", "--target", "kunpeng920", "--ship", "/be/lib", tree}, `ships "/be/lib": not a glob of paths in the scanned tree`},
	} {
		_, errOut, code := run(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %q, want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	// Unreadable input without a target: exit 2.
	os.WriteFile(filepath.Join(tree, "broken.so"), []byte("\x7fELF\x02\x01\x01"), 0o644)
	if _, _, code := run(t, "scan", tree); code != 2 {
		t.Errorf("unreadable without target: exit %d", code)
	}
}
