package build

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/scan"
)

// shipScopeFiles compiles, for aarch64, what a third-party install holds
// that Doris never ships: an openssl CLI with OpenSSL linked in statically
// and 4 KiB pages (Kylin runs 64 KiB), and an archive of OpenSSL-like
// objects; and a stand-in for the shared libssl the BE ships.
func shipScopeFiles(t *testing.T) (cli, archive, libssl string) {
	t.Helper()
	for _, tool := range []string{"aarch64-linux-gnu-gcc", "ar", "bash", "sh", "tar", "md5sum", "patch"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-deps.sh)", tool)
		}
	}
	dir := t.TempDir()
	src := "int EVP_DigestInit_ex(void) { return 1; }\nint SSL_CTX_new(void) { return 2; }\n"
	os.WriteFile(filepath.Join(dir, "evp.c"), []byte(src), 0o644)
	os.WriteFile(filepath.Join(dir, "cli.c"), []byte(src+"int main(void) { return EVP_DigestInit_ex() + SSL_CTX_new(); }\n"), 0o644)
	for _, args := range [][]string{
		{"aarch64-linux-gnu-gcc", "-O2", "-Wl,-z,max-page-size=4096", "cli.c", "-o", "openssl"},
		{"aarch64-linux-gnu-gcc", "-O2", "-c", "evp.c", "-o", "evp.o"},
		{"ar", "rcs", "libcrypto.a", "evp.o"},
		{"aarch64-linux-gnu-gcc", "-O2", "-shared", "-fPIC", "-Wl,-soname,libssl.so.3", "evp.c", "-o", "libssl.so.3"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	return filepath.Join(dir, "openssl"), filepath.Join(dir, "libcrypto.a"), filepath.Join(dir, "libssl.so.3")
}

// place copies from to to, making its directory.
func place(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// TestThirdpartyBuildShipsScope: a third-party-only build (--packages
// openssl) of the sample for kunpeng920, whose policy is dynamic OpenSSL
// on 64 KiB pages, publishes an install holding a statically linked
// openssl CLI and an archive: the gate judges only what the recipe ships
// (the shared libssl) as deployed, and the record counts the scopes. The
// same CLI collected as a BE's doris_be fails the gate with
// openssl-static, and so does a plain scan of the published install.
func TestThirdpartyBuildShipsScope(t *testing.T) {
	t.Parallel()
	cli, archive, libssl := shipScopeFiles(t)
	const target = "kunpeng920"
	mk := func(packages []string) Input { return packagesInput(t, target, packages...) }
	fx := &fakeExec{}
	run := func(c Command) error {
		switch c.Step {
		case "thirdparty:OPENSSL":
			inst := filepath.Join(c.Outside(c.Dir), "thirdparty", "installed")
			return errors.Join(place(cli, filepath.Join(inst, "bin", "openssl")),
				place(archive, filepath.Join(inst, "lib", "libcrypto.a")),
				place(libssl, filepath.Join(inst, "lib", "libssl.so.3")))
		case "build:be":
			return place(cli, filepath.Join(c.Outside(c.Dir), "output", "be", "lib", "doris_be"))
		}
		return fx.exec(context.Background(), c)
	}
	exec := func(ctx context.Context, c Command) error { return run(c) }

	out := t.TempDir()
	pkgs := mk([]string{"openssl"})
	rec, err := Run(context.Background(), pkgs, Options{Out: out, Cache: t.TempDir(), Exec: exec})
	if err != nil {
		t.Fatalf("the third-party build was refused: %v", err)
	}
	if s := rec.Scan; s == nil || !s.Clean || s.Scopes[scan.ScopeNotShipped] != 1 || s.Scopes[scan.ScopeObject] != 1 || s.Scopes[scan.ScopeDeployment] != 1 {
		t.Errorf("the record's scan: %+v", rec.Scan)
	}
	// The package's own scan, in the work tree, judges with the same scope.
	if ps := rec.PackageScans["OPENSSL"]; ps == nil || ps.Files != 3 || ps.Violations != 0 {
		t.Errorf("the record's scan of openssl's install: %+v (want 3 files, none a violation, as the gate judged them)", ps)
	}
	pub := Dir(out, rec.Cell.Doris, target)
	plain, err := scan.Scan(context.Background(), []string{pub}, pkgs.Policy, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasFinding(plain, scan.KindOpenSSLStatic, "thirdparty/installed/bin/openssl") || !hasFinding(plain, scan.KindPageSize, "thirdparty/installed/bin/openssl") {
		t.Errorf("a plain scan of the published install lets the openssl CLI through: %+v", plain.Findings)
	}

	_, err = Run(context.Background(), mk(nil), Options{Out: t.TempDir(), Cache: t.TempDir(), Exec: exec})
	if !errors.Is(err, ErrGate) || !strings.Contains(err.Error(), "be/lib/doris_be") || !strings.Contains(err.Error(), scan.KindOpenSSLStatic) {
		t.Errorf("a BE that carries its own OpenSSL passed the gate: %v", err)
	}
}

func hasFinding(r *scan.Report, kind, path string) bool {
	for _, f := range r.Findings {
		if f.Kind == kind && f.Path == path && f.Violation() {
			return true
		}
	}
	return false
}
