package scan

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

// TestShipsMatch: a ships glob matches a file's path as the report names
// it, or a leading part of it ending before a "/", "!" or "(" (the
// directory, jar or archive that holds it); nothing else.
func TestShipsMatch(t *testing.T) {
	pol, err := policy(t, "kunpeng920").WithShips([]string{"thirdparty/installed/lib64/openssl-shared", "thirdparty/installed/lib/libz.so*", "fe/lib/*.jar"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"thirdparty/installed/lib64/openssl-shared/libssl.so.1.1": true,
		"thirdparty/installed/lib64/openssl-shared/engines/x.so":  true,
		"thirdparty/installed/lib/libz.so.1.2.13":                 true,
		"fe/lib/snappy-java.jar!/org/xerial/libsnappyjava.so":     true,
		"thirdparty/installed/lib64/openssl-shared.so":            false,
		"thirdparty/installed/lib64/libcrypto.so.1.1":             false,
		"thirdparty/installed/lib/engines-1.1/afalg.so":           false,
		"thirdparty/installed/bin/openssl":                        false,
		"thirdparty/installed/lib/libbrpc.so":                     false,
		"other/thirdparty/installed/lib/libz.so.1":                false,
	} {
		if got := pol.ships(name); got != want {
			t.Errorf("ships(%s) = %v, want %v", name, got, want)
		}
		want := map[bool]string{true: ScopeDeployment, false: ScopeNotShipped}[want]
		if got := pol.scopeOf(name, "dyn"); got != want {
			t.Errorf("scopeOf(%s, dyn) = %s, want %s", name, got, want)
		}
		if got := pol.scopeOf(name, "rel"); got != ScopeObject {
			t.Errorf("scopeOf(%s, rel) = %s, want %s", name, got, ScopeObject)
		}
	}
	// No ships: every linked file ships. No policy: the same.
	plain := policy(t, "kunpeng920")
	var none *Policy
	for _, p := range []*Policy{plain, none} {
		if got := p.scopeOf("thirdparty/installed/bin/openssl", "exec"); got != ScopeDeployment {
			t.Errorf("no ships: scope %s", got)
		}
	}
	// A policy with no deployment checks narrows nothing, ships or not.
	bare := &Policy{Target: "t"}
	bare.init()
	if bare, _ = bare.WithShips([]string{"be"}); bare.scopeOf("bin/protoc", "exec") != ScopeDeployment || !bare.Judges(KindGlibc, ScopeNotShipped) {
		t.Error("a policy without deployment checks narrowed a check")
	}
	for _, bad := range []string{"", "/abs/lib", "a/../b", "lib/[", "./lib"} {
		if _, err := plain.WithShips([]string{bad}); err == nil || !strings.Contains(err.Error(), "as the scan report names files") {
			t.Errorf("WithShips(%q): %v", bad, err)
		}
	}
	if p, err := plain.WithShips(nil); p != plain || err != nil {
		t.Errorf("WithShips(nil) = %p, %v; want the policy itself", p, err)
	}
}

// TestDeploymentChecksFromMatrix: the policy's deployment checks are
// matrix.yaml's; the checks of foreign code and of the CPU's instructions
// are refused there, with the file and line.
func TestDeploymentChecksFromMatrix(t *testing.T) {
	pol := policy(t, "kunpeng920")
	if !slices.Equal(pol.DeploymentChecks, mtx.Scan.DeploymentChecks) || len(pol.DeploymentChecks) == 0 {
		t.Fatalf("deployment checks %v, matrix %v", pol.DeploymentChecks, mtx.Scan.DeploymentChecks)
	}
	for _, k := range []string{KindISA, KindForeignArch, KindFlagsBeyond, KindUnreadable} {
		if !pol.Judges(k, ScopeNotShipped) || !pol.Judges(k, ScopeObject) {
			t.Errorf("%s does not judge every file", k)
		}
	}
	for _, k := range pol.DeploymentChecks {
		if pol.Judges(k, ScopeNotShipped) || !pol.Judges(k, ScopeDeployment) {
			t.Errorf("%s: judges not-shipped %v, deployment %v", k, pol.Judges(k, ScopeNotShipped), pol.Judges(k, ScopeDeployment))
		}
	}
	m, err := repoMatrix() // its own copy, to edit
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{KindISA, KindForeignArch, "no-such-kind"} {
		m.Scan.DeploymentChecks = append(slices.Clone(pol.DeploymentChecks), k)
		_, err := PolicyFor(m, "kunpeng920")
		var de *datafile.Error
		if !errors.As(err, &de) || !strings.Contains(err.Error(), "matrix.yaml:") || !strings.Contains(err.Error(), "cannot be limited to what ships") {
			t.Errorf("deployment check %s: %v", k, err)
		}
	}
}

// TestBuildToolSVEStillFails: a build tool that does not ship, with SVE
// code, is an error for kunpeng920 all the same; its glibc need (2.34,
// newer than Kylin's 2.28) is not judged, the same file shipped is.
func TestBuildToolSVEStillFails(t *testing.T) {
	tree := t.TempDir()
	write(t, filepath.Join(tree, "thirdparty/installed/bin/protoc"), string(tinyELF()))
	pol, err := policy(t, "kunpeng920").WithShips([]string{"thirdparty/installed/lib64/openssl-shared"})
	if err != nil {
		t.Fatal(err)
	}
	r := scan(t, pol, tree)
	if !hasViolation(r, KindISA, "bin/protoc") || r.Summary.Clean {
		t.Errorf("SVE in a build tool is not an error: %+v", r.Findings)
	}
	if len(findings(r, KindGlibc)) != 0 || r.Files[0].Scope != ScopeNotShipped || r.Files[0].GlibcMax != "2.34" || r.Summary.GlibcMax != "" {
		t.Errorf("a build tool's glibc: findings %+v, file %+v, summary glibc %q", findings(r, KindGlibc), r.Files[0], r.Summary.GlibcMax)
	}
	shipped := t.TempDir()
	write(t, filepath.Join(shipped, "thirdparty/installed/lib64/openssl-shared/libx.so"), string(tinyELF()))
	r = scan(t, pol, shipped)
	if !hasViolation(r, KindISA, "libx.so") || !hasViolation(r, KindGlibc, "libx.so") || r.Files[0].Scope != ScopeDeployment || r.Summary.GlibcMax != "2.34" {
		t.Errorf("shipped: %+v %+v", r.Files, r.Findings)
	}
}

// openSSLish defines OpenSSL's entry points itself, as a program or
// library with OpenSSL linked in statically does.
const openSSLish = `int EVP_DigestInit_ex(void) { return 1; }
int SSL_CTX_new(void) { return 2; }
`

// TestThirdpartyScope: a third-party install as a --packages build
// publishes it. Scoped to what the BE ships (lib64/openssl-shared), the
// statically linked openssl CLI, a library the BE does not ship and an
// archive get no OpenSSL, glibc or page-size findings, while SVE in a build
// tool and an x86-64 member of an archive are still errors and a shipped
// library is judged in full. The same tree scanned without a scope (a BE
// output, dorisarm scan) reports the openssl CLI as before.
func TestThirdpartyScope(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc", "gcc", "ar")
	dir := t.TempDir()
	tree := filepath.Join(dir, "out")
	inst := filepath.Join(tree, "thirdparty/installed")
	for _, d := range []string{"bin", "lib", "lib64/openssl-shared"} {
		os.MkdirAll(filepath.Join(inst, d), 0o755)
	}
	write(t, filepath.Join(dir, "openssl.c"), openSSLish+"int main(void) { return EVP_DigestInit_ex() + SSL_CTX_new(); }\n")
	write(t, filepath.Join(dir, "evp.c"), openSSLish)
	write(t, filepath.Join(dir, "x.c"), cFunc)
	write(t, filepath.Join(dir, "sve.c"), sveProgram)
	small := "-Wl,-z,max-page-size=4096" // kunpeng920's Kylin runs 64 KiB pages
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", small, "openssl.c", "-o", filepath.Join(inst, "bin/openssl"))
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", "-march=armv8.2-a+sve", "sve.c", "-o", filepath.Join(inst, "bin/protoc"))
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", small, "-shared", "-fPIC", "evp.c", "-o", filepath.Join(inst, "lib/libbrpc.so"))
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", small, "-shared", "-fPIC", "evp.c", "-o", filepath.Join(inst, "lib64/openssl-shared/libshipped.so"))
	run(t, dir, "aarch64-linux-gnu-gcc", "-O2", "-c", "evp.c", "-o", "evp.o")
	run(t, dir, "gcc", "-O2", "-c", "x.c", "-o", "x86.o")
	run(t, dir, "ar", "rcs", filepath.Join(inst, "lib/libfoo.a"), "evp.o", "x86.o")

	kp := policy(t, "kunpeng920")
	plain := scan(t, kp, tree)
	for _, f := range []string{"bin/openssl", "lib/libbrpc.so", "openssl-shared/libshipped.so"} {
		if !hasViolation(plain, KindOpenSSLStatic, f) || !hasViolation(plain, KindPageSize, f) {
			t.Errorf("without a scope, %s is not judged as deployed: %+v", f, plain.Findings)
		}
	}
	// Debian 12's glibc: the program needs GLIBC_2.34, Kylin V10 has 2.28.
	if !hasViolation(plain, KindGlibc, "bin/openssl") || plain.Summary.GlibcMax == "" {
		t.Errorf("without a scope, the openssl CLI's glibc is not judged: %+v", plain.Findings)
	}
	for _, f := range plain.Findings {
		if strings.Contains(f.Path, "libfoo.a(") && f.Kind != KindForeignArch && f.Kind != KindUnrecorded && f.Kind != KindISA {
			t.Errorf("an archive member got a linked image's finding: %+v", f)
		}
	}

	pol, err := kp.WithShips([]string{"thirdparty/installed/lib64/openssl-shared"})
	if err != nil {
		t.Fatal(err)
	}
	r := scan(t, pol, tree)
	for _, f := range r.Findings {
		if f.Violation() && slices.Contains(pol.DeploymentChecks, f.Kind) && !strings.HasSuffix(f.Path, "libshipped.so") {
			t.Errorf("a file that does not ship got a deployment finding: %+v", f)
		}
	}
	if !hasViolation(r, KindOpenSSLStatic, "libshipped.so") || !hasViolation(r, KindPageSize, "libshipped.so") {
		t.Errorf("the shipped library is not judged in full: %+v", r.Findings)
	}
	if !hasViolation(r, KindISA, "bin/protoc") || !hasViolation(r, KindForeignArch, "libfoo.a(x86.o)") {
		t.Errorf("SVE in a build tool or x86-64 code in an archive was let through: %+v", r.Findings)
	}
	scopes := map[string]string{}
	for _, f := range r.Files {
		scopes[strings.TrimPrefix(f.Path, "thirdparty/installed/")] = f.Scope
	}
	want := map[string]string{"bin/openssl": ScopeNotShipped, "bin/protoc": ScopeNotShipped, "lib/libbrpc.so": ScopeNotShipped,
		"lib/libfoo.a(evp.o)": ScopeObject, "lib/libfoo.a(x86.o)": ScopeObject, "lib64/openssl-shared/libshipped.so": ScopeDeployment}
	if !maps.Equal(scopes, want) {
		t.Errorf("scopes %v, want %v", scopes, want)
	}
	if s := r.Summary.Scopes; s[ScopeDeployment] != 1 || s[ScopeNotShipped] != 3 || s[ScopeObject] != 2 {
		t.Errorf("summary scopes %v", s)
	}
	for _, f := range r.Files {
		if f.Path == "thirdparty/installed/bin/openssl" && (f.OpenSSL != "static" || f.PageAlign != 4096 || f.GlibcMax == "") {
			t.Errorf("the openssl CLI's properties are not told: %+v", f)
		}
	}

	var b bytes.Buffer
	Write(&b, r, "table")
	for _, s := range []string{
		"ships thirdparty/installed/lib64/openssl-shared: glibc-version, glibcxx-version, openssl-static, openssl-dynamic, page-size judge these alone",
		"thirdparty/installed/bin/protoc  (not-shipped)\n",
		"ERROR   isa-extension sve in sve_sum:",
		"scope: deployment checks on 1 file(s); ISA and foreign-object checks only on 5 (3 not shipped, 2 relocatable object(s), judged where they are linked)",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
	b.Reset()
	Write(&b, r, "markdown")
	if !strings.Contains(b.String(), "| `thirdparty/installed/bin/openssl` | aarch64 | not-shipped |") || !strings.Contains(b.String(), "scope: deployment checks on 1 file(s)") {
		t.Errorf("markdown:\n%s", b.String())
	}
	b.Reset()
	Write(&b, r, "json")
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || !slices.Equal(back.Policy.Ships, pol.Ships) || back.Summary.Scopes[ScopeNotShipped] != 3 {
		t.Errorf("json: %v %+v", err, back.Policy)
	}
	b.Reset()
	Write(&b, r, "sarif")
	if n := strings.Count(b.String(), `"ruleId": "openssl-static"`); n != 1 {
		t.Errorf("sarif: %d openssl-static results, want 1 (the shipped library)", n)
	}
}

// relObject is a relocatable object with an RCpc load in a function of its
// own behind a branch on a global, and a large .data beside its .text.
const relObject = `long table[8192] = {1};
int use_fast;
__attribute__((noinline)) long load_acq(long *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
long pick(long *p) { if (use_fast) return load_acq(p); return table[*p & 8191]; }
`

// In a .o every section starts at address 0 and branches and loads of
// globals are unresolved: the finding names the function the instruction
// is in (not a section that shares its address), and the code's shape is
// not taken for a CPU check (it was: "guarded (a CPU probe …)").
func TestRelocatableObjectFindings(t *testing.T) {
	obj := compile(t, "rel.c", relObject, "rel.o", "clang-16", "--target=aarch64-linux-gnu", "-O2", "-march=armv8.3-a", "-c")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "rel.o"), string(obj))
	r := scan(t, policy(t, "kunpeng920"), dir)
	isa := findings(r, KindISA)
	if len(isa) != 1 || isa[0].Function != "load_acq" || isa[0].Guarded || isa[0].Severity != SevError || strings.Contains(isa[0].Detail, ".data") {
		t.Errorf("rcpc in a .o: %+v", isa)
	}
	if r.Files[0].Scope != ScopeObject {
		t.Errorf("scope %q", r.Files[0].Scope)
	}
}
