package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The documents whose commands the tests run.
var docs = []string{"README.md", "docs/maintainers.md", "docs/release-managers.md", "docs/architecture.md"}

type block struct {
	doc, info, text string
	line            int
}

// shellBlocks returns a document's fenced sh/bash blocks.
func shellBlocks(t *testing.T, doc string) []block {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, doc))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			info := strings.TrimSpace(strings.TrimPrefix(line, "```"))
			cur = &block{doc: doc, info: info, line: n}
		case cur != nil && strings.TrimSpace(line) == "```":
			if w := strings.Fields(cur.info); len(w) > 0 && (w[0] == "sh" || w[0] == "bash") {
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: unclosed code block", doc, cur.line)
	}
	return out
}

func hasWord(info, w string) bool {
	for _, f := range strings.Fields(info) {
		if f == w {
			return true
		}
	}
	return false
}

// TestDocsMarkEveryCommand: every shell block in the docs is either run by
// TestDocsRun ("sh runnable") or says why it cannot be ("sh norun" with a
// "# not run here:" line).
func TestDocsMarkEveryCommand(t *testing.T) {
	runnable := 0
	for _, d := range docs {
		for _, b := range shellBlocks(t, d) {
			switch {
			case hasWord(b.info, "runnable"):
				runnable++
			case hasWord(b.info, "norun"):
				if !strings.Contains(b.text, "# not run here:") {
					t.Errorf("%s:%d: a norun block says why with a \"# not run here: ...\" line", b.doc, b.line)
				}
			default:
				t.Errorf("%s:%d: mark the block \"sh runnable\" (the docs test runs it) or \"sh norun\" with a reason", b.doc, b.line)
			}
		}
	}
	if runnable < 10 {
		t.Errorf("only %d runnable blocks in the docs", runnable)
	}
}

// sandbox copies the repository's tracked files into a temporary directory
// and puts the test's dorisarm at bin/dorisarm.
func sandbox(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("git", "-C", repo, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(repo, f)
		st, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the work tree
		}
		dst := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if st.Mode()&os.ModeSymlink != 0 {
			l, _ := os.Readlink(src)
			os.Symlink(l, dst)
			continue
		}
		in, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		o, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(o, in)
		in.Close()
		o.Close()
	}
	// The sample's last commit dates the images; the copy is no git tree.
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	if err := os.Symlink(bin, filepath.Join(dir, "bin", "dorisarm")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDocsRun runs every "sh runnable" block of each document, in order, in
// a fresh copy of the repository (a document's blocks share it), against the
// bundled sample, with a docker-registry on loopback as $REGISTRY.
func TestDocsRun(t *testing.T) {
	slow(t, "runs the documented walk-through end to end")
	needBuildTools(t)
	reg := startRegistry(t)
	cache := t.TempDir()
	for _, d := range docs {
		var script strings.Builder
		script.WriteString("set -euo pipefail\n")
		n := 0
		for _, b := range shellBlocks(t, d) {
			if hasWord(b.info, "runnable") {
				n++
				script.WriteString("echo '>>> " + d + ":" + strconv.Itoa(b.line) + "'\n" + b.text)
			}
		}
		if n == 0 {
			continue
		}
		t.Run(d, func(t *testing.T) {
			dir := sandbox(t)
			cmd := exec.Command("bash", "-c", script.String())
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "DORISARM_CACHE="+cache, "REGISTRY="+reg, "NO_COLOR=1",
				"SOURCE_DATE_EPOCH=1700000000", "GITHUB_STEP_SUMMARY=")
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: the runnable blocks failed (%v); the output ends:\n%s", d, err, tail(buf.String(), 60))
			}
			if strings.Contains(buf.String(), "panic:") {
				t.Fatalf("%s: a command panicked:\n%s", d, tail(buf.String(), 60))
			}
		})
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
