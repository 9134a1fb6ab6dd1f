package sysroot

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

var bullseyeToolchain = []string{"libc6", "libc6-dev", "linux-libc-dev", "libgcc-10-dev", "libgcc-s1", "libstdc++-10-dev", "libstdc++6"}

func ceilingSpec(ceiling string) Spec {
	return Spec{Name: "centos-7", Glibc: ceiling, Triple: "aarch64-linux-gnu",
		Debian: &DebianSpec{Suite: "bullseye", Arch: "arm64", Packages: bullseyeToolchain}}
}

// definedVersions returns the version definitions readelf -V lists for lib
// (the oracle: binutils, not debug/elf).
func definedVersions(t *testing.T, lib string) []string {
	t.Helper()
	out, err := exec.Command("readelf", "-V", "-W", lib).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf -V %s: %v\n%s", lib, err, out)
	}
	s := string(out)
	start := strings.Index(s, "Version definition section")
	if start < 0 {
		t.Fatalf("readelf -V %s: no version definitions\n%s", lib, out)
	}
	s = s[start:]
	if end := strings.Index(s, "Version needs section"); end > 0 {
		s = s[:end]
	}
	var names []string
	for _, m := range regexp.MustCompile(`Flags: (?:none|BASE|WEAK)\s+Index: \d+\s+Cnt: \d+\s+Name: (\S+)`).FindAllStringSubmatch(s, -1) {
		names = append(names, m[1])
	}
	return names
}

// checkCeiling: no version above the ceiling and no GLIBC_PRIVATE in lib's
// definitions, and the highest is want.
func checkCeiling(t *testing.T, lib, ceiling, want string) {
	t.Helper()
	var high string
	for _, v := range definedVersions(t, lib) {
		n, ok := strings.CutPrefix(v, "GLIBC_")
		if !ok {
			continue
		}
		if n == "PRIVATE" || !atMost(n, ceiling) {
			t.Errorf("%s defines %s, above the ceiling %s", lib, v, ceiling)
		}
		if high == "" || !atMost(n, high) {
			high = n
		}
	}
	if want != "" && high != want {
		t.Errorf("%s: highest version GLIBC_%s, want GLIBC_%s", lib, high, want)
	}
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	return dst
}

var reUndefined = regexp.MustCompile("undefined (?:symbol|reference to|reference due to --no-allow-shlib-undefined): `?([^'\\s]+)'?")

func undefinedSymbols(out string) []string {
	set := map[string]bool{}
	for _, m := range reUndefined.FindAllStringSubmatch(out, -1) {
		set[m[1]] = true
	}
	return keys(set)
}

const oldC = `#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <pthread.h>
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static void init(void) { pthread_key_create(&key, 0); }
int main(int argc, char **argv) {
	char buf[32] = "fmemopen";
	char got[32] = {0};
	FILE *m = fmemopen(buf, strlen(buf), "r");
	if (!m || !fgets(got, sizeof got, m)) return 1;
	fclose(m);
	pthread_once(&once, init);
	pthread_mutex_lock(&mu);
	pthread_setspecific(key, got);
	pthread_mutex_unlock(&mu);
	printf("sqrt=%.3f exp=%.3f pow=%.0f %s key=%s\n", sqrt(2.0 * argc), exp((double)argc), pow(2.0, 10.0 * argc), got, (char *)pthread_getspecific(key));
	return 0;
}
`

const threadLocalCC = `#include <iostream>
#include <string>
#include <thread>
thread_local std::string name = "tls";
int main() {
	std::thread t([] { name += "-thread"; std::cout << name << std::endl; });
	t.join();
	std::cout << name << std::endl;
}
`

