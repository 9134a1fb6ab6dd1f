// Package testproc runs the real servers tests talk to (docker-registry,
// chromedriver) on loopback: a free address, the process, a wait until it
// answers HTTP, and its end when the test ends.
package testproc

import (
	"io"
	"net"
	"net/http"
	"os/exec"
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
