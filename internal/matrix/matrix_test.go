package matrix

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadRepoMatrix(t *testing.T) *Matrix {
	t.Helper()
	m, err := Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		t.Fatalf("repository matrix.yaml does not validate:\n%v", err)
	}
	return m
}

func TestRepositoryMatrixIsValid(t *testing.T) {
	m := loadRepoMatrix(t)
	for _, want := range []string{"generic-armv8", "kunpeng920", "graviton2", "graviton3", "graviton4", "ampere-altra", "x86_64"} {
		if _, ok := m.Targets[want]; !ok {
			t.Errorf("target %s missing", want)
		}
	}
	if got := len(m.Cells()); got != len(m.Doris)*len(m.Targets) {
		t.Errorf("cells = %d, want %d (every series × every target)", got, len(m.Doris)*len(m.Targets))
	}
}

func TestKunpeng920Facts(t *testing.T) {
	m := loadRepoMatrix(t)
	c, err := m.Cell("2.1", "kunpeng920")
	if err != nil {
		t.Fatal(err)
	}
	allowed := Set{}
	for _, x := range c.Allowed {
		allowed[x] = true
	}
	for _, absent := range []string{"sve", "sve2", "rcpc", "bf16", "i8mm"} {
		if allowed[absent] {
			t.Errorf("tsv110 must not allow %s", absent)
		}
	}
	for _, present := range []string{"dotprod", "fp16", "aes", "sha2", "lse", "crc", "fp16fml"} {
		if !allowed[present] {
			t.Errorf("tsv110 must allow %s", present)
		}
	}
	if c.OS.Glibc != "2.28" || c.OS.PageSize != 65536 {
		t.Errorf("kylin v10: glibc %s page %d", c.OS.Glibc, c.OS.PageSize)
	}
	if c.Qemu.Name != "neoverse-n1" {
		t.Errorf("qemu model %s", c.Qemu.Name)
	}
}

func TestParseMarch(t *testing.T) {
	m := loadRepoMatrix(t)
	cases := []struct {
		march string
		has   []string
		not   []string
	}{
		{"armv8-a+crc", []string{"fp", "simd", "crc"}, []string{"lse", "aes"}},
		{"armv8.2-a+crypto+fp16+dotprod", []string{"lse", "rdm", "aes", "sha2", "fp16", "dotprod"}, []string{"sha3", "sm4", "rcpc"}},
		{"armv8.4-a+crypto", []string{"aes", "sha2", "sha3", "sm4", "rcpc", "dotprod"}, []string{"sve"}},
		{"armv9-a+nosve2", []string{"sb", "bti"}, []string{"sve2"}},
		{"armv8.2-a+memtag", []string{"mte"}, nil},
		{"armv8.2-a+sve2-bitperm", []string{"sve", "sve2", "sve2-bitperm", "fp16"}, nil},
	}
	for _, tc := range cases {
		mm, err := m.ParseMarch(tc.march)
		if err != nil {
			t.Errorf("%s: %v", tc.march, err)
			continue
		}
		for _, h := range tc.has {
			if !mm.Extensions[h] {
				t.Errorf("%s: want %s enabled, got %v", tc.march, h, mm.Extensions.Sorted())
			}
		}
		for _, n := range tc.not {
			if mm.Extensions[n] {
				t.Errorf("%s: want %s not enabled", tc.march, n)
			}
		}
	}
	if _, err := m.ParseMarch("armv8.2-a+bogus"); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("unknown token: err = %v", err)
	}
	if _, err := m.ParseMarch("armv7-a"); err == nil {
		t.Error("unknown level accepted")
	}
}

func TestLowerBound(t *testing.T) {
	for c, want := range map[string]string{">= 11.1": "11.1.0", ">= 12, < 13": "12.0.0", "> 12": "12.0.1", "< 13": "", "~> 16.0": "16.0.0"} {
		got := LowerBound(c)
		switch {
		case want == "" && got != nil:
			t.Errorf("%s: got %s want none", c, got)
		case want != "" && (got == nil || got.String() != want):
			t.Errorf("%s: got %v want %s", c, got, want)
		}
	}
}

func TestSeriesFor(t *testing.T) {
	m := loadRepoMatrix(t)
	for v, want := range map[string]string{"2.1.8": "2.1", "3.0.3": "3.0", "4.0.1-rc01": "4.0"} {
		d, err := m.SeriesFor(v)
		if err != nil || d.Series != want {
			t.Errorf("%s: got %v, %v; want %s", v, d, err, want)
		}
	}
	if _, err := m.SeriesFor("1.2.4"); err == nil {
		t.Error("1.2.4 accepted")
	}
}

func TestWarningsNameQemuGaps(t *testing.T) {
	m := loadRepoMatrix(t)
	joined := strings.Join(m.Warnings(), "\n")
	// neoverse-n1 in qemu 7.2 has RCpc, which Kunpeng lacks: only the scanner catches LDAPR.
	if !strings.Contains(joined, "cpu tsv110: qemu model neoverse-n1 also has rcpc") {
		t.Errorf("warnings do not mention the rcpc gap:\n%s", joined)
	}
}

// TestBadMatrices runs the malformed corpus: each file must fail with an error
// naming the file, a line and column, and the text in its "# want:" comment.
func TestBadMatrices(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "bad", "*.yaml"))
	if len(files) < 10 {
		t.Fatalf("bad corpus too small: %d files", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					wants = append(wants, w)
				}
			}
			if len(wants) == 0 {
				t.Fatal("corpus file has no '# want:' line")
			}
			_, err = Parse(f, data)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}
