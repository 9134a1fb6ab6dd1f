package scan

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/isa"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-deps.sh)", tool)
		}
	}
}

var mtx *matrix.Matrix

func policy(t *testing.T, target string) *Policy {
	t.Helper()
	if mtx == nil {
		m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		mtx = m
	}
	p, err := PolicyFor(mtx, target)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

// compile writes src as name in a temporary directory, runs cc there (the
// compiler and its flags) on it with -o out, and returns out.
func compile(t *testing.T, name, src, out string, cc ...string) []byte {
	t.Helper()
	need(t, cc[0])
	dir := t.TempDir()
	write(t, filepath.Join(dir, name), src)
	run(t, dir, append(cc, name, "-o", out)...)
	b, err := os.ReadFile(filepath.Join(dir, out))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, path, content string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func scan(t *testing.T, pol *Policy, inputs ...string) *Report {
	t.Helper()
	r, err := Scan(context.Background(), inputs, pol, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func findings(r *Report, kind string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

func hasViolation(r *Report, kind, pathSuffix string) bool {
	for _, f := range r.Findings {
		if f.Kind == kind && f.Violation() && strings.HasSuffix(f.Path, pathSuffix) {
			return true
		}
	}
	return false
}

const cFunc = "int work(int x) { return x * 3 + 1; }\n"

// TestForeignObjectInArchives: an x86-64 member inside GNU, thin and BSD
// archives is found and named lib/libmix.a(member).
func TestForeignObjectInArchives(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc", "gcc", "llvm-ar-16")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "src/a.c"), cFunc)
	write(t, filepath.Join(dir, "src/x.c"), cFunc)
	run(t, dir, "aarch64-linux-gnu-gcc", "-c", "src/a.c", "-o", "a_long_object_file_name_for_the_gnu_table.o")
	run(t, dir, "gcc", "-c", "src/x.c", "-o", "x86_member.o")
	os.MkdirAll(filepath.Join(dir, "tree/lib"), 0o755)
	run(t, dir, "aarch64-linux-gnu-ar", "rcs", "tree/lib/libmix.a", "a_long_object_file_name_for_the_gnu_table.o", "x86_member.o")
	run(t, dir, "llvm-ar-16", "--format=bsd", "rcs", "tree/lib/libbsd.a", "a_long_object_file_name_for_the_gnu_table.o", "x86_member.o")
	// Thin members are relative to the archive; keep them beside it.
	os.Rename(filepath.Join(dir, "a_long_object_file_name_for_the_gnu_table.o"), filepath.Join(dir, "tree/lib/a_long_object_file_name_for_the_gnu_table.o"))
	os.Rename(filepath.Join(dir, "x86_member.o"), filepath.Join(dir, "tree/lib/x86_member.o"))
	run(t, filepath.Join(dir, "tree/lib"), "aarch64-linux-gnu-ar", "rcsT", "libthin.a", "a_long_object_file_name_for_the_gnu_table.o", "x86_member.o")

	r := scan(t, policy(t, "kunpeng920"), filepath.Join(dir, "tree"))
	for _, want := range []string{"lib/libmix.a(x86_member.o)", "lib/libthin.a(x86_member.o)", "lib/libbsd.a(x86_member.o)", "lib/x86_member.o"} {
		if !hasViolation(r, KindForeignArch, want) {
			t.Errorf("no foreign-arch violation for %s:\n%+v", want, r.Findings)
		}
	}
	for _, ok := range []string{"lib/libmix.a(a_long_object_file_name_for_the_gnu_table.o)", "lib/libbsd.a(a_long_object_file_name_for_the_gnu_table.o)"} {
		found := false
		for _, f := range r.Files {
			if f.Path == ok && f.Machine == "aarch64" {
				found = true
			}
		}
		if !found {
			t.Errorf("member %s not scanned", ok)
		}
	}
	if r.Summary.ByKind[KindForeignArch] != 4 {
		t.Errorf("foreign-arch count %d, want 4", r.Summary.ByKind[KindForeignArch])
	}
}

func makeJar(t *testing.T, path string, entries map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, data := range entries {
		w, _ := zw.Create(name)
		w.Write(data)
	}
	zw.Close()
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, buf.Bytes(), 0o644)
}

// TestJNICoverage: an x86-only jar fails for an arm64 target, a jar with a
// linux-aarch64 library passes, and the jar may sit inside a tarball.
func TestJNICoverage(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc", "gcc")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "j.c"), cFunc)
	run(t, dir, "gcc", "-shared", "-fPIC", "j.c", "-o", "x86.so")
	run(t, dir, "aarch64-linux-gnu-gcc", "-shared", "-fPIC", "j.c", "-o", "arm.so")
	x86, _ := os.ReadFile(filepath.Join(dir, "x86.so"))
	arm, _ := os.ReadFile(filepath.Join(dir, "arm.so"))
	tree := filepath.Join(dir, "tree")
	makeJar(t, filepath.Join(tree, "fe/lib/snappy-java.jar"), map[string][]byte{
		"META-INF/MANIFEST.MF": []byte("Manifest-Version: 1.0\n"),
		"org/xerial/snappy/native/Linux/x86_64/libsnappyjava.so":  x86,
		"org/xerial/snappy/native/Linux/aarch64/libsnappyjava.so": arm,
	})
	makeJar(t, filepath.Join(tree, "fe/lib/rocksdbjni.jar"), map[string][]byte{
		"META-INF/MANIFEST.MF": []byte("Manifest-Version: 1.0\n"), "librocksdbjni-linux64.so": x86, "Foo.class": {0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 0x3d},
	})
	r := scan(t, policy(t, "graviton2"), tree)
	if !hasViolation(r, KindJNIMissing, "fe/lib/rocksdbjni.jar") {
		t.Errorf("x86-only jar passed: %+v", r.Findings)
	}
	if hasViolation(r, KindJNIMissing, "snappy-java.jar") || hasViolation(r, KindForeignArch, "snappy-java.jar!/org/xerial/snappy/native/Linux/x86_64/libsnappyjava.so") {
		t.Errorf("multi-platform jar failed: %+v", r.Findings)
	}
	if r.Summary.Violations != 1 {
		t.Errorf("violations %d, want 1: %+v", r.Summary.Violations, r.Findings)
	}
	// The same jar inside a tar.gz.
	jar, _ := os.ReadFile(filepath.Join(tree, "fe/lib/rocksdbjni.jar"))
	tgz := filepath.Join(dir, "doris.tar.gz")
	writeTarGz(t, tgz, map[string][]byte{"fe/lib/rocksdbjni.jar": jar})
	r = scan(t, policy(t, "graviton2"), tgz)
	if !hasViolation(r, KindJNIMissing, "doris.tar.gz!/fe/lib/rocksdbjni.jar") {
		t.Errorf("nested jar: %+v", r.Findings)
	}
}

func writeTarGz(t *testing.T, path string, files map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, data := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	tw.Close()
	gz.Close()
	os.WriteFile(path, buf.Bytes(), 0o644)
}

// TestISAAgainstTargets: an SVE function fails a Kunpeng scan by name and
// passes Graviton3; an armv8.0 build's outline-atomics helpers are guarded.
func TestISAAgainstTargets(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "sve.c"), `#include <arm_sve.h>
#include <stdint.h>
int64_t sve_sum(const int32_t *v, int64_t n) {
	svint64_t acc = svdup_s64(0);
	for (int64_t i = 0; i < n; i += svcntd()) {
		svbool_t pg = svwhilelt_b64(i, n);
		acc = svadd_s64_m(pg, acc, svld1sw_s64(pg, v + i));
	}
	return svaddv_s64(svptrue_b64(), acc);
}
`)
	write(t, filepath.Join(dir, "atomic.c"), `#include <stdint.h>
int64_t counter;
int main(void) { __atomic_fetch_add(&counter, 1, __ATOMIC_ACQ_REL); return (int)counter - 1; }
`)
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", "-march=armv8.2-a+sve", "-shared", "-fPIC", "sve.c", "-o", "libsve.so")
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", "-march=armv8-a", "-moutline-atomics", "atomic.c", "-o", "atomic")

	r := scan(t, policy(t, "kunpeng920"), filepath.Join(dir, "libsve.so"))
	var got *Finding
	for i, f := range r.Findings {
		if f.Kind == KindISA && f.Feature == "sve" {
			got = &r.Findings[i]
		}
	}
	if got == nil || !got.Violation() || got.Function != "sve_sum" || got.Count < 3 || got.Guarded {
		t.Fatalf("SVE in a Kunpeng build: %+v", r.Findings)
	}
	if r := scan(t, policy(t, "graviton3"), filepath.Join(dir, "libsve.so")); !r.Summary.Clean {
		t.Errorf("graviton3 allows SVE: %+v", r.Findings)
	}
	// Waived by an allow file: the summary says how many SVE instructions were waived.
	allow := filepath.Join(dir, "allow.yaml")
	write(t, allow, "exceptions:\n  - {path: \""+got.Path+"\", kind: isa-extension, feature: sve, reason: test}\n")
	exc, err := LoadAllow(allow)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := Scan(context.Background(), []string{filepath.Join(dir, "libsve.so")}, policy(t, "kunpeng920"), Options{Allow: exc})
	if s := w.Summary; !s.Clean || s.AllowedByKind[KindISA] != 1 || s.Waived["sve"] != got.Count || s.Features["sve"] < got.Count || s.Guarded["sve"] != 0 {
		t.Errorf("waived SVE in the summary: %+v (finding counted %d at %q) %v", s, got.Count, got.Path, w.Warnings)
	}

	r = scan(t, policy(t, "generic-armv8"), filepath.Join(dir, "atomic"))
	lse := 0
	for _, f := range r.Findings {
		if f.Kind == KindISA && f.Feature == "lse" {
			lse++
			if f.Violation() || !f.Guarded || !strings.HasPrefix(f.Function, "__aarch64_") {
				t.Errorf("outline atomics: %+v", f)
			}
		}
	}
	if lse == 0 {
		t.Error("no outline-atomics helper found (is -moutline-atomics on?)")
	}
	if fl := r.Files[0]; fl.Guarded["lse"] == 0 || fl.Features["lse"] != fl.Guarded["lse"] {
		t.Errorf("file counts: features %v guarded %v", fl.Features, fl.Guarded)
	}
	if s := r.Summary; s.Guarded["lse"] != r.Files[0].Guarded["lse"] || s.Waived["lse"] != 0 || s.GlibcxxMax != "" {
		t.Errorf("summary counts: %+v", s)
	}
}

// TestGlibcOpenSSLPageSize builds real executables against the Debian 12
// sysroot (glibc 2.36) and arm64 OpenSSL.
func TestGlibcOpenSSLPageSize(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc")
	if _, err := os.Stat("/usr/lib/aarch64-linux-gnu/libcrypto.a"); err != nil {
		t.Skip("libssl-dev:arm64 not installed")
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ssl.c"), `#include <openssl/evp.h>
#include <stdio.h>
int main(void) { unsigned char md[64]; unsigned int n; EVP_Digest("abc", 3, md, &n, EVP_sha256(), NULL); printf("%u\n", n); return 0; }
`)
	inc := "-I/usr/include/aarch64-linux-gnu"
	run(t, dir, "aarch64-linux-gnu-gcc", inc, "ssl.c", "-o", "static_ssl", "/usr/lib/aarch64-linux-gnu/libcrypto.a", "-ldl", "-pthread")
	run(t, dir, "aarch64-linux-gnu-gcc", inc, "ssl.c", "-o", "dynamic_ssl", "-L/usr/lib/aarch64-linux-gnu", "-lcrypto")
	run(t, dir, "aarch64-linux-gnu-gcc", inc, "ssl.c", "-o", "small_pages", "-Wl,-z,max-page-size=4096", "-L/usr/lib/aarch64-linux-gnu", "-lcrypto")

	kp := scan(t, policy(t, "kunpeng920"), filepath.Join(dir, "static_ssl"))
	g := findings(kp, KindGlibc)
	if len(g) != 1 || !g[0].Violation() || g[0].Feature != "GLIBC_2.34" || !strings.Contains(g[0].Detail, "__libc_start_main@GLIBC_2.34") {
		t.Errorf("glibc 2.34 vs kylin 2.28: %+v", g)
	}
	if !hasViolation(kp, KindOpenSSLStatic, "static_ssl") {
		t.Errorf("static OpenSSL not caught for a dynamic-OpenSSL target: %+v", kp.Findings)
	}
	if kp.Files[0].OpenSSL != "static" {
		t.Errorf("openssl = %q", kp.Files[0].OpenSSL)
	}
	// Amazon Linux 2023 has glibc 2.34: the same binary fits (graviton3, static OpenSSL policy).
	g3 := scan(t, policy(t, "graviton3"), filepath.Join(dir, "static_ssl"))
	if len(findings(g3, KindGlibc)) != 0 || hasViolation(g3, KindOpenSSLStatic, "static_ssl") {
		t.Errorf("graviton3: %+v", g3.Findings)
	}
	dyn := scan(t, policy(t, "graviton3"), filepath.Join(dir, "dynamic_ssl"))
	if !hasViolation(dyn, KindOpenSSLShared, "dynamic_ssl") {
		t.Errorf("dynamic OpenSSL not caught for a static-OpenSSL target: %+v", dyn.Findings)
	}
	kpd := scan(t, policy(t, "kunpeng920"), filepath.Join(dir, "dynamic_ssl"))
	if hasViolation(kpd, KindOpenSSLStatic, "dynamic_ssl") || hasViolation(kpd, KindPageSize, "dynamic_ssl") {
		t.Errorf("dynamic OpenSSL, 64 KiB aligned, on kunpeng: %+v", kpd.Findings)
	}
	sp := scan(t, policy(t, "kunpeng920"), filepath.Join(dir, "small_pages"))
	if !hasViolation(sp, KindPageSize, "small_pages") || sp.Files[0].PageAlign != 4096 {
		t.Errorf("4 KiB alignment on a 64 KiB-page OS: %+v", sp.Findings)
	}
	if sp := scan(t, policy(t, "graviton2"), filepath.Join(dir, "small_pages")); hasViolation(sp, KindPageSize, "small_pages") {
		t.Error("4 KiB pages are fine on Amazon Linux 2")
	}
}

func TestReportFormatsAndAllow(t *testing.T) {
	need(t, "gcc")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "x.c"), cFunc)
	os.MkdirAll(filepath.Join(dir, "tree"), 0o755)
	run(t, dir, "gcc", "-c", "x.c", "-o", "tree/x86.o")
	r := scan(t, policy(t, "kunpeng920"), filepath.Join(dir, "tree"))
	if r.Summary.Clean || r.Summary.Violations != 1 {
		t.Fatalf("%+v", r.Summary)
	}
	var buf bytes.Buffer
	Write(&buf, r, "json")
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Files[0].Machine != "x86_64" || back.Findings[0].Kind != KindForeignArch {
		t.Errorf("json: %v %s", err, buf.String())
	}
	buf.Reset()
	Write(&buf, r, "sarif")
	var sarif struct {
		Version string `json:"version"`
		Runs    []struct {
			Results []struct {
				RuleID    string `json:"ruleId"`
				Level     string `json:"level"`
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string } `json:"artifactLocation"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(buf.Bytes(), &sarif); err != nil || sarif.Version != "2.1.0" || sarif.Runs[0].Results[0].RuleID != KindForeignArch ||
		sarif.Runs[0].Results[0].Level != "error" || sarif.Runs[0].Results[0].Locations[0].PhysicalLocation.ArtifactLocation.URI != "x86.o" {
		t.Errorf("sarif: %v %s", err, buf.String())
	}
	buf.Reset()
	Write(&buf, r, "markdown")
	if !strings.Contains(buf.String(), "| ERROR | foreign-arch | `x86.o` |") {
		t.Errorf("markdown:\n%s", buf.String())
	}
	buf.Reset()
	Write(&buf, r, "table")
	if !strings.Contains(buf.String(), "1 violation(s) for kunpeng920 (foreign-arch 1)") {
		t.Errorf("table:\n%s", buf.String())
	}

	allow := filepath.Join(dir, "allow.yaml")
	write(t, allow, "exceptions:\n  - {path: \"*.o\", kind: foreign-arch, reason: host build tool kept for the installer}\n  - {path: be/lib/*, kind: isa-extension, feature: sve, reason: gone}\n")
	exc, err := LoadAllow(allow)
	if err != nil {
		t.Fatal(err)
	}
	r, _ = Scan(context.Background(), []string{filepath.Join(dir, "tree")}, policy(t, "kunpeng920"), Options{Allow: exc})
	if !r.Summary.Clean || r.Summary.Allowed != 1 || r.Allowed[0].Matched != 1 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "allow.yaml:3:5") {
		t.Errorf("allow: %+v %+v %v", r.Summary, r.Allowed, r.Warnings)
	}
	write(t, allow, "exceptions:\n  - {path: \"*.o\", kind: foreign-architecture}\n")
	if _, err := LoadAllow(allow); err == nil || !strings.Contains(err.Error(), "allow.yaml:2:") || !strings.Contains(err.Error(), "unknown kind") || !strings.Contains(err.Error(), "reason is required") {
		t.Errorf("bad allow file: %v", err)
	}
}

// TestHostileInputs: truncated and corrupt inputs give unreadable findings,
// an archive bomb stops at the limit, and nothing panics.
func TestHostileInputs(t *testing.T) {
	dir := t.TempDir()
	elfHead := append([]byte("\x7fELF\x02\x01\x01\x00"), make([]byte, 40)...)
	write(t, filepath.Join(dir, "tree/truncated.so"), string(elfHead))
	write(t, filepath.Join(dir, "tree/bad.a"), "!<arch>\nmember.o/       0           0     0     644     99999     `\nshort")
	write(t, filepath.Join(dir, "tree/bad.jar"), "PK\x03\x04garbage")
	write(t, filepath.Join(dir, "tree/bad.tar.gz"), "\x1f\x8b\x08\x00garbage")
	r := scan(t, nil, filepath.Join(dir, "tree"))
	for _, p := range []string{"truncated.so", "bad.a", "bad.jar", "bad.tar.gz"} {
		found := false
		for _, f := range findings(r, KindUnreadable) {
			if f.Path == p {
				found = true
			}
		}
		if !found {
			t.Errorf("no unreadable finding for %s: %+v", p, r.Findings)
		}
	}
	// A gzip bomb: 256 MiB of zeros that look like a tar member.
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "big.o", Size: 256 << 20, Mode: 0o644, Typeflag: tar.TypeReg})
	zero := make([]byte, 1<<20)
	copy(zero, "\x7fELF")
	for i := 0; i < 256; i++ {
		tw.Write(zero)
		zero[0], zero[1], zero[2], zero[3] = 0, 0, 0, 0
	}
	tw.Close()
	gz.Close()
	bomb := filepath.Join(dir, "bomb.tar.gz")
	os.WriteFile(bomb, buf.Bytes(), 0o644)
	r, err := Scan(context.Background(), []string{bomb}, nil, Options{MaxBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if u := findings(r, KindUnreadable); len(u) == 0 || !strings.Contains(u[0].Detail, "scan limits reached") {
		t.Errorf("bomb: %+v", r.Findings)
	}
	if _, err := Scan(context.Background(), []string{filepath.Join(dir, "missing")}, nil, Options{}); err == nil {
		t.Error("a missing input is an input error")
	}
}

func TestReadArFormats(t *testing.T) {
	for _, bad := range []string{"!<arch>\nx", "!<arch>\n" + strings.Repeat(" ", 58) + "`\n", "nope"} {
		if _, err := readAr([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzAnalyzeELF(f *testing.F) {
	f.Add([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00\xb7\x00"))
	if b, err := os.ReadFile("/usr/aarch64-linux-gnu/lib/libdl.so.2"); err == nil && len(b) < 1<<20 {
		f.Add(b)
	}
	f.Add(tinyELF())
	f.Fuzz(func(t *testing.T, data []byte) {
		analyzeELF("fuzz", data, nil, isa.Default)
		otherFormat(data)
	})
}

func FuzzReadAr(f *testing.F) {
	f.Add([]byte("!<arch>\n/               0           0     0     0       4         `\n\x00\x00\x00\x00"))
	f.Add([]byte("!<thin>\n//              0           0     0     0       4         `\nab/\n/0              0           0     0     644     10        `\n"))
	f.Fuzz(func(t *testing.T, data []byte) { readAr(data) })
}
