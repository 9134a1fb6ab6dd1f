package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/sign"
	"github.com/dorisarm/dorisarm/internal/testproc"
)

// TestExitStatusTable: README.md's "Exit status" table lists exactly the
// statuses main.go declares (its exit* constants), each with the meaning
// the code gives it, and an error of each kind exits with its status: the
// table cannot drift from the code.
func TestExitStatusTable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "\n## Exit status\n")
	if !ok {
		t.Fatal(`README.md has no "## Exit status" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	documented := map[int]string{} // status → its row's meaning
	for _, l := range strings.Split(sec, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 4 {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			continue // the header and its rule
		}
		if _, twice := documented[n]; twice {
			t.Errorf("README.md lists exit status %d twice", n)
		}
		documented[n] = strings.TrimSpace(cells[2])
	}

	// The statuses in the code, as main.go declares them.
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]int{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, id := range vs.Names {
			if !strings.HasPrefix(id.Name, "exit") || i >= len(vs.Values) {
				continue
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			v, err := strconv.Atoi(lit.Value)
			if !ok || err != nil {
				t.Errorf("main.go: %s is not an integer literal", id.Name)
			}
			declared[id.Name] = v
		}
		return true
	})

	// What the code does with an error of each kind, and the words its
	// row must say.
	enospc := &fs.PathError{Op: "write", Path: "/var/cache/dorisarm/x", Err: syscall.ENOSPC}
	kinds := map[string]struct {
		status int
		means  string
	}{
		"exitOK":          {exitCode(nil, true), "success"},
		"exitCheck":       {exitCode(fault.Gatef("scan: 3 violations"), true), "a check failed"},
		"exitUsage":       {exitCode(fault.Inputf("--jobs 0"), true), "bad input or usage"},
		"exitEnv":         {exitCode(fault.Gatef("build failed: %w", enospc), true), "the machine or the network failed"},
		"exitInterrupted": {exitInterrupted, "interrupted"},
	}
	for name, v := range declared {
		k, ok := kinds[name]
		if !ok {
			t.Errorf("main.go declares %s = %d, which this test does not know: add it to the table in README.md and here", name, v)
			continue
		}
		if k.status != v {
			t.Errorf("%s is %d, but an error of its kind exits %d", name, v, k.status)
		}
		meaning, ok := documented[v]
		switch {
		case !ok:
			t.Errorf("README.md's exit status table lacks %d (%s)", v, name)
		case !strings.HasPrefix(meaning, k.means):
			t.Errorf("README.md says exit status %d means %q; the code's %s means %q", v, meaning, name, k.means)
		}
	}
	for n := range documented {
		found := false
		for _, v := range declared {
			found = found || v == n
		}
		if !found {
			t.Errorf("README.md documents exit status %d, which dorisarm does not use", n)
		}
	}
	if len(declared) != len(kinds) {
		t.Errorf("main.go declares %v; this test knows %d statuses", declared, len(kinds))
	}
}

// TestScanNothingToJudgeExitsTwo: a tree of text files (the repository's
// docs/, the reported case) is nothing checked: exit 2, saying what the
// scanner judges, never "clean".
func TestScanNothingToJudgeExitsTwo(t *testing.T) {
	text := t.TempDir()
	os.WriteFile(filepath.Join(text, "be.conf"), []byte("priority_networks = 10.0.0.0/8\n"), 0o644)
	os.WriteFile(filepath.Join(text, "start_be.sh"), []byte("#!/bin/sh\nexec doris_be\n"), 0o755)
	for _, args := range [][]string{
		{"scan", "--target", "kunpeng920", "docs"},
		{"scan", "--target", "kunpeng920", "-o", "json", text},
		{"scan", text},
	} {
		out, errOut, code := run(t, args...)
		if code != 2 || !strings.Contains(errOut, "none of them code the scanner judges (it judges ELF programs") || !strings.Contains(errOut, "jars") {
			t.Errorf("%v: exit %d %q, want 2 saying nothing in it is judged and what is", args, code, errOut)
		}
		if strings.Contains(out+errOut, "clean for") || strings.Contains(out, `"clean"`) {
			t.Errorf("%v: says clean:\n%s%s", args, out, errOut)
		}
	}
}

// keyPair writes a throw-away cosign key pair and returns the public key.
func keyPair(t *testing.T) string {
	t.Helper()
	_, pub, err := sign.Keygen(t.TempDir(), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// registryCommands are commands that read a registry reference, for ref.
func registryCommands(pub, host, ref string) [][]string {
	return [][]string{
		{"verify", "--key", pub, host + "/" + ref},
		{"promote", "--key", pub, host + "/" + ref, host + "/release/doris-be:9.9.9-kunpeng920"},
		{"image", "inspect", host + "/" + ref},
		{"scan", "--target", "kunpeng920", "docker://" + host + "/" + ref},
	}
}

// TestRegistryDownExitsThree: a registry that cannot be reached (a closed
// port on loopback) is the network failing: exit 3, for every command
// that reads a registry, naming where and what to do; so are a registry
// that refuses the credentials and one that fails with 503.
func TestRegistryDownExitsThree(t *testing.T) {
	pub := keyPair(t)
	closed := testproc.FreeAddr(t) // nothing listens there
	for _, args := range registryCommands(pub, closed, "doris/doris-be:2.1.8-kunpeng920") {
		_, errOut, code := run(t, args...)
		if code != 3 || !strings.Contains(errOut, "the network failed reaching "+closed) || !strings.Contains(errOut, "connection refused") || !strings.Contains(errOut, "exit status 3") {
			t.Errorf("%v: exit %d %q, want 3 naming %s", args, code, errOut, closed)
		}
	}
	for _, c := range []struct {
		status     int
		body, want string
	}{
		{401, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":[{"Type":"repository","Class":"","Name":"doris/doris-be","Action":"pull"}]}]}`, "refused the credentials (401 Unauthorized"},
		{503, `{"errors":[{"code":"UNAVAILABLE","message":"service unavailable"}]}`, "failed (503 Service Unavailable"},
	} {
		host := distribution(t, c.status, c.body)
		args := []string{"verify", "--key", pub, host + "/doris/doris-be:2.1.8-kunpeng920"}
		_, errOut, code := run(t, args...)
		if code != 3 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "map[") || strings.Contains(errOut, `"errors"`) {
			t.Errorf("registry answering %d: exit %d %q, want 3 and %q", c.status, code, errOut, c.want)
		}
	}
}

