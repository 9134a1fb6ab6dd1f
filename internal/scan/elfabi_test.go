package scan

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestForeignABI: an EM_AARCH64 object the target's loader rejects —
// big-endian, ILP32 (ELFCLASS32) or for another OS — is foreign for a
// 64-bit little-endian Linux target, alone or as a jar's only aarch64
// library; the LP64 little-endian Linux one (OS ABI NONE or GNU) is not.
func TestForeignABI(t *testing.T) {
	need(t, "aarch64-linux-gnu-gcc")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "g.c"), "int g(void){return 1;}\n")
	build := func(name string, flags ...string) []byte {
		args := append([]string{"-shared", "-nostdlib", "-fPIC", "g.c", "-o", name}, flags...)
		cmd := exec.Command("aarch64-linux-gnu-gcc", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("aarch64-linux-gnu-gcc %v: %v\n%s", flags, err, out)
			return nil // this toolchain lacks the ABI
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	lp64 := build("lp64.so")
	if lp64 == nil {
		t.Fatal("aarch64-linux-gnu-gcc builds no shared library")
	}
	withOSABI := func(abi byte) []byte {
		b := append([]byte{}, lp64...)
		b[7] = abi // EI_OSABI
		return b
	}
	pol := policy(t, "kunpeng920")
	for _, c := range []struct {
		name    string
		b       []byte
		foreign string // what the finding says; "" for native
	}{
		{"lp64.so", lp64, ""},
		{"gnu.so", withOSABI(3), ""}, // ELFOSABI_GNU: GNU extensions (ifuncs)
		{"be.so", build("be.so", "-mbig-endian"), "big-endian"},
		{"ilp32.so", build("ilp32.so", "-mabi=ilp32"), "32-bit"},
		{"fbsd.so", withOSABI(9), "OS ABI FREEBSD"},
	} {
		if c.b == nil {
			t.Logf("%s: not built; skipped", c.name)
			continue
		}
		p := filepath.Join(dir, "lib", c.name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, c.b, 0o755); err != nil {
			t.Fatal(err)
		}
		// Without a target it is looked at: its tables are read in its class.
		if r := scan(t, nil, p); len(findings(r, KindHeaders)) != 0 {
			t.Errorf("%s: %+v", c.name, r.Findings)
		}
		r := scan(t, pol, p)
		got := findings(r, KindForeignArch)
		if c.foreign == "" {
			if len(got) != 0 || !r.Summary.Clean {
				t.Errorf("%s: native library reported: %+v", c.name, r.Findings)
			}
			continue
		}
		if len(got) != 1 || !got[0].Violation() || !strings.Contains(got[0].Detail, c.foreign) {
			t.Errorf("%s: want one foreign-arch violation naming %q: %+v", c.name, c.foreign, r.Findings)
		}
		// A jar whose only aarch64 library is this one does not cover linux-aarch64.
		jar := filepath.Join(dir, "jars", c.name+".jar")
		makeJar(t, jar, map[string][]byte{"META-INF/MANIFEST.MF": []byte("Manifest-Version: 1.0\n"), "native/linux-aarch64/libg.so": c.b})
		if r := scan(t, pol, jar); !hasViolation(r, KindJNIMissing, jar) {
			t.Errorf("%s: a jar holding only it passes: %+v", c.name, r.Findings)
		}
	}
}
