package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/sign"
	"github.com/dorisarm/dorisarm/internal/source"
	"github.com/dorisarm/dorisarm/internal/testproc"
)

// hostileScript is what a compromised package script and BE build try,
// run at the start of every package step and at the end of the BE step.
// Each attempt that works prints a line "ESCAPED <what>" into the step's
// log; the test then also checks the machine for what each would have
// changed. Its constants are the test's paths, as an attacker who knows
// the build machine's layout would write them.
const hostileScript = `#!/usr/bin/env bash
# Tries to get out of a dorisarm build step. Not for use anywhere else.
echo "HOSTILE RAN $1 as $(id -u)"
CACHE=%[1]q KEYS=%[2]q MARK=%[3]q REGISTRY=%[4]q TOKEN=%[5]q HOSTTOOLS=%[6]q MODE=%[7]q
here="${DORIS_HOME:-$PWD}"
# The cache, found from the tree's own path and by name.
for c in "$CACHE" "$(cd "$here/../../.." 2>/dev/null && pwd)"; do
  for e in "$c"/steps/*/; do
    [ -f "$e/meta.json" ] || continue
    echo poisoned > "$e/files.tar" 2>/dev/null && echo "ESCAPED cache-rewrite $e"
  done
done
# Secrets: the environment, the keys, dorisarm's command line.
env | grep -E '^(COSIGN_|SIGSTORE_|GITHUB_TOKEN|ACTIONS_ID_TOKEN|DOCKER_|AWS_SECRET)' && echo "ESCAPED secret-env"
cat "$KEYS"/*.key 2>/dev/null | grep -q . && echo "ESCAPED key-file"
for p in /proc/[0-9]*; do
  tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q -- '--cache-sign-key' && echo "ESCAPED cmdline $p"
  ls "$p/root$CACHE/steps" >/dev/null 2>&1 && echo "ESCAPED proc-root $p"
  nsenter --net="$p/ns/net" true 2>/dev/null && [ "$(readlink "$p/ns/net")" != "$(readlink /proc/self/ns/net)" ] && echo "ESCAPED nsenter $p"
done
# The network: the registry on the build machine's loopback.
curl -s -m 3 "http://$REGISTRY/v2/" >/dev/null 2>&1 && echo "ESCAPED network"
# The isolation itself.
umount "$here" 2>/dev/null && echo "ESCAPED umount-tree"
umount /usr 2>/dev/null && echo "ESCAPED umount-usr"
# The rest of the machine.
mkdir -p "$MARK" 2>/dev/null && touch "$MARK/planted" 2>/dev/null
[ -w "$HOSTTOOLS/fakegen" ] && echo "ESCAPED host-tool-writable"
# A daemon that would change the published build after the gate.
setsid sh -c "sleep 600 # $TOKEN" </dev/null >/dev/null 2>&1 &
if [ "$1" = be ]; then
  bin="$here/thirdparty/installed/bin"
  case "$MODE" in
  tools)
    # Write the host's code generator through its path in the tree, then
    # make the directory a link to where the host keeps it, so that
    # putting the tree back deletes the host's program.
    echo 'owned' > "$bin/fakegen" 2>/dev/null
    rm -rf "$bin" && ln -s "$HOSTTOOLS" "$bin"
    ;;
  copy)
    mkdir -p "$here/output/be/bin" && cp "$bin/fakegen" "$here/output/be/bin/fakegen"
    ;;
  link)
    ln -sf /etc/shadow "$here/output/be/lib/libplanted.so"
    ;;
  esac
fi
exit 0
`

// TestHostileTree builds a tree whose package script and BE build try
// every escape, through dorisarm build with a shared cache pushed to a
// real registry, as root and as an unprivileged user: every attempt fails
// inside the step or is detected (the step or the gate fails, naming
// it), the clean tree's next build publishes exactly what it did before
// from the same cache, and what --cache-to pushed verifies on a fresh
// cache with --cache-verify-key.
func TestHostileTree(t *testing.T) {
	e2eOnly(t, "builds a hostile tree three times, as root and as nobody, against a real docker-registry")
	needBuildTools(t)
	for _, tool := range []string{"bwrap", "curl", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-deps.sh)", tool)
		}
	}
	t.Run("as-dorisarms-user", func(t *testing.T) { hostileTree(t, -1) })
	t.Run("unprivileged", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("the run above was already unprivileged")
		}
		hostileTree(t, 65534)
	})
}

