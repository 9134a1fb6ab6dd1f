package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// depsList is what scripts/install-deps.sh would install on a Debian
// machine of arch for the profiles (--print: nothing is installed).
func depsList(t *testing.T, arch string, profiles ...string) []string {
	t.Helper()
	args := []string{filepath.Join(repo, "scripts", "install-deps.sh"), "--print", "--arch", arch}
	for _, p := range profiles {
		args = append(args, "--profile", p)
	}
	out, err := exec.Command("bash", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("install-deps.sh %v: %v\n%s", args[1:], err, out)
	}
	return strings.Fields(string(out))
}

// TestInstallDepsProfiles checks the profiles of scripts/install-deps.sh:
// the build profile (what the Dagger module's build containers install)
// has what a build needs for both ISAs and nothing only tests or the demo
// use; no profile argument is every profile; on arm64 machines the cross
// compiler is the x86-64 one (Debian has no gcc-aarch64-linux-gnu for
// arm64).
func TestInstallDepsProfiles(t *testing.T) {
	slow(t, "asks apt about every package")
	for _, arch := range []string{"amd64", "arm64"} {
		build := depsList(t, arch, "build")
		test := depsList(t, arch, "test")
		demo := depsList(t, arch, "demo")
		all := depsList(t, arch)
		for _, p := range build {
			if !slices.Contains(test, p) || !slices.Contains(demo, p) {
				t.Errorf("%s: %s is in the build profile but not in test and demo, which include build", arch, p)
			}
		}
		for _, p := range append(append([]string{}, test...), demo...) {
			if !slices.Contains(all, p) {
				t.Errorf("%s: %s is in a profile but not installed without --profile", arch, p)
			}
		}
		for _, p := range []string{"chromium", "chromium-driver", "docker-registry", "time"} {
			if slices.Contains(build, p) {
				t.Errorf("%s: the build profile installs %s, which no build uses", arch, p)
			}
			if !slices.Contains(test, p) {
				t.Errorf("%s: the test profile lacks %s (the tests skip without it)", arch, p)
			}
		}
		other, cross := "arm64", "gcc-aarch64-linux-gnu"
		if arch == "arm64" {
			other, cross = "amd64", "gcc-x86-64-linux-gnu"
		}
		for _, p := range []string{"gcc", "g++", cross, "clang-16", "lld-16", "qemu-user", "proot", "cmake", "libclang-rt-16-dev", "libssl-dev:" + other, "libclang-rt-16-dev:" + other} {
			if !slices.Contains(build, p) {
				t.Errorf("%s: the build profile lacks %s", arch, p)
			}
		}
		for _, p := range build {
			if strings.HasSuffix(p, ":"+arch) {
				t.Errorf("%s: %s names the machine's own architecture", arch, p)
			}
		}
		aptHasAll(t, arch, all)
	}
}

// aptHasAll checks with apt-cache that Debian has each package for a
// machine of arch, where this machine's apt knows that architecture
// (native or added with dpkg --add-architecture).
func aptHasAll(t *testing.T, arch string, pkgs []string) {
	t.Helper()
	if _, err := exec.LookPath("apt-cache"); err != nil {
		t.Logf("apt-cache not found: packages for %s not checked against Debian", arch)
		return
	}
	native, _ := exec.Command("dpkg", "--print-architecture").Output()
	foreign, _ := exec.Command("dpkg", "--print-foreign-architectures").Output()
	nat := strings.TrimSpace(string(native))
	if arch != nat && !slices.Contains(strings.Fields(string(foreign)), arch) {
		t.Logf("this machine's apt has no %s packages (dpkg --add-architecture %s): not checked against Debian", arch, arch)
		return
	}
	var query []string
	for _, p := range pkgs {
		if !strings.Contains(p, ":") {
			p += ":" + arch // as a machine of arch would install it
		}
		query = append(query, p)
	}
	out, err := exec.Command("apt-cache", append([]string{"policy"}, query...)...).Output()
	if err != nil {
		t.Fatalf("apt-cache policy: %v", err)
	}
	candidate := map[string]string{}
	name := ""
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && !strings.HasPrefix(line, " ") && strings.HasSuffix(line, ":") {
			name = strings.TrimSuffix(line, ":")
		} else if c, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate: "); ok && name != "" {
			candidate[name] = c
		}
	}
	var missing []int
	for i, q := range query {
		if c, ok := candidate[strings.TrimSuffix(q, ":"+nat)]; !ok || c == "(none)" {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return
	}
	// Architecture: all packages are listed under no architecture.
	archAll := map[string]bool{}
	var names []string
	for _, i := range missing {
		names = append(names, strings.Split(pkgs[i], ":")[0])
	}
	out, _ = exec.Command("apt-cache", append([]string{"show", "--no-all-versions"}, names...)...).Output()
	name = ""
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Package: "); ok {
			name = v
		} else if line == "Architecture: all" {
			archAll[name] = true
		}
	}
	for _, i := range missing {
		if !archAll[pkgs[i]] {
			t.Errorf("scripts/install-deps.sh installs %s on %s machines, but apt has no candidate for %s", pkgs[i], arch, query[i])
		}
	}
}
