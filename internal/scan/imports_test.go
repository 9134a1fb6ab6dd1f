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
		dyn := dynsymFromLoader(f, data, ld)
		got := versionedImports(f, data, ld, dyn)
		weak := map[string]bool{}
		for _, s := range dyn.syms {
			if elf.ST_BIND(s.info) == elf.STB_WEAK {
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
		f.Close()
		checked++
	}
	if checked == 0 {
		t.Skip("no aarch64 libraries installed (scripts/install-deps.sh)")
	}
}
