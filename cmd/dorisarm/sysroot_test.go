package main

import (
	"bytes"
	"encoding/json"
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
// be reached (a cell's first build makes its sysroot).
func needSysroots(t *testing.T, cache string) {
	t.Helper()
	needTool(t, "clang-16", "aarch64-linux-gnu-as", "apt-get", "dpkg-deb")
	if _, err := exec.Command("apt-get", "--print-uris", "-qq", "download", "libc6:arm64").Output(); err != nil {
		t.Skipf("the Debian archive is not reachable: %v", err)
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
	if !regexp.MustCompile(`sysroot   debian-11-arm64: for kylin-v10-sp1 \(glibc 2\.28\), key sha256:[0-9a-f]+; the build's sysroot step makes it`).MatchString(out) {
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
		seedRuntime(t, cache, c.target)
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
// against a sysroot is checked by the build's toolchain step, once per
// compiler, flags and sysroot, and remembered in --sysroot-cache: the next
// build finds the verdict, and a failing verdict makes the next plan take
// the target's next compiler, or fail when that compiler is forced.
func TestSysrootProbeVerdictsRemembered(t *testing.T) {
	slow(t, "makes a sysroot and builds against it")
	needSysroots(t, "")
	dir, work := t.TempDir(), t.TempDir()
	sample := []string{"--target", "graviton3", "--packages", "bitshuffle", "--source", "examples/minidoris",
		"--recipe", "recipes/minidoris.yaml", "--sysroot-cache", dir}
	build := func(out string) []string {
		return append([]string{"build", "--cache", filepath.Join(work, "cache"), "--out", filepath.Join(work, out)}, sample...)
	}
	_, errOut, code := run(t, build("out")...)
	if code != 0 {
		t.Fatalf("build: exit %d %s", code, errOut)
	}
	if !regexp.MustCompile(`\] sysroot:debian-11-arm64 ran`).MatchString(errOut) || !regexp.MustCompile(`\] toolchain:(gcc|clang) ran`).MatchString(errOut) {
		t.Errorf("the first build did not make the sysroot and check the compiler as steps:\n%s", errOut)
	}
	probes := filepath.Join(dir, "sysroots", ".probes")
	ok, _ := filepath.Glob(filepath.Join(probes, "*.ok"))
	if len(ok) != 1 {
		t.Fatalf("verdicts remembered in %s: %v, want the one compiler the build used", probes, ok)
	}
	// A compiler rejected on the way (Debian's gcc 12 cannot link for a
	// glibc older than 2.36) was replaced by the next one in the same build.
	if fail, _ := filepath.Glob(filepath.Join(probes, "*.fail")); len(fail) > 0 && !strings.Contains(errOut, "planning it again with its next compiler") {
		t.Errorf("a compiler was rejected (%v) but the build did not say it planned again:\n%s", fail, errOut)
	}
	_, errOut, code = run(t, build("out2")...) // published elsewhere: not up to date, its steps run or come from the cache
	if code != 0 || !regexp.MustCompile(`\] sysroot:debian-11-arm64 cached`).MatchString(errOut) || !regexp.MustCompile(`\] toolchain:(gcc|clang) cached`).MatchString(errOut) {
		t.Errorf("the second build made the sysroot or checked the compiler again: exit %d\n%s", code, errOut)
	}
	out, _, _ := run(t, append([]string{"plan", "-o", "json"}, sample...)...)
	var p struct {
		Toolchain struct {
			Compiler struct{ Name string } `json:"compiler"`
		} `json:"toolchain"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	used := p.Toolchain.Compiler.Name
	os.Remove(ok[0])
	os.WriteFile(strings.TrimSuffix(ok[0], ".ok")+".fail", []byte("planted verdict"), 0o644)
	// A failing verdict: the plan skips the compiler and says why (taking
	// the target's next one, or failing when none is left).
	out, errOut, code = run(t, append([]string{"plan"}, sample...)...)
	switch {
	case code == 0 && (strings.Contains(out, "compiler  "+used+" ") || !strings.Contains(out, "planted verdict")),
		code != 0 && !strings.Contains(errOut, "planted verdict"):
		t.Errorf("with %s's verdict planted as a failure, the plan should skip it and say why: exit %d\n%s%s", used, code, out, errOut)
	}
	if _, errOut, code = run(t, append([]string{"plan", "--compiler", used}, sample...)...); code == 0 || !strings.Contains(errOut, "planted verdict") {
		t.Errorf("with %s forced and its verdict planted as a failure: exit %d %s", used, code, errOut)
	}
}

// Ctrl-C while a build's sysroot step is making the sysroot (a cold cache)
// stops at once with a message and exit 130, and leaves no half-made
// sysroot; one a killed dorisarm left is removed by the next run.
func TestInterruptWhileMakingSysroot(t *testing.T) {
	slow(t, "makes a sysroot from the Debian archive")
	needSysroots(t, "")
	cache := t.TempDir()
	store := filepath.Join(cache, "sysroots")
	os.MkdirAll(filepath.Join(store, ".build-999999999-stale", "root"), 0o755) // no such process
	work := t.TempDir()
	cmd := exec.Command(bin, "build", "--target", "graviton3", "--packages", "bitshuffle", "--source", "examples/minidoris",
		"--recipe", "recipes/minidoris.yaml", "--sysroot-cache", cache, "--cache", filepath.Join(work, "cache"), "--out", filepath.Join(work, "out"))
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
			t.Fatalf("the build ended (%v) before it was interrupted:\n%s", err, errOut.String())
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
		t.Errorf("interrupted build: %v, stderr:\n%s", err, errOut.String())
	}
	if took > 3*time.Second {
		t.Errorf("the build took %s to stop after Ctrl-C", took)
	}
	if left, _ := filepath.Glob(filepath.Join(store, ".build-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
