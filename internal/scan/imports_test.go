package scan

import (
	"debug/elf"
	"os"
	"testing"
)

// TestVersionedImports: the scanner's own reading of the version tables
// names what debug/elf's ImportedSymbols names (its global undefined
// symbols with a version), plus the weak ones, which need their version
// from the library just the same.
func TestVersionedImports(t *testing.T) {
	checked := 0
	for _, lib := range []string{"/usr/aarch64-linux-gnu/lib/libgcc_s.so.1", "/usr/aarch64-linux-gnu/lib/libstdc++.so.6", "/usr/lib/aarch64-linux-gnu/libcrypto.so.3"} {
		data, err := os.ReadFile(lib)
		if err != nil {
			t.Logf("%s: %v (not checked)", lib, err)
			continue
		}
		f, err := elf.Open(lib)
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.ImportedSymbols()
		if err != nil {
			t.Fatal(err)
		}
		ld := readLoaderDyn(f, data)
		ent, str := loaderDynsym(f, data, ld)
		dyn := decodeSyms(f, ent, str)
		got := versionedImports(f, data, ld, dyn, nil)
		weak := map[string]bool{}
		for _, s := range dyn.all() {
			if elf.ST_BIND(s.info()) == elf.STB_WEAK {
				weak[dyn.name(s)] = true
			}
		}
		have := map[elf.ImportedSymbol]bool{}
		for _, s := range got {
			have[s] = true
		}
		n := 0
		for _, s := range want {
			if s.Version == "" {
				continue
			}
			n++
			if !have[elf.ImportedSymbol{Name: s.Name, Version: s.Version}] {
				t.Errorf("%s: %s@%s missing", lib, s.Name, s.Version)
			}
			delete(have, elf.ImportedSymbol{Name: s.Name, Version: s.Version})
		}
		for s := range have {
			if !weak[s.Name] {
				t.Errorf("%s: %s@%s is neither imported by debug/elf nor weak", lib, s.Name, s.Version)
			}
		}
		if n == 0 {
			t.Errorf("%s: no versioned imports; the comparison proves nothing", lib)
		}
		// With a filter: exactly the symbols of the accepted versions.
		want28 := newer("GLIBC_", "2.28")
		filtered := versionedImports(f, data, ld, dyn, want28)
		keep := 0
		for _, s := range got {
			if want28(s.Version) {
				keep++
			}
		}
		for _, s := range filtered {
			if !want28(s.Version) {
				t.Errorf("%s: filtered imports hold %s@%s", lib, s.Name, s.Version)
			}
		}
		if len(filtered) != keep || keep == 0 {
			t.Errorf("%s: %d imports newer than GLIBC_2.28 with the filter, %d without", lib, len(filtered), keep)
		}
		f.Close()
		checked++
	}
	if checked == 0 {
		t.Skip("no aarch64 libraries installed (scripts/install-deps.sh)")
	}
}

func TestContainsAt(t *testing.T) {
	for _, c := range []struct {
		b, pat string
		k      int
		want   bool
	}{
		{"xxEVP_foo", "EVP_", 1, true},
		{"EVP_", "EVP_", 1, true},
		{"EVP", "EVP_", 1, false},
		{"VP_EV_EVP", "EVP_", 1, false},
		{"\x00SSL_CTX_new\x00", "SSL_CTX_", 6, true},
		{"SSL_CTXX_", "SSL_CTX_", 6, false},
		{"OpenSSL 3.0.11", "OpenSSL ", 0, true},
		{"", "EVP_", 1, false},
		{"V", "EVP_", 1, false},
	} {
		if got := containsAt([]byte(c.b), c.pat, c.k); got != c.want {
			t.Errorf("containsAt(%q, %q, %d) = %v", c.b, c.pat, c.k, got)
		}
	}
}
