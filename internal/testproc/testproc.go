// Package testproc runs the real servers tests talk to (docker-registry,
// chromedriver) on loopback: a free address, the process, a wait until it
// answers HTTP, and its end when the test ends.
package testproc

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FreeAddr is a 127.0.0.1:port nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Serve starts name with args, killed when the test ends, and waits until
// url answers (any HTTP status) for up to 10 seconds.
func Serve(t testing.TB, url, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer on %s: %v", name, url, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Registry runs Debian's docker-registry (CNCF distribution) on a free
// loopback port with its storage in a temporary directory, for the test's
// lifetime, and returns its host:port. The test is skipped where the
// registry is not installed.
func Registry(t testing.TB) string {
	t.Helper()
	addr, _ := RegistryStorage(t)
	return addr
}

// RegistryStorage is Registry that also returns the directory the registry
// keeps its blobs in (docker/registry/v2/blobs/sha256/<xx>/<hex>/data), for
// tests that alter what is stored.
func RegistryStorage(t testing.TB) (addr, storage string) {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Skip("docker-registry not installed (scripts/install-deps.sh)")
	}
	addr = FreeAddr(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	Serve(t, "http://"+addr+"/v2/", bin, "serve", cfg)
	return addr, filepath.Join(dir, "data")
}

// ProcessesWith are the processes of this machine whose command line
// holds s, each as "PID: command line", except those whose command line
// also holds one of except.
func ProcessesWith(s string, except ...string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		skip := false
		for _, x := range except {
			skip = skip || bytes.Contains(b, []byte(x))
		}
		if !skip {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
