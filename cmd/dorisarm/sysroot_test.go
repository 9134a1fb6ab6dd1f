package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// needSysroots skips where the Debian archive the sysroots come from cannot
// be reached (the first plan of a cell makes its sysroot).
func needSysroots(t *testing.T, cache string) {
	t.Helper()
	needTool(t, "clang-16", "aarch64-linux-gnu-as", "apt-get", "dpkg-deb")
	_, errOut, code := run(t, "plan", "--target", "graviton3", "--packages", "bitshuffle", "--source", filepath.Join(repo, "examples", "minidoris"))
	_ = errOut
	if code != 0 && strings.Contains(errOut, "cannot make sysroot") {
		t.Skipf("the Debian archive is not reachable: %s", errOut)
	}
}

// A cell's plan names its sysroot, its key covers the sysroot's digest, and
// a target OS without a sysroot refuses to plan unless a waiver says why.
func TestSysrootPlanAndWaiver(t *testing.T) {
	needSysroots(t, "")
	out, errOut, code := run(t, "plan", "--target", "kunpeng920")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, errOut)
	}
	if !regexp.MustCompile(`sysroot   debian-11-arm64: glibc 2\.28 \(kylin-v10-sp1's is 2\.28\), sha256:`).MatchString(out) {
		t.Errorf("the plan does not name the sysroot:\n%s", out)
	}
	with := planKeys(t, "--target", "kunpeng920")
	without := planKeys(t, "--target", "kunpeng920", "--waive-sysroot", "testing")
	if with["build:be"] == without["build:be"] || with["fetch:BITSHUFFLE"] != without["fetch:BITSHUFFLE"] {
		t.Error("the sysroot is not part of the compile steps' keys (or leaked into a fetch's)")
	}
	// A matrix whose OS has no sysroot.
	dir := t.TempDir()
	data, _ := os.ReadFile(filepath.Join(repo, "matrix.yaml"))
	m := regexp.MustCompile(`(kylin-v10-sp1: .*), sysroot: \{[^}]*\}\}`).ReplaceAll(data, []byte("$1}"))
	mf := filepath.Join(dir, "matrix.yaml")
	os.WriteFile(mf, m, 0o644)
	sample := []string{"--source", "examples/minidoris", "--recipe", "recipes/minidoris.yaml"}
	_, errOut, code = run(t, append([]string{"plan", "--matrix", mf, "--target", "kunpeng920"}, sample...)...)
	if code != 2 || !strings.Contains(errOut, "kylin-v10-sp1 has no sysroot for aarch64") || !strings.Contains(errOut, "--waive-sysroot") {
		t.Errorf("no sysroot: exit %d %s", code, errOut)
	}
	out, errOut, code = run(t, append([]string{"plan", "--matrix", mf, "--target", "kunpeng920", "--waive-sysroot", "Kylin's libraries are not mirrored yet"}, sample...)...)
	if code != 0 || !strings.Contains(out, "sysroot   none, WAIVED: Kylin's libraries are not mirrored yet") {
		t.Errorf("waived: exit %d %s%s", code, out, errOut)
	}
}

// Real Doris packages built for Kylin V10 (kunpeng920) and Amazon Linux 2023
// (graviton3) against their sysroots need no glibc symbol newer than the OS
// has (readelf -V), and the scan passes with no allow file at all.
func TestRealDorisPackagesMeetTheOSGlibc(t *testing.T) {
	slow(t, "cross-builds real Doris third-party packages against sysroots")
	tree, mirror := corpusTree(t)
	needSysroots(t, "")
	needTool(t, "qemu-aarch64", "aarch64-linux-gnu-readelf")
	dir := t.TempDir()
	out, cache := filepath.Join(dir, "out"), filepath.Join(dir, "cache")
	for _, c := range []struct{ target, ceiling string }{{"kunpeng920", "2.28"}, {"graviton3", "2.34"}} {
		stdout, errOut, code := run(t, "build", "--source", tree, "--mirror", mirror, "--packages", "snappy,lz4,bzip,bitshuffle",
			"--target", c.target, "--out", out, "--cache", cache)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", c.target, code, stdout, errOut)
		}
		inst := filepath.Join(out, "2.1.7-rc01", c.target, "thirdparty", "installed")
		var checked int
		filepath.Walk(inst, func(p string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
			b, _ := exec.Command("aarch64-linux-gnu-readelf", "-V", p).Output()
			for _, v := range regexp.MustCompile(`GLIBC_(2\.[0-9]+)`).FindAllStringSubmatch(string(b), -1) {
				checked++
				if versionAbove(v[1], c.ceiling) {
					t.Errorf("%s: %s needs GLIBC_%s, above %s", c.target, p, v[1], c.ceiling)
				}
			}
			return nil
		})
		if checked == 0 {
			t.Errorf("%s: readelf found no GLIBC_ version needs at all in %s", c.target, inst)
		}
	}
}