func hostileTree(t *testing.T, uid int) {
	dir, err := os.MkdirTemp("", "dorisarm-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	addr, _ := testproc.RegistryStorage(t)
	repo := addr + "/dorisarm/hostile"
	keys := filepath.Join(dir, "keys")
	priv, pub, err := sign.Keygen(keys, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	// The build machine's code generator the recipe names (build_tools).
	hostTools := filepath.Join(dir, "hosttools")
	writeMode(t, filepath.Join(hostTools, "fakegen"), "#!/bin/sh\necho fakegen 1.0\n", 0o755)
	toolDigest, _ := source.FileDigest(filepath.Join(hostTools, "fakegen"))
	recipe := hostileRecipe(t, dir)
	clean := filepath.Join(dir, "clean")
	copyDir(t, filepath.Join(repo_(t), "examples", "minidoris"), clean)
	cache := filepath.Join(dir, "cache")
	mark := filepath.Join(dir, "planted-by-the-step")
	token := fmt.Sprintf("dorisarm-hostile-%d", time.Now().UnixNano())
	hostile := func(mode string) string {
		tree := filepath.Join(dir, "hostile-"+mode)
		copyDir(t, clean, tree)
		writeMode(t, filepath.Join(tree, "thirdparty", "hostile.sh"), fmt.Sprintf(hostileScript, cache, keys, mark, addr, token, hostTools, mode), 0o755)
		appendBefore(t, filepath.Join(tree, "thirdparty", "build-thirdparty.sh"), "for p in ", "bash \"${TP_DIR}/hostile.sh\" package\n")
		appendFile(t, filepath.Join(tree, "build.sh"), "\nif [[ ${BUILD_BE} -eq 1 ]]; then bash \"${DORIS_HOME}/thirdparty/hostile.sh\" be; fi\n")
		return tree
	}
	trees := map[string]string{"tools": hostile("tools"), "copy": hostile("copy"), "link": hostile("link")}
	if uid > 0 {
		chownTree(t, dir, uid)
	}
	env := append(os.Environ(), "PATH="+hostTools+":"+os.Getenv("PATH"), "COSIGN_PASSWORD=pw",
		"SIGSTORE_ID_TOKEN=oidc-token", "GITHUB_TOKEN=gh-token", "HOME="+dir)
	dorisarm := func(args ...string) (string, int) {
		t.Helper()
		return runAs(t, uid, env, args...)
	}
	build := func(tree, out string, extra ...string) (string, int) {
		t.Helper()
		args := append([]string{"build", "--recipe", recipe, "--source", tree, "--target", "graviton2", "--compiler", "clang", "--out", filepath.Join(dir, out), "--cache", cache}, extra...)
		return dorisarm(args...)
	}

	// The clean tree, cold: what it publishes is the reference.
	if log, code := build(clean, "out-clean"); code != 0 {
		t.Fatalf("clean build: exit %d\n%s", code, log)
	}
	ref := readRecord(t, filepath.Join(dir, "out-clean"), "graviton2")
	entries := cacheEntries(t, cache)

	for _, c := range []struct{ mode, want string }{
		{"tools", "putting the tree back after the build tools"},
		{"copy", "copies of the build machine's code generators"},
		{"link", "libplanted.so is a link to /etc/shadow"},
	} {
		log, code := build(trees[c.mode], "out-"+c.mode, "--cache-to", repo, "--cache-sign-key", priv)
		if code == 0 || !strings.Contains(log, c.want) {
			t.Errorf("hostile build (%s): exit %d, want a failure saying %q\n%s", c.mode, code, c.want, log)
		}
		ran, escaped := stepLogs(t, cache)
		if !strings.Contains(ran, "HOSTILE RAN package") || !strings.Contains(ran, "HOSTILE RAN be") {
			t.Errorf("hostile build (%s): the hostile script did not run in both kinds of step (the checks prove nothing):\n%s", c.mode, ran)
		}
		if uid > 0 && !strings.Contains(ran, "as "+strconv.Itoa(uid)) {
			t.Errorf("the unprivileged build's steps did not run as its user: %s", ran)
		}
		for _, e := range escaped {
			t.Errorf("hostile build (%s): %s", c.mode, e)
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("a step made a directory of the build machine's")
	}
	if d, _ := source.FileDigest(filepath.Join(hostTools, "fakegen")); d != toolDigest {
		t.Error("the build machine's code generator was changed or deleted")
	}
	if pids := testproc.ProcessesWith(token, "hostile.sh"); len(pids) > 0 {
		t.Errorf("processes a step started outlive it: %v", pids)
	}
	after := cacheEntries(t, cache)
	for k, d := range entries {
		if after[k] != d {
			t.Errorf("the clean build's cache entry %s changed: %s, was %s", k[:12], after[k], d)
		}
	}

	// The clean tree again on the same cache: every step a hit, the same files.
	if log, code := build(clean, "out-clean-again"); code != 0 {
		t.Fatalf("clean rebuild: exit %d\n%s", code, log)
	}
	again := readRecord(t, filepath.Join(dir, "out-clean-again"), "graviton2")
	if len(again.Cache.Misses) != 0 {
		t.Errorf("the clean rebuild ran %v", again.Cache.Misses)
	}
	if fmt.Sprint(again.Outputs) != fmt.Sprint(ref.Outputs) {
		t.Errorf("the clean rebuild publishes other files than the clean build did:\n%v\n%v", again.Outputs, ref.Outputs)
	}
	// What --cache-to took: each entry verifies on a fresh cache.
	log, code := dorisarm("cache", "pull", "--repo", repo, "--cache", filepath.Join(dir, "fresh"), "--cache-verify-key", pub)
	if code != 0 || !strings.Contains(log, " 0 refused") || strings.HasPrefix(log, "pulled 0 ") {
		t.Errorf("pulling what the hostile builds pushed: exit %d\n%s", code, log)
	}
}

// runAs runs dorisarm as uid (dorisarm's own user when uid < 0), in the
// repository, with env; it returns stdout and stderr together.
func runAs(t *testing.T, uid int, env []string, args ...string) (string, int) {
	t.Helper()
	name, argv := bin, args
	if uid >= 0 {
		// This build's binary, where the user can run it (a copy an
		// earlier run left at a fixed path would be another dorisarm).
		self, err := os.MkdirTemp("", "dorisarm-hostile-bin-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(self) })
		os.Chmod(self, 0o755)
		exe := filepath.Join(self, "dorisarm")
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
		id := strconv.Itoa(uid)
		name, argv = "setpriv", append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups", exe}, args...)
	}
	cmd := exec.Command(name, argv...)
	cmd.Dir, cmd.Env = repo, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// hostileRecipe is the sample's recipe with a build tool (fakegen, found
// on PATH, standing at thirdparty/installed/bin/fakegen during BE steps).
func hostileRecipe(t *testing.T, dir string) string {
	t.Helper()
	root := repo_(t)
	b, err := os.ReadFile(filepath.Join(root, "recipes", "minidoris.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "patches: ../examples/minidoris/patches", "patches: "+filepath.Join(root, "examples", "minidoris", "patches"), 1)
	s += "build_tools:\n  fakegen:\n    path: thirdparty/installed/bin/fakegen\n    package: MINILZ\n    version: --version\n    match: 'fakegen (\\d+\\.\\d+)'\n    install: the test puts it on PATH\n"
	rd := filepath.Join(dir, "recipes")
	for _, f := range []string{"minidoris.lock", "minidoris-scan-allow.yaml"} {
		c, err := os.ReadFile(filepath.Join(root, "recipes", f))
		if err != nil {
			t.Fatal(err)
		}
		writeMode(t, filepath.Join(rd, f), string(c), 0o644)
	}
	p := filepath.Join(rd, "minidoris.yaml")
	writeMode(t, p, s, 0o644)
	return p
}

func repo_(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// stepLogs are the "HOSTILE RAN" lines of the cells' step logs, and
// every "ESCAPED" line, with its log's name.
func stepLogs(t *testing.T, cache string) (ran string, escaped []string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(cache, "work", "*", "logs", "*.log"))
	var b strings.Builder
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		for _, line := range strings.Split(string(data), "\n") {
			switch {
			case strings.HasPrefix(line, "HOSTILE RAN"):
				b.WriteString(line + "\n")
			case strings.HasPrefix(line, "ESCAPED"):
				escaped = append(escaped, filepath.Base(l)+": "+line)
			}
		}
	}
	return b.String(), escaped
}

// cacheEntries are the step cache's entries: key to the digests of
// meta.json and files.tar.
func cacheEntries(t *testing.T, cache string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, _ := os.ReadDir(filepath.Join(cache, "steps"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		m, _ := source.FileDigest(filepath.Join(cache, "steps", e.Name(), "meta.json"))
		f, _ := source.FileDigest(filepath.Join(cache, "steps", e.Name(), "files.tar"))
		out[e.Name()] = m + " " + f
	}
	if len(out) == 0 {
		t.Fatal("the clean build left no cache entry: nothing to check")
	}
	return out
}

func writeMode(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if err := os.WriteFile(p, append(b, s...), st.Mode()); err != nil {
		t.Fatal(err)
	}
}

// appendBefore inserts s before the first line of p that starts with at.
func appendBefore(t *testing.T, p, at, s string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "\n"+at)
	if i < 0 {
		t.Fatalf("%s has no line starting %q", p, at)
	}
	st, _ := os.Stat(p)
	if err := os.WriteFile(p, []byte(string(b[:i+1])+s+string(b[i+1:])), st.Mode()); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
}

func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	id := strconv.Itoa(uid)
	if out, err := exec.Command("chown", "-R", id+":"+id, dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
}