// TestUnknownTagExitsTwo: a tag the registry does not have is bad input
// (exit 2), said with the reference and what to do, without the
// registry's code or its detail as Go prints it ("MANIFEST_UNKNOWN:
// manifest unknown; map[Tag:9.9.9-kunpeng920]", the reported message).
func TestUnknownTagExitsTwo(t *testing.T) {
	pub := keyPair(t)
	host := distribution(t, http.StatusNotFound, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"9.9.9-kunpeng920"}}]}`)
	for _, args := range registryCommands(pub, host, "doris/doris-be:9.9.9-kunpeng920") {
		_, errOut, code := run(t, args...)
		if code != 2 || !strings.Contains(errOut, "the registry "+host+" has no tag 9.9.9-kunpeng920 in doris/doris-be: check the tag") {
			t.Errorf("%v: exit %d %q, want 2 naming the tag", args, code, errOut)
		}
		for _, raw := range []string{"map[", "MANIFEST_UNKNOWN", "manifest unknown", "exit status 3"} {
			if strings.Contains(errOut, raw) {
				t.Errorf("%v: %q says %q", args, errOut, raw)
			}
		}
	}
}

// distribution is a registry on loopback that answers /v2/ and every
// other request with status and body, as docker-registry (CNCF
// distribution) does: JSON errors with their detail.
func distribution(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			w.Write([]byte(body))
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestFullDiskExitsThree: a write that finds the disk full is the machine
// failing, wherever it happens: exit 3, saying the disk is full and which
// path. The disk is a tmpfs filled up (skipped where none can be mounted;
// TestExitCodeMapping classifies a wrapped syscall.ENOSPC everywhere).
func TestFullDiskExitsThree(t *testing.T) {
	full := testproc.FullDisk(t)
	t.Setenv("COSIGN_PASSWORD", "pw")
	// keygen's keys: bad input by its mark, a full disk by its cause.
	keys := filepath.Join(full, "keys")
	_, errOut, code := run(t, "keygen", "--out", keys)
	if code != 3 || !strings.Contains(errOut, "no space left on device") || !strings.Contains(errOut, "the disk is full: no space left on the filesystem that holds "+filepath.Join(keys, "cosign.key")) {
		t.Errorf("keygen: exit %d %q, want 3, the full disk and the key's path", code, errOut)
	}

	// The output, redirected to a file on the full disk.
	outFile, err := os.Create(filepath.Join(full, "scan.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd := exec.Command(bin, "scan", "-o", "json", bin)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = outFile, &stderr
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 3 || !strings.Contains(stderr.String(), "no space left on device") || !strings.Contains(stderr.String(), "the disk is full: no space left where the output goes (stdout)") {
		t.Errorf("scan > a file on the full disk: exit %d %q, want 3 and the full disk", code, stderr.String())
	}

	// A build whose cache is on the full disk (the reported case): the
	// disk, not the sysroot (no --waive-sysroot) nor the build.
	if _, errOut, code := run(t, "plan", "--target", "kunpeng920"); code != 0 {
		t.Logf("build skipped: this machine cannot plan kunpeng920 (exit %d): %s", code, errOut)
		return
	}
	cache := filepath.Join(full, "cache")
	_, errOut, code = run(t, "build", "--target", "kunpeng920", "--cache", cache, "--out", t.TempDir())
	if code != 3 || !strings.Contains(errOut, "the disk is full: no space left on the filesystem that holds "+cache) || strings.Contains(errOut, "--waive-sysroot") {
		t.Errorf("build with its cache on a full disk: exit %d %q, want 3 naming the full disk under %s", code, errOut, cache)
	}
}