// newer are programs that each call one function glibc added after 2.17;
// version is the GLIBC_ version bullseye's arm64 libraries give it (checked
// with readelf on the program linked against them).
var newer = []struct {
	sym, version, src string
	flags             []string
}{
	{"getrandom", "2.25", "#include <sys/random.h>\nint main(void) { char b[4]; return getrandom(b, sizeof b, 0) < 0; }\n", nil},
	{"reallocarray", "2.26", "#define _GNU_SOURCE\n#include <stdlib.h>\nint main(void) { return reallocarray(0, 2, 8) == 0; }\n", nil},
	// Not a new function: glibc 2.28's headers redirect fcntl to fcntl64
	// under _FILE_OFFSET_BITS=64, on 64-bit targets too.
	{"fcntl64", "2.28", "#include <fcntl.h>\nint main(void) { return fcntl(0, F_GETFD) < 0; }\n", []string{"-D_FILE_OFFSET_BITS=64"}},
	{"gettid", "2.30", "#define _GNU_SOURCE\n#include <unistd.h>\nint main(void) { return gettid() < 0; }\n", nil},
	{"pthread_cond_clockwait", "2.30", `#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>
int main(void) {
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	struct timespec ts = {0, 0};
	pthread_mutex_lock(&m);
	return pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &ts) == 0;
}
`, []string{"-pthread"}},
}

