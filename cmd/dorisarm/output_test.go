package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Output that cannot be written (a full disk; /dev/full here) is an error
// for every command and output form, exit status 3 (the machine failed,
// not the command): before, commands printing tables, plans or help
// exited 0 with their output cut short.
func TestOutputWriteErrors(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full here:", err)
	}
	defer full.Close()
	for _, args := range [][]string{
		{"version"},
		{"version", "-o", "json"},
		{"matrix"},
		{"plan", "--target", "kunpeng920"},
		{"--help"},
		{"scan", "-o", "markdown", bin},
		{"scan", "-o", "json", bin},
		{"completion", "bash"},
		{"completion", "zsh"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = t.TempDir()
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = full, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 3 || !strings.Contains(stderr.String(), "no space left on device") || !strings.Contains(stderr.String(), "the disk is full") {
			t.Errorf("dorisarm %v > /dev/full: exit %d, want 3 and the write error:\n%s", args, code, stderr.String())
		}
	}
}

func TestCheckedWriter(t *testing.T) {
	var b bytes.Buffer
	w := &checkedWriter{w: &b}
	w.Write([]byte("one "))
	if w.err != nil {
		t.Fatal(w.err)
	}
	w.w = shortWriter{}
	if n, err := w.Write([]byte("two")); n != 1 || err == nil || w.err == nil {
		t.Fatalf("a short write: n=%d err=%v kept=%v", n, err, w.err)
	}
	w.w = &b
	if _, err := w.Write([]byte("three")); err == nil || b.String() != "one " {
		t.Errorf("wrote after an error: %q, %v", b.String(), err)
	}
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return min(1, len(p)), nil }