func versionAbove(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 2; i++ {
		var x, y int
		if i < len(pa) {
			x = atoi(pa[i])
		}
		if i < len(pb) {
			y = atoi(pb[i])
		}
		if x != y {
			return x > y
		}
	}
	return false
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestSysrootProbeVerdictsRemembered: whether a compiler can link C++
// against a sysroot is checked once per compiler, flags and sysroot, and
// remembered in --sysroot-cache (a pass and a fail): a planted verdict is
// what the next plan goes by, and without the markers it checks again.
func TestSysrootProbeVerdictsRemembered(t *testing.T) {
	needSysroots(t, "")
	dir := t.TempDir()
	args := []string{"plan", "--target", "graviton3", "--sysroot-cache", dir}
	if _, errOut, code := run(t, args...); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	probes := filepath.Join(dir, "sysroots", ".probes")
	ok, _ := filepath.Glob(filepath.Join(probes, "*.ok"))
	if len(ok) == 0 {
		t.Fatalf("no verdict remembered in %s", probes)
	}
	for _, p := range ok {
		os.Remove(p)
		os.WriteFile(strings.TrimSuffix(p, ".ok")+".fail", []byte("planted verdict"), 0o644)
	}
	if _, errOut, code := run(t, args...); code == 0 || !strings.Contains(errOut, "planted verdict") {
		t.Errorf("with the passing compiler's verdict planted as a failure: exit %d %s", code, errOut)
	}
	os.RemoveAll(probes)
	if _, errOut, code := run(t, args...); code != 0 {
		t.Errorf("after the verdicts were removed: exit %d %s", code, errOut)
	}
}

// Ctrl-C while a plan is making a sysroot (a cold cache) stops at once with
// a message and exit 130, and leaves no half-made sysroot; one a killed
// dorisarm left is removed by the next run.
func TestInterruptWhilePlanning(t *testing.T) {
	slow(t, "makes a sysroot from the Debian archive")
	needSysroots(t, "")
	cache := t.TempDir()
	store := filepath.Join(cache, "sysroots")
	os.MkdirAll(filepath.Join(store, ".build-999999999-stale", "root"), 0o755) // no such process
	cmd := exec.Command(bin, "plan", "--target", "graviton3", "--packages", "bitshuffle", "--source", "examples/minidoris",
		"--recipe", "recipes/minidoris.yaml", "--sysroot-cache", cache)
	cmd.Dir = repo
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait until the sysroot is being made, then interrupt.
	deadline := time.After(60 * time.Second)
	for made := false; !made; {
		m, _ := filepath.Glob(filepath.Join(store, fmt.Sprintf(".build-%d-*", cmd.Process.Pid)))
		made = len(m) > 0
		select {
		case err := <-done:
			t.Fatalf("the plan ended (%v) before it was interrupted:\n%s", err, errOut.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("no sysroot was being made after 60 s:\n%s", errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	time.Sleep(300 * time.Millisecond)
	sent := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err := <-done
	took := time.Since(sent)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(errOut.String(), "dorisarm: interrupted") {
		t.Errorf("interrupted plan: %v, stderr:\n%s", err, errOut.String())
	}
	if took > 3*time.Second {
		t.Errorf("the plan took %s to stop after Ctrl-C", took)
	}
	if left, _ := filepath.Glob(filepath.Join(store, ".build-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