// TestGlibcCeilingBullseye limits bullseye's arm64 glibc 2.31 to the ABIs of
// glibc 2.28 (Kylin V10) and 2.17 (CentOS 7), then links C and C++ programs
// against the stubs with clang-16 and lld and runs one under qemu on this
// machine's glibc.
func TestGlibcCeilingBullseye(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads from the Debian mirror")
	}
	if !have("aarch64-linux-gnu-as", "aarch64-linux-gnu-ld", "readelf") {
		t.Skip("binutils-aarch64-linux-gnu (or readelf) not installed: the stubs cannot be made")
	}
	ctx := context.Background()
	cache := t.TempDir()
	real := debianSysroot(t, cache, bullseyeToolchain...)
	ceilings := []string{"2.28", "2.17"}
	srs := map[string]*Sysroot{"2.31": real}
	for _, c := range ceilings {
		start := time.Now()
		sr, err := Ensure(ctx, ceilingSpec(c), cache)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		srs[c] = sr
		if sr.Cached || sr.Glibc != c || sr.GlibcDefined != c || sr.GlibcFrom != "2.31" || sr.Digest == real.Digest ||
			!strings.Contains(sr.Source, "glibc 2.31 limited to the glibc "+c+" ABI") {
			t.Errorf("Ensure with glibc %s: %+v", c, sr)
		}
		if v, err := GlibcVersion(sr.Path); err != nil || v != c {
			t.Errorf("GlibcVersion = %q, %v; want the ceiling %s", v, err, c)
		}
		if v, err := GlibcDefinedVersion(sr.Path); err != nil || v != c {
			t.Errorf("GlibcDefinedVersion = %q, %v; want %s", v, err, c)
		}
		libdir := filepath.Join(sr.Path, "lib/aarch64-linux-gnu")
		checkCeiling(t, filepath.Join(libdir, "libc.so.6"), c, c)
		for _, l := range []string{"libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-aarch64.so.1"} {
			checkCeiling(t, filepath.Join(libdir, l), c, "")
		}
		t.Logf("glibc %s: readelf -V on the stub libc.so.6: %v", c, definedVersions(t, filepath.Join(libdir, "libc.so.6")))
		// Symlinks stay symlinks to the replaced files; what is not glibc's
		// shared libraries is untouched.
		if got := readlink(t, filepath.Join(libdir, "libc.so.6")); got != "libc-2.31.so" {
			t.Errorf("libc.so.6 -> %q", got)
		}
		checkLinks(t, sr.Path)
		for _, p := range []string{"usr/include/stdio.h", "usr/lib/aarch64-linux-gnu/libc_nonshared.a", "usr/lib/aarch64-linux-gnu/libc.a",
			"usr/lib/aarch64-linux-gnu/crt1.o", "usr/lib/aarch64-linux-gnu/libc.so", "lib/aarch64-linux-gnu/libgcc_s.so.1",
			"usr/lib/aarch64-linux-gnu/libstdc++.so.6", "usr/lib/gcc/aarch64-linux-gnu/10/libstdc++.a"} {
			if fileSum(t, filepath.Join(sr.Path, p)) != fileSum(t, filepath.Join(real.Path, p)) {
				t.Errorf("glibc %s: %s changed", c, p)
			}
		}
		if fileSum(t, filepath.Join(libdir, "libc.so.6")) == fileSum(t, filepath.Join(real.Path, "lib/aarch64-linux-gnu/libc.so.6")) {
			t.Errorf("glibc %s: libc.so.6 was not replaced", c)
		}
		again, err := Ensure(ctx, ceilingSpec(c), cache)
		if err != nil || !again.Cached || again.Digest != sr.Digest || again.Glibc != c || again.GlibcFrom != "2.31" {
			t.Errorf("second Ensure with glibc %s: %+v, %v", c, again, err)
		}
		other, err := Ensure(ctx, ceilingSpec(c), t.TempDir())
		if err != nil || other.Cached || other.Digest != sr.Digest {
			t.Errorf("Ensure with glibc %s into another cache: %+v, %v; want the same digest %s (deterministic stubs)", c, other, err, sr.Digest)
		}
		// LimitGlibc alone, on a copy of the unlimited tree: the same tree.
		cp := copyTree(t, real.Path)
		tools, err := ToolsFor("aarch64-linux-gnu")
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if err := LimitGlibc(cp, c, tools); err != nil {
			t.Fatal(err)
		}
		limTook := time.Since(start)
		if st, err := TreeDigest(cp); err != nil || st.Digest != sr.Digest {
			t.Errorf("LimitGlibc(%s) on a copy: %+v, %v; want %s", c, st, err, sr.Digest)
		}
		t.Logf("glibc %s: Ensure %v (download, unpack, stubs); LimitGlibc alone %v; %s, %d files, %d bytes",
			c, took.Round(time.Millisecond), limTook.Round(time.Millisecond), sr.Digest, sr.Files, sr.Size)
	}
	if srs["2.28"].Digest == srs["2.17"].Digest {
		t.Error("glibc 2.28 and 2.17 give the same digest")
	}

	if !have("clang-16", "clang++-16", "ld.lld-16") {
		t.Log("clang-16 or lld-16 not installed: no links")
		return
	}
	work := t.TempDir()
	c := func(name, src, sysroot string, flags ...string) (string, string, error) {
		cc := "clang-16"
		if strings.HasSuffix(name, ".cc") {
			cc = "clang++-16"
		}
		args := append([]string{cc, "--target=aarch64-linux-gnu", "--sysroot=" + sysroot, "-fuse-ld=lld", "-O2", "-Wl,--error-limit=0"}, flags...)
		return compile(t, work, name, src, args...)
	}

	// Old functions only: links everywhere. The real tree needs exp and pow
	// at GLIBC_2.29 and fmemopen at 2.22; the stubs give the older versions
	// their defaults back.
	want := map[string]string{"2.31": "2.29", "2.28": "2.22", "2.17": "2.17"}
	for _, v := range []string{"2.31", "2.28", "2.17"} {
		bin, out, err := c("old.c", oldC, srs[v].Path, "-pthread", "-lm")
		if err != nil {
			t.Fatalf("old functions against glibc %s: %v\n%s", v, err, out)
		}
		if g, _ := needed(t, bin); g != want[v] {
			t.Errorf("old functions against glibc %s: need GLIBC_%s, want %s", v, g, want[v])
		}
		if v == "2.31" {
			continue
		}
		if have("aarch64-linux-gnu-readelf") {
			out, err := exec.Command("aarch64-linux-gnu-readelf", "-V", "-W", bin).Output()
			var high string
			for _, m := range regexp.MustCompile(`Name: GLIBC_([0-9.]+)\s+Flags`).FindAllStringSubmatch(string(out), -1) {
				if high == "" || !atMost(m[1], high) {
					high = m[1]
				}
			}
			if err != nil || high != want[v] {
				t.Errorf("aarch64-linux-gnu-readelf -V on the program linked against the glibc %s stubs: %v, needs GLIBC_%s", v, err, high)
			}
		}
		if !have("qemu-aarch64") {
			t.Log("qemu-aarch64 not installed: not run")
			continue
		}
		if _, err := os.Stat("/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1"); err != nil {
			t.Log("no /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 (libc6-arm64-cross): not run")
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		run, err := exec.CommandContext(ctx, "qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", bin).CombinedOutput()
		cancel()
		if got := string(run); err != nil || got != "sqrt=1.414 exp=2.718 pow=1024 fmemopen key=fmemopen\n" {
			t.Errorf("the program linked against the glibc %s stubs, under qemu on glibc 2.36: %v: %q", v, err, got)
		} else {
			t.Logf("linked against the glibc %s stubs (needs GLIBC_%s), it runs under qemu on glibc 2.36: %s", v, want[v], strings.TrimSpace(got))
		}
	}

	// Each newer function: the real libraries give it the version in the
	// table, a stub below that refuses it.
	for _, n := range newer {
		bin, out, err := c(n.sym+".c", n.src, real.Path, n.flags...)
		if err != nil {
			t.Fatalf("%s against glibc 2.31: %v\n%s", n.sym, err, out)
		}
		if g, _ := needed(t, bin); g != n.version {
			t.Errorf("%s against glibc 2.31: needs GLIBC_%s, want %s", n.sym, g, n.version)
		}
		for _, v := range ceilings {
			bin, out, err := c(n.sym+".c", n.src, srs[v].Path, n.flags...)
			switch {
			case atMost(n.version, v):
				if err != nil {
					t.Errorf("%s (GLIBC_%s) against the glibc %s stubs: %v\n%s", n.sym, n.version, v, err, out)
				} else if g, _ := needed(t, bin); g != n.version {
					t.Errorf("%s against the glibc %s stubs: needs GLIBC_%s", n.sym, v, g)
				}
			case err == nil:
				t.Errorf("%s (GLIBC_%s) linked against the glibc %s stubs", n.sym, n.version, v)
			default:
				if u := undefinedSymbols(out); len(u) != 1 || u[0] != n.sym {
					t.Errorf("%s against the glibc %s stubs: undefined %v, want [%s]\n%s", n.sym, v, u, n.sym, out)
				} else {
					t.Logf("%s (GLIBC_%s) against the glibc %s stubs: %s", n.sym, n.version, v, regexp.MustCompile(`error: undefined symbol: \S+`).FindString(out))
				}
			}
		}
	}

	// C++, libstdc++ 10 and libgcc linked statically.
	static := []string{"-pthread", "-static-libstdc++", "-static-libgcc"}
	for _, v := range ceilings {
		bin, out, err := c("hello.cc", helloCC, srs[v].Path, static...)
		if err != nil {
			t.Errorf("std::string, std::thread, iostream against the glibc %s stubs: %v\n%s", v, err, out)
		} else if g, x := needed(t, bin); g != "2.17" || x != "" {
			t.Errorf("C++ against the glibc %s stubs: needs GLIBC_%s GLIBCXX_%s", v, g, x)
		}
	}
	// A thread_local object with a destructor: libstdc++'s
	// __cxa_thread_atexit calls glibc's __cxa_thread_atexit_impl (2.18).
	for _, v := range []string{"2.31", "2.28", "2.17"} {
		bin, out, err := c("tl.cc", threadLocalCC, srs[v].Path, static...)
		if v == "2.17" {
			if u := undefinedSymbols(out); err == nil || len(u) != 1 || u[0] != "__cxa_thread_atexit_impl" {
				t.Errorf("thread_local against the glibc 2.17 stubs: %v, undefined %v\n%s", err, u, out)
			}
			continue
		}
		if err != nil {
			t.Errorf("thread_local against glibc %s: %v\n%s", v, err, out)
		} else if g, _ := needed(t, bin); g != "2.18" {
			t.Errorf("thread_local against glibc %s: needs GLIBC_%s, want 2.18", v, g)
		}
	}
	// All of libstdc++.a: what it can need above each ceiling.
	for _, v := range ceilings {
		a := filepath.Join(srs[v].Path, "usr/lib/gcc/aarch64-linux-gnu/10/libstdc++.a")
		bin, out, err := c("main.cc", "int main() { return 0; }\n", srs[v].Path, append(static, "-Wl,--whole-archive", a, "-Wl,--no-whole-archive")...)
		u := undefinedSymbols(out)
		switch v {
		case "2.17":
			if err == nil || strings.Join(u, " ") != "__cxa_thread_atexit_impl" {
				t.Errorf("all of libstdc++.a against the glibc 2.17 stubs: %v, undefined %v\n%s", err, u, out)
			}
		default:
			if err != nil {
				t.Errorf("all of libstdc++.a against the glibc %s stubs: %v\n%s", v, err, out)
			} else if g, _ := needed(t, bin); !atMost(g, "2.18") {
				t.Errorf("all of libstdc++.a needs GLIBC_%s", g)
			}
		}
		t.Logf("all of libstdc++.a (GCC 10) against the glibc %s stubs: err %v, undefined %v", v, err, u)
	}
	// libstdc++.so.6 from the tree (not glibc's: kept) needs
	// __cxa_thread_atexit_impl@GLIBC_2.18 itself; lld checks it.
	_, out, err := c("hello.cc", helloCC, srs["2.17"].Path, "-pthread")
	if u := undefinedSymbols(out); err == nil || strings.Join(u, " ") != "__cxa_thread_atexit_impl@GLIBC_2.18" {
		t.Errorf("C++ with the shared libstdc++.so.6 against the glibc 2.17 stubs: %v, undefined %v\n%s", err, u, out)
	}
	if _, out, err := c("hello.cc", helloCC, srs["2.28"].Path, "-pthread"); err != nil {
		t.Errorf("C++ with the shared libstdc++.so.6 against the glibc 2.28 stubs: %v\n%s", err, out)
	}
}

