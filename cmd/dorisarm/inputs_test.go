package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A file given where dorisarm reads a data file, a key, a layout or a
// source script may be a named pipe nobody writes to or a link to
// /dev/zero. Each is refused at once, by name, with exit status 2: before,
// the first hung and the second read until memory ran out.
func TestInputsThatNeverEnd(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// An OCI layout whose index.json is a named pipe.
	layout := filepath.Join(dir, "layout")
	os.MkdirAll(layout, 0o755)
	os.WriteFile(filepath.Join(layout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	if err := syscall.Mkfifo(filepath.Join(layout, "index.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A layout whose index is fine but one blob links to /dev/zero.
	zeroBlob := filepath.Join(dir, "zeroblob")
	os.MkdirAll(filepath.Join(zeroBlob, "blobs", "sha256"), 0o755)
	os.WriteFile(filepath.Join(zeroBlob, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	h := strings.Repeat("ab", 32)
	os.WriteFile(filepath.Join(zeroBlob, "index.json"), []byte(`{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:`+h+`","size":100,"annotations":{"org.opencontainers.image.ref.name":"doris-be:1"}}]}`), 0o644)
	os.Symlink("/dev/zero", filepath.Join(zeroBlob, "blobs", "sha256", h))
	// A Doris-style tree whose thirdparty/vars.sh is a named pipe.
	tree := filepath.Join(dir, "tree")
	os.MkdirAll(filepath.Join(tree, "thirdparty"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(tree, "thirdparty", "vars.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A release directory whose build record links to /dev/zero.
	release := filepath.Join(dir, "release")
	os.MkdirAll(filepath.Join(release, "2.1.8", "kunpeng920"), 0o755)
	os.Symlink("/dev/zero", filepath.Join(release, "2.1.8", "kunpeng920", "dorisarm-build.json"))

	for _, c := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"matrix from /dev/zero", []string{"--matrix", "/dev/zero", "matrix"}, "/dev/zero"},
		{"matrix from a pipe", []string{"--matrix", fifo, "matrix"}, fifo},
		{"recipe from a pipe", []string{"plan", "--target", "kunpeng920", "--recipe", fifo}, fifo},
		{"allow file from /dev/zero", []string{"scan", "--target", "kunpeng920", "--allow", "/dev/zero", bin}, "/dev/zero"},
		{"allow file from a pipe", []string{"scan", "--target", "kunpeng920", "--allow", fifo, bin}, fifo},
		{"key from /dev/zero", []string{"verify", "--key", "/dev/zero", "127.0.0.1:1/doris/doris-be:1"}, "/dev/zero"},
		{"trusted root from a pipe", []string{"verify", "--trusted-root", fifo, "--certificate-identity", "a@example.com", "--certificate-oidc-issuer", "https://issuer.example.com", "127.0.0.1:1/doris/doris-be:1"}, fifo},
		{"layout index from a pipe", []string{"image", "inspect", "oci:" + layout + ":doris-be:1"}, "index.json"},
		{"layout blob from /dev/zero", []string{"image", "inspect", "oci:" + zeroBlob + ":doris-be:1"}, "blobs/sha256/" + h},
		{"build record from /dev/zero", []string{"report", "--release", release}, "dorisarm-build.json"},
		{"vars.sh from a pipe", []string{"sources", "list", "--source", tree}, "vars.sh"},
		{"profile from a pipe", []string{"plan", "--target", "kunpeng920", "--pgo-profile", fifo}, "--pgo-profile: read " + fifo + ": not a regular file (a named pipe)"},
		{"profile from /dev/zero", []string{"plan", "--target", "kunpeng920", "--pgo-profile", "/dev/zero"}, "--pgo-profile: read /dev/zero: not a regular file (a character device)"},
		{"profile from a directory", []string{"plan", "--target", "kunpeng920", "--pgo-profile", dir}, dir + " is a directory"},
		{"earlier table from a pipe", []string{"packages", "--previous", fifo, dir}, "--previous: read " + fifo + ": not a regular file (a named pipe)"},
		{"earlier table from a directory", []string{"packages", "--previous", dir, dir}, "--previous: read " + dir + ": not a regular file (a directory)"},
		{"earlier table from /dev/zero", []string{"packages", "--previous", "/dev/zero", dir}, "/dev/zero: not a regular file (a character device)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, c.args...)
			cmd.Dir = t.TempDir()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("dorisarm %v still running after 30 s", c.args)
			}
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			msg := stderr.String()
			if code != 2 || strings.Contains(msg, "goroutine ") || !strings.Contains(msg, c.want) {
				t.Errorf("dorisarm %v: exit %d, want 2 with a message naming %q:\n%s", c.args, code, c.want, msg)
			}
			t.Logf("%s", strings.TrimSpace(msg))
		})
	}
}
