package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	goversion "github.com/hashicorp/go-version"
)

// probeTree skips the test without the build tools or any of tools, and
// copies the C++20 probe tree into a directory of the test's: that
// directory, the tree and the probe's recipe.
func probeTree(t *testing.T, tools ...string) (dir, tree, recipe string) {
	t.Helper()
	needBuildTools(t)
	for _, tool := range append([]string{"bwrap"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-deps.sh)", tool)
		}
	}
	dir = t.TempDir()
	tree = filepath.Join(dir, "tree")
	copyDir(t, filepath.Join("testdata", "cxxrt", "tree"), tree)
	recipe, _ = filepath.Abs(filepath.Join("testdata", "cxxrt", "recipe.yaml"))
	return dir, tree, recipe
}

// TestCXXRuntime is issue 48's proof in the small: a C++20 program (and a
// shared library it catches exceptions from) that needs GCC 12's C++
// library, built by the pipeline for four targets whose OSes have glibc
// 2.17, 2.28, 2.34 and 2.17. Every cell builds against the matrix's C++
// runtime, made from the pinned GCC source by the runtime step: once per
// ISA (the aarch64 cells share one, the second and third restore it), and
// linked statically. Each published binary needs no GLIBC_ version above
// its OS's (readelf -V), and its smoke run under qemu on the target's CPU
// model printed what it computed. It builds two runtimes (about 7 CPU
// minutes each), so make e2e runs it.
func TestCXXRuntime(t *testing.T) {
	e2eOnly(t, "builds GCC 12's C++ runtime for aarch64 and x86_64 from source")
	dir, tree, recipe := probeTree(t, "aarch64-linux-gnu-readelf", "readelf", "xz")
	// The repository's matrix, without kunpeng920's required patches (they
	// patch Doris's bitshuffle and OpenSSL, which the probe has not), and
	// its runtime script beside it.
	mb, err := os.ReadFile(filepath.Join(repo_(t), "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const required = "    patches: [scalar-bitshuffle, dynamic-openssl]\n"
	if !strings.Contains(string(mb), required) {
		t.Fatalf("matrix.yaml no longer has %q", required)
	}
	matrixFile := filepath.Join(dir, "matrix.yaml")
	writeMode(t, matrixFile, strings.Replace(string(mb), required, "", 1), 0o644)
	copyDir(t, filepath.Join(repo_(t), "runtimes"), filepath.Join(dir, "runtimes"))
	out, cache := filepath.Join(dir, "out"), filepath.Join(dir, "cache")
	if c := os.Getenv("DORISARM_RUNTIME_CACHE"); c != "" {
		cache = c // a cache kept between runs (the runtimes then come from it)
	}
	targets := map[string]struct {
		isa, glibc, model string
	}{
		"generic-armv8": {"aarch64", "2.17", "cortex-a72"},
		"kunpeng920":    {"aarch64", "2.28", "neoverse-n1"},
		"graviton3":     {"aarch64", "2.34", "max"},
		"x86_64":        {"x86_64", "2.17", ""},
	}
	// clang for every target: Debian's GCC 12 links its own glibc 2.36
	// start files before the sysroot's (its check rejects it for glibc
	// 2.17; for Amazon Linux 2023's 2.34 it passes, and its program then
	// needs GLIBC_2.34, which the Debian 11 libraries qemu runs it with
	// lack). Four cells at once: the two runtimes build side by side (a
	// cell waiting for another's runtime holds its slot).
	stdout, stderr, code := run(t, "build", "--matrix", matrixFile, "--source", tree, "--recipe", recipe, "--compiler", "clang",
		"--target", "generic-armv8,kunpeng920,graviton3,x86_64", "--out", out, "--cache", cache, "--jobs", "4")
	if code != 0 {
		if strings.Contains(stderr, "fetching http://deb.debian.org/") {
			t.Skipf("the runtime's pinned source cannot be had here:\n%s", stderr)
		}
		t.Fatalf("build: exit %d\n%s\n%s", code, stdout, stderr)
	}
	type step struct {
		ID         string
		Key        string
		Cached     bool
		Seconds    float64
		CPUSeconds float64 `json:"cpu_seconds"`
	}
	keys := map[string][]string{}  // ISA → the runtime step's keys
	built := map[string][]string{} // ISA → the targets that built it
	for target, want := range targets {
		pub := filepath.Join(out, "2.1.7", target)
		var rec struct {
			Steps []step
			Cache struct {
				Hits []string
			}
			CXXRuntime *struct {
				Name, Libstdcxx, Glibc, Key string
			} `json:"cxx_runtime"`
			Cell struct {
				SysrootWaiver string `json:"sysroot_waiver"`
				OS            string
			}
			Smoke []struct {
				Model  string `json:"qemu_model"`
				Exit   int
				Output string
			}
		}
		b, err := os.ReadFile(filepath.Join(pub, "dorisarm-build.json"))
		if err != nil || json.Unmarshal(b, &rec) != nil {
			t.Fatalf("%s: build record: %v", target, err)
		}
		if strings.Contains(string(b), "waive") {
			t.Errorf("%s: the record names a waiver:\n%s", target, b)
		}
		i := slices.IndexFunc(rec.Steps, func(s step) bool { return s.ID == "runtime:gcc-12" })
		if i < 0 {
			t.Fatalf("%s: no runtime:gcc-12 step in the record: %+v", target, rec.Steps)
		}
		rs := rec.Steps[i]
		keys[want.isa] = append(keys[want.isa], rs.Key)
		if !rs.Cached {
			built[want.isa] = append(built[want.isa], target)
			t.Logf("%s: runtime:gcc-12 built in %.0f s (%.0f CPU s)", target, rs.Seconds, rs.CPUSeconds)
		} else {
			t.Logf("%s: runtime:gcc-12 restored from the cache in %.1f s", target, rs.Seconds)
		}
		if rt := rec.CXXRuntime; rt == nil || rt.Name != "gcc-12" || rt.Libstdcxx != "12" || rt.Glibc != "2.17" || rt.Key != rs.Key {
			t.Errorf("%s: the record's C++ runtime: %+v", target, rt)
		}

		// No GLIBC_ version above the OS's, in the program or the library.
		readelf := "readelf"
		if want.isa == "aarch64" {
			readelf = "aarch64-linux-gnu-readelf"
		}
		ceiling := goversion.Must(goversion.NewVersion(want.glibc))
		for _, f := range []string{"cxx20-probe", "libprobe.so"} {
			p := filepath.Join(pub, "be", "lib", f)
			vb, err := exec.Command(readelf, "-V", "-d", p).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: readelf -V %s: %v\n%s", target, p, err, vb)
			}
			vers := regexp.MustCompile(`Name: GLIBC_([0-9.]+)`).FindAllStringSubmatch(string(vb), -1)
			if len(vers) == 0 {
				t.Errorf("%s: %s needs no GLIBC_ version at all: not a dynamic program against glibc?\n%s", target, f, vb)
			}
			var seen []string
			for _, v := range vers {
				seen = append(seen, v[1])
				if goversion.Must(goversion.NewVersion(v[1])).GreaterThan(ceiling) {
					t.Errorf("%s: %s needs GLIBC_%s, above %s's %s", target, f, v[1], rec.Cell.OS, want.glibc)
				}
			}
			if strings.Contains(string(vb), "libstdc++") || strings.Contains(string(vb), "GLIBCXX_") {
				t.Errorf("%s: %s links the C++ runtime dynamically:\n%s", target, f, vb)
			}
			t.Logf("%s: %s needs GLIBC_ %s (ceiling %s)", target, f, strings.Join(slices.Compact(slices.Sorted(slices.Values(seen))), " "), want.glibc)
		}

		// The smoke run under qemu on the target's CPU model.
		if len(rec.Smoke) != 1 {
			t.Fatalf("%s: smoke runs: %+v", target, rec.Smoke)
		}
		sm := rec.Smoke[0]
		if sm.Exit != 0 || !strings.Contains(sm.Output, "cxx20-probe: 0 failed") || sm.Model != want.model {
			t.Errorf("%s: smoke run under qemu -cpu %q (want %q): exit %d\n%s", target, sm.Model, want.model, sm.Exit, sm.Output)
		}
		for _, computed := range []string{"bit_cast(1.5) = 3ff8000000000000", "thread_local destructors: 3", "filesystem: file_size 10, removed 4",
			"shared_mutex: 1000 writes, 1000 reads", "exceptions from libprobe.so caught: 3 of 3", "to_chars(0.1+0.2) = 0.30000000000000004",
			"probefmt(1e21) = 1e+21"} {
			if !strings.Contains(sm.Output, computed) {
				t.Errorf("%s: the probe did not print %q:\n%s", target, computed, sm.Output)
			}
		}
		t.Logf("%s under qemu -cpu %s:\n%s", target, sm.Model, sm.Output)
	}
	// One runtime per ISA: the same key in every aarch64 cell, made once.
	for isa, ks := range keys {
		if len(slices.Compact(slices.Sorted(slices.Values(ks)))) != 1 {
			t.Errorf("%s: the runtime step has several keys: %v", isa, ks)
		}
		if os.Getenv("DORISARM_RUNTIME_CACHE") == "" && len(built[isa]) != 1 {
			t.Errorf("%s: the runtime was built by %v, not by one cell (the others restore it)", isa, built[isa])
		}
	}
	if keys["aarch64"][0] == keys["x86_64"][0] {
		t.Error("aarch64 and x86_64 share a runtime key")
	}
}

// TestRuntimeStepSeesItsSource runs the runtime step for real (the
// sandbox, the fixed paths, the pinned fetch, the install) with a script
// that stands in for GCC's build: it takes the cross compiler's own C++
// library where the real one would build it. The script tells a Debian
// orig.tar.gz from a plain .tar.xz by the archive's name, so the step must
// show the source under its own name; a step that showed it at a bare
// fixed path failed every cold runtime build, and only the slow
// TestCXXRuntime (make e2e-runtime) built one.
func TestRuntimeStepSeesItsSource(t *testing.T) {
	dir, tree, recipe := probeTree(t, "aarch64-linux-gnu-g++")

	// The source: a Debian-named archive that holds what the stand-in reads.
	var src bytes.Buffer
	gz := gzip.NewWriter(&src)
	tw := tar.NewWriter(gz)
	ver := "12.2.0\n"
	tw.WriteHeader(&tar.Header{Name: "gcc-12.2.0/gcc/BASE-VER", Mode: 0o644, Size: int64(len(ver)), Typeflag: tar.TypeReg})
	tw.Write([]byte(ver))
	tw.Close()
	gz.Close()
	sum := sha256.Sum256(src.Bytes())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(src.Bytes())
	}))
	defer srv.Close()

	mb, err := os.ReadFile(filepath.Join(repo_(t), "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := string(mb)
	for _, re := range []struct{ pat, repl string }{
		{`(?m)^(      url: ).*/gcc-12_12\.2\.0\.orig\.tar\.gz$`, "${1}" + srv.URL + "/pool/gcc-12_12.2.0.orig.tar.gz"},
		{`(?m)^(      sha256: )b8298be16aeeb96a889c6afed0a8e2241b47452e89cc81fe65ea849d5c740fcb$`, "${1}" + hex.EncodeToString(sum[:])},
		{`(?m)^(      size: )87090343$`, "${1}" + strconv.Itoa(src.Len())},
	} {
		rx := regexp.MustCompile(re.pat)
		if !rx.MatchString(m) {
			t.Fatalf("matrix.yaml no longer matches %s", re.pat)
		}
		m = rx.ReplaceAllString(m, re.repl)
	}
	matrixFile := filepath.Join(dir, "matrix.yaml")
	writeMode(t, matrixFile, m, 0o644)
	writeMode(t, filepath.Join(dir, "runtimes", "gcc-cxxrt.sh"), `#!/bin/bash
set -eu
case $CXXRT_SOURCE in
  *.orig.tar.gz) echo "stand-in: the source is $CXXRT_SOURCE" ;;
  *) echo "stand-in: $CXXRT_SOURCE does not say what archive it is" >&2; exit 1 ;;
esac
[ "$(tar -xzOf "$CXXRT_SOURCE" gcc-12.2.0/gcc/BASE-VER)" = 12.2.0 ]
[ -d "$CXXRT_SYSROOT/usr/include" ]
lib=$(dirname "$("$CXXRT_CC" -print-file-name=libstdc++.a)")
inc=$(echo | "$CXXRT_CC" -xc++ -E -v - 2>&1 | sed -n 's|^ \(/.*/include/c++/12\)$|\1|p' | head -1)
mkdir -p "$CXXRT_PREFIX/lib" "$CXXRT_PREFIX/include/c++"
cp -r "$inc" "$CXXRT_PREFIX/include/c++/12"
cp "$lib/libstdc++.a" "$lib/libsupc++.a" "$lib/libgcc.a" "$lib/libgcc_eh.a" "$CXXRT_PREFIX/lib/"
`, 0o755)

	out, cache := filepath.Join(dir, "out"), filepath.Join(dir, "cache")
	stdout, stderr, code := run(t, "build", "--matrix", matrixFile, "--source", tree, "--recipe", recipe, "--compiler", "clang",
		"--packages", "probefmt", "--target", "graviton3", "--out", out, "--cache", cache)
	logs, _ := filepath.Glob(filepath.Join(cache, "work", "*", "logs", "runtime_gcc-12.log"))
	var log []byte
	if len(logs) == 1 {
		log, _ = os.ReadFile(logs[0])
	}
	if !strings.Contains(stderr, "runtime:gcc-12 ran") {
		t.Fatalf("the runtime step did not run: exit %d\n%s\n%s\n%s", code, stdout, stderr, log)
	}
	if !strings.Contains(string(log), "stand-in: the source is /dorisarm/runtime-source/gcc-12_12.2.0.orig.tar.gz") {
		t.Errorf("the runtime step did not see its source by name at the fixed path:\n%s", log)
	}
	if strings.Contains(string(log), dir) {
		t.Errorf("the runtime step saw this machine's paths:\n%s", log)
	}
	// The stand-in is the cross compiler's own library, made for Debian
	// 12's glibc 2.36: the compiler's check links against it and the
	// capped sysroot, and refuses it by the symbols the OS lacks.
	if code != 1 || !strings.Contains(stderr, "toolchain:clang failed") || !strings.Contains(stderr, "undefined symbol: __libc_single_threaded") {
		t.Errorf("a runtime that needs glibc 2.32 was not refused by the compiler's check: exit %d\n%s", code, stderr)
	}
}