// TestLimitGlibcHostLibs limits copies of this machine's arm64 cross glibc
// (2.36, libc6-arm64-cross) and x86_64 glibc: no download.
func TestLimitGlibcHostLibs(t *testing.T) {
	src := "/usr/aarch64-linux-gnu/lib"
	if _, err := os.Stat(filepath.Join(src, "libc.so.6")); err != nil || !have("aarch64-linux-gnu-as", "aarch64-linux-gnu-ld", "readelf") {
		t.Skip("no arm64 cross glibc or binutils-aarch64-linux-gnu")
	}
	tools, err := ToolsFor("aarch64-linux-gnu")
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	hostLibc := filepath.Join(outside, "libc.so.6")
	copyFile(t, filepath.Join(src, "libc.so.6"), hostLibc)
	mk := func() string {
		root := t.TempDir()
		lib := filepath.Join(root, "lib/aarch64-linux-gnu")
		os.MkdirAll(lib, 0o755)
		os.MkdirAll(filepath.Join(root, "usr/lib/aarch64-linux-gnu"), 0o755)
		for _, l := range []string{"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "ld-linux-aarch64.so.1", "libgcc_s.so.1", "libnss_files.so.2"} {
			copyFile(t, filepath.Join(src, l), filepath.Join(lib, l))
		}
		os.Symlink("aarch64-linux-gnu/ld-linux-aarch64.so.1", filepath.Join(root, "lib/ld-linux-aarch64.so.1"))
		os.Symlink("../../../lib/aarch64-linux-gnu/libm.so.6", filepath.Join(root, "usr/lib/aarch64-linux-gnu/libm.so.6"))
		// An absolute symlink is read inside the root: it names nothing there.
		os.Symlink(hostLibc, filepath.Join(lib, "libescape.so.6"))
		return root
	}
	before := fileSum(t, hostLibc)
	a, b := mk(), mk()
	start := time.Now()
	res, err := limitGlibc(context.Background(), a, "2.34", tools)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("LimitGlibc 2.36 -> 2.34: %v, %v", time.Since(start).Round(time.Millisecond), res)
	if want := []string{"lib/aarch64-linux-gnu/ld-linux-aarch64.so.1", "lib/aarch64-linux-gnu/libc.so.6", "lib/aarch64-linux-gnu/libdl.so.2",
		"lib/aarch64-linux-gnu/libm.so.6", "lib/aarch64-linux-gnu/libpthread.so.0"}; res.Release != "2.36" || strings.Join(res.Stubbed, " ") != strings.Join(want, " ") {
		t.Errorf("stubbed %v from %s, want %v from 2.36", res.Stubbed, res.Release, want)
	}
	if err := LimitGlibc(b, "2.34", tools); err != nil {
		t.Fatal(err)
	}
	da, _ := TreeDigest(a)
	db, _ := TreeDigest(b)
	if da.Digest != db.Digest {
		t.Errorf("two LimitGlibc of the same tree: %s and %s", da.Digest, db.Digest)
	}
	if rel, def, err := glibcVersions(a); err != nil || rel != "2.34" || def != "2.34" {
		t.Errorf("after LimitGlibc 2.34: release %q, defined %q, %v", rel, def, err)
	}
	checkCeiling(t, filepath.Join(a, "lib/aarch64-linux-gnu/libc.so.6"), "2.34", "2.34")
	for _, l := range []string{"libgcc_s.so.1", "libnss_files.so.2"} { // GCC's; GLIBC_PRIVATE only
		if fileSum(t, filepath.Join(a, "lib/aarch64-linux-gnu", l)) != fileSum(t, filepath.Join(src, l)) {
			t.Errorf("%s was changed", l)
		}
	}
	if fileSum(t, hostLibc) != before {
		t.Fatal("the libc.so.6 outside the root, named by an absolute symlink, was changed")
	}

	// 2.17 is below the default __libc_start_main of glibc 2.34 and later.
	c := mk()
	if err := LimitGlibc(c, "2.17", tools); err == nil || !strings.Contains(err.Error(), "__libc_start_main@@GLIBC_2.34") {
		t.Errorf("2.36 limited to 2.17: %v", err)
	}
	for _, cse := range []struct{ ceiling, want string }{
		{"2.10", "older than this architecture's first glibc version 2.17"},
		{"two", "not a version"},
		{"2.17; rm", "not a version"},
	} {
		if err := LimitGlibc(c, cse.ceiling, tools); err == nil || !strings.Contains(err.Error(), cse.want) {
			t.Errorf("LimitGlibc(%q): %v, want %q", cse.ceiling, err, cse.want)
		}
	}
	if err := LimitGlibc(c, "2.34", Tools{}); err == nil || !strings.Contains(err.Error(), "no assembler") {
		t.Errorf("no tools: %v", err)
	}
	if err := LimitGlibc("/", "1.0", tools); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("LimitGlibc on /: %v", err)
	}
	// At or above the tree's glibc: nothing changes.
	dc, _ := TreeDigest(c)
	for _, ceiling := range []string{"2.36", "2.40"} {
		if err := LimitGlibc(c, ceiling, tools); err != nil {
			t.Errorf("LimitGlibc(%s) on glibc 2.36: %v", ceiling, err)
		}
	}
	if d, _ := TreeDigest(c); d.Digest != dc.Digest {
		t.Error("a ceiling at the tree's glibc changed the tree")
	}
	// Tools for another architecture.
	if have("x86_64-linux-gnu-as", "x86_64-linux-gnu-ld") {
		x86, _ := ToolsFor("x86_64-linux-gnu")
		if err := LimitGlibc(c, "2.34", x86); err == nil || !strings.Contains(err.Error(), "does not match the sysroot's architecture") {
			t.Errorf("x86_64 tools on an arm64 tree: %v", err)
		}
	}
}

