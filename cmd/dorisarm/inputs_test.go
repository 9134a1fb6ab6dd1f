package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	} {
		t.Run(c.name, func(t *testing.T) {
			wantRefused(t, t.TempDir(), c.args, c.want)
		})
	}
}

// runWithin runs dorisarm in dir and fails the test, rather than hang it,
// when dorisarm is still running after 30 s (it is then killed).
func runWithin(t *testing.T, dir string, args []string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("dorisarm %v still running after 30 s", args)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// wantRefused runs dorisarm in dir and wants exit status 2 with a message
// holding want, and no panic.
func wantRefused(t *testing.T, dir string, args []string, want string) {
	t.Helper()
	_, msg, code := runWithin(t, dir, args)
	if code != 2 || strings.Contains(msg, "goroutine ") || !strings.Contains(msg, want) {
		t.Errorf("dorisarm %v: exit %d, want 2 with a message naming %q:\n%s", args, code, want, msg)
	}
	t.Logf("%s", strings.TrimSpace(msg))
}

// Every flag that names a file dorisarm reads refuses, before the command
// runs, a named pipe (which blocked some of them for ever: --previous,
// --pgo-profile), a directory and a device, naming the flag, the path and
// what is there, with exit status 2. Before, --cache-verify-key /dev/null
// warned at every step pulled and left the shared cache unused, exit 0.
func TestInputFlagsRefuseWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir")
	os.Mkdir(sub, 0o755)
	t.Setenv("COSIGN_PASSWORD", "")
	const ref = "127.0.0.1:1/doris/doris-be:1" // nothing listens: no command may get that far
	for _, c := range []struct {
		name, flag string
		args       []string // the flag and its value follow
		dirs       bool     // a directory is taken too
	}{
		{"matrix", "--matrix", []string{"matrix"}, false},
		{"plan", "--recipe", []string{"plan", "--target", "kunpeng920"}, false},
		{"image build", "--recipe", []string{"image", "build"}, false},
		{"report", "--recipe", []string{"report", "--release", dir}, false},
		{"plan", "--pgo-profile", []string{"plan", "--target", "kunpeng920"}, true},
		{"scan", "--allow", []string{"scan", "--target", "kunpeng920", bin}, false},
		{"build", "--allow", []string{"build", "--target", "kunpeng920"}, false},
		{"packages", "--previous", []string{"packages", dir}, false},
		{"verify", "--key", []string{"verify", ref}, false},
		{"verify", "--trusted-root", []string{"verify", "--certificate-identity", "a@example.com", "--certificate-oidc-issuer", "https://issuer.example.com", ref}, false},
		{"sign", "--key", []string{"sign", ref}, false},
		{"promote", "--key", []string{"promote", ref, ref}, false},
		{"promote", "--file", []string{"promote", "--key", bin}, false},
		{"promote", "--sign-key", []string{"promote", "--key", bin, ref, ref}, false},
		{"patch new", "--pristine", []string{"patch", "new", "fix", "--source", dir, "--component", "doris", "--version", "2.1.7"}, true},
		{"cache pull", "--cache-verify-key", []string{"cache", "pull", "--repo", "127.0.0.1:1/cache"}, false},
		{"cache pull", "--cache-trusted-root", []string{"cache", "pull", "--repo", "127.0.0.1:1/cache", "--cache-identity", "a@example.com", "--cache-issuer", "https://issuer.example.com"}, false},
		{"cache push", "--cache-sign-key", []string{"cache", "push", "--repo", "127.0.0.1:1/cache"}, false},
		{"build", "--cache-verify-key", []string{"build", "--target", "kunpeng920", "--cache-from", "127.0.0.1:1/cache"}, false},
	} {
		bad := []struct{ path, kind string }{{fifo, "a named pipe"}, {"/dev/null", "a character device"}}
		if !c.dirs {
			bad = append(bad, struct{ path, kind string }{sub, "a directory"})
		}
		for _, b := range bad {
			args := append(slices.Clone(c.args), c.flag, b.path)
			t.Run(c.name+" "+c.flag+" "+b.kind, func(t *testing.T) {
				wantRefused(t, t.TempDir(), args, c.flag+" "+b.path+": not a regular file ("+b.kind+")")
			})
		}
	}
	if os.Geteuid() != 0 { // root reads any file
		locked := filepath.Join(dir, "locked.pub")
		os.WriteFile(locked, []byte("key"), 0o000)
		wantRefused(t, dir, []string{"cache", "pull", "--repo", "127.0.0.1:1/cache", "--cache-verify-key", locked}, "--cache-verify-key "+locked+": permission denied")
	}
}

// A shared cache's key that cannot serve stops a build before it plans or
// runs a step, naming the flag: before, /dev/null, a directory or a file
// that is no key warned at every step pulled and the build went on
// without the cache, exit 0.
func TestCacheVerifyKeyBeforeAnyStep(t *testing.T) {
	dir := t.TempDir()
	notAKey := filepath.Join(dir, "cosign.pub")
	os.WriteFile(notAKey, []byte("not a key\n"), 0o644)
	for key, want := range map[string]string{
		"/dev/null": "--cache-verify-key /dev/null: not a regular file (a character device)",
		dir:         "--cache-verify-key " + dir + ": not a regular file (a directory)",
		notAKey:     "--cache-verify-key or --cache-trusted-root): " + notAKey + ": not a public key",
	} {
		work := t.TempDir()
		args := []string{"build", "--target", "kunpeng920", "--out", "out", "--cache", "cache", "--cache-from", "127.0.0.1:1/cache", "--cache-verify-key", key}
		stdout, msg, code := runWithin(t, work, args)
		if code != 2 || !strings.Contains(msg, want) {
			t.Errorf("dorisarm %v: exit %d, want 2 naming %q:\n%s", args, code, want, msg)
		}
		if stdout != "" {
			t.Errorf("dorisarm %v printed %q", args, stdout)
		}
		for _, d := range []string{"out", "cache"} {
			if _, err := os.Stat(filepath.Join(work, d)); err == nil {
				t.Errorf("dorisarm %v made %s before refusing the key", args, d)
			}
		}
	}
}