// TestGlibcStubDefaults: this machine's x86_64 libc.so.6, stubbed at 2.12
// and 2.14 by the stub maker directly: memcpy@@GLIBC_2.14 (2011) is above
// 2.12, so memcpy@GLIBC_2.2.5 becomes the default again.
func TestGlibcStubDefaults(t *testing.T) {
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	tools, err := ToolsFor("x86_64-linux-gnu")
	if _, serr := os.Stat(libc); serr != nil || err != nil || !have("readelf") {
		t.Skipf("no x86_64 libc.so.6 or binutils: %v", err)
	}
	root, err := os.OpenRoot("/lib/x86_64-linux-gnu")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	l, err := readLib(root, "libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ceiling, want, notWant string }{
		{"2.12", "memcpy@@GLIBC_2.2.5", "GLIBC_2.14"},
		{"2.14", "memcpy@@GLIBC_2.14 memcpy@GLIBC_2.2.5", "GLIBC_2.15"},
	} {
		cv, _ := parseVersion(c.ceiling)
		st, err := makeStub(l, cv, c.ceiling, "host")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		data, err := st.build(context.Background(), tools, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "libc.so.6")
		os.WriteFile(p, data, 0o644)
		out, _ := exec.Command("readelf", "--dyn-syms", "-W", p).Output()
		var got []string
		for _, m := range regexp.MustCompile(`\s(memcpy@@?\S+)`).FindAllStringSubmatch(string(out), -1) {
			got = append(got, m[1])
		}
		sort.Strings(got)
		if strings.Join(got, " ") != c.want {
			t.Errorf("x86_64 stub at %s: %v, want %s", c.ceiling, got, c.want)
		}
		for _, v := range definedVersions(t, p) {
			if v == c.notWant || v == "GLIBC_PRIVATE" {
				t.Errorf("x86_64 stub at %s defines %s", c.ceiling, v)
			}
		}
		t.Logf("x86_64 libc.so.6 at %s: %d symbols, built in %v: %v", c.ceiling, len(st.want), time.Since(start).Round(time.Millisecond), got)
	}
}

func TestToolsFor(t *testing.T) {
	if have("aarch64-linux-gnu-as", "aarch64-linux-gnu-ld") {
		if tl, err := ToolsFor("aarch64-linux-gnu"); err != nil || filepath.Base(tl.As) != "aarch64-linux-gnu-as" || filepath.Base(tl.Ld) != "aarch64-linux-gnu-ld" {
			t.Errorf("ToolsFor(aarch64-linux-gnu) = %+v, %v", tl, err)
		}
	}
	// This machine's own triple with a vendor: plain as and ld.
	if out, err := exec.Command("as", "--version").Output(); err == nil {
		if m := regexp.MustCompile("configured for a target of `([a-z0-9_]+)-linux-gnu'").FindSubmatch(out); m != nil {
			tl, err := ToolsFor(string(m[1]) + "-pc-linux-gnu")
			if err != nil || filepath.Base(tl.As) != "as" || filepath.Base(tl.Ld) != "ld" {
				t.Errorf("ToolsFor(%s-pc-linux-gnu) = %+v, %v; want this machine's as and ld", m[1], tl, err)
			}
		}
	}
	if _, err := ToolsFor("sparc64-linux-gnu"); err == nil || !strings.Contains(err.Error(), "binutils-sparc64-linux-gnu") {
		t.Errorf("ToolsFor(sparc64-linux-gnu): %v", err)
	}
	if _, err := ToolsFor("../bin/x"); err == nil || !strings.Contains(err.Error(), "not a GNU triple") {
		t.Errorf("ToolsFor(../bin/x): %v", err)
	}
}

func TestGlibcSpecErrors(t *testing.T) {
	ctx := context.Background()
	deb := &DebianSpec{Suite: "bullseye", Arch: "arm64", Packages: []string{"libc6"}}
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "centos-7", Glibc: "2.17", Debian: deb}, "set matrix.yaml oses.centos-7.sysroot.triple"},
		{Spec{Name: "centos-7", Glibc: "latest", Triple: "aarch64-linux-gnu", Debian: deb}, `glibc ceiling "latest" is not a version`},
		{Spec{Name: "centos-7", Glibc: "2.17", Triple: "sparc64-linux-gnu", Debian: deb}, "apt-get install binutils-sparc64-linux-gnu"},
		{Spec{Name: "centos-7", Glibc: "2.17", Triple: "a b", Debian: deb}, "not a GNU triple"},
	} {
		_, err := Ensure(ctx, c.spec, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
