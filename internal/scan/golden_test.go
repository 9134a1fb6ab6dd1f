package scan

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/dorisarm/dorisarm/internal/golden"
)

// goldenScan is a fixed scan of a Kunpeng 920 build that found one of each
// common thing: a foreign object inside an archive, unguarded SVE in a
// function, guarded SVE (info), a glibc need the allow file waived, and a
// jar without an aarch64 native library, and ELF headers that disagree; a
// build tool that does not ship (judged for foreign code and instructions
// alone).
func goldenScan() *Report {
	return &Report{
		Target: "kunpeng920",
		Policy: &Policy{Target: "kunpeng920", ISA: "aarch64", Machine: 183, CPU: "tsv110", Allowed: []string{"aes", "crc", "fp", "simd"},
			OS: "kylin-v10-sp1", GlibcMax: "2.28", PageSize: 65536, OpenSSL: "dynamic",
			DeploymentChecks: []string{KindGlibc, KindGlibcxx, KindOpenSSLStatic, KindOpenSSLShared, KindPageSize}, Ships: []string{"be", "fe"}},
		Inputs: []string{"out/2.1.8/kunpeng920"},
		Files: []File{
			{Path: "be/lib/doris_be", Format: "elf", Machine: "aarch64", Type: "dyn", Scope: ScopeDeployment, Size: 9000000, TextBytes: 4000000,
				Features: map[string]int{"sve": 11, "aes": 3211, "crc": 7}, Guarded: map[string]int{"sve": 6, "aes": 3211},
				GlibcMax: "2.34", Needed: []string{"libc.so.6", "libssl.so.3"}, PageAlign: 65536, OpenSSL: "dynamic"},
			{Path: "lib/libmix.a(x86.o)", Format: "elf", Machine: "x86_64", Type: "rel", Scope: ScopeObject, Size: 1200},
			{Path: "tools/protoc", Format: "elf", Machine: "aarch64", Type: "exec", Scope: ScopeNotShipped, Size: 5000,
				GlibcMax: "2.34", PageAlign: 4096, Features: map[string]int{"sve": 2}},
		},
		Findings: []Finding{
			{Kind: KindForeignArch, Severity: SevError, Path: "lib/libmix.a(x86.o)", Detail: "x86_64 object in an aarch64 build"},
			{Kind: KindISA, Severity: SevError, Path: "be/lib/doris_be", Feature: "sve", Function: "bitshuffle_kernel", Address: "0x4010", Count: 5,
				Detail: "5 sve instruction(s) | not on tsv110"},
			{Kind: KindISA, Severity: SevInfo, Path: "be/lib/doris_be", Feature: "sve", Function: "simd_probe", Count: 6, Guarded: true,
				Detail: "6 sve instruction(s) behind a run-time check"},
			{Kind: KindGlibc, Severity: SevError, Path: "be/lib/doris_be", Detail: "needs GLIBC_2.34, kylin-v10-sp1 has 2.28",
				Allowed: "scan-allow.yaml:3 (runs in a container with its own glibc)"},
			{Kind: KindJNIMissing, Severity: SevError, Path: "fe/lib/snappy-java.jar", Detail: "native libraries for linux-x86_64, none for linux-aarch64"},
			{Kind: KindHeaders, Severity: SevInfo, Path: "be/lib/libstripped.so", Detail: "no section headers: code found from the program headers"},
			{Kind: KindISA, Severity: SevError, Path: "tools/protoc", Feature: "sve", Function: "main", Address: "0x400", Count: 2,
				Detail: "2 sve instruction(s) | not on tsv110"},
		},
		Allowed:  []AllowUse{{Exception: "scan-allow.yaml:3", Kind: KindGlibc, Path: "be/lib/*", Reason: "runs in a container with its own glibc", Matched: 1}},
		Warnings: []string{"scan-allow.yaml:5:5: exception matched nothing"},
		Summary: Summary{Files: 4, ELF: 3, Bytes: 9006200, TextBytes: 4000000, Violations: 4, Allowed: 1,
			AllowedByKind: map[string]int{KindGlibc: 1}, ByKind: map[string]int{KindISA: 2, KindForeignArch: 1, KindJNIMissing: 1},
			Machines: map[string]int{"x86_64": 1, "aarch64": 2}, Features: map[string]int{"sve": 13, "crc": 7, "aes": 3211},
			Guarded: map[string]int{"sve": 6, "aes": 3211}, GlibcMax: "2.34",
			Scopes: map[string]int{ScopeDeployment: 1, ScopeNotShipped: 1, ScopeObject: 1}},
	}
}

// TestGoldenScanReports: the SARIF, Markdown and table renderings of a
// fixed scan are byte for byte the files under testdata/ (go test -update
// rewrites them), the same on every run.
func TestGoldenScanReports(t *testing.T) {
	for _, c := range []struct{ format, file string }{
		{"sarif", "scan.sarif.golden"},
		{"markdown", "scan.md.golden"},
		{"table", "scan.txt.golden"},
	} {
		t.Run(c.format, func(t *testing.T) {
			var first []byte
			for i := range 20 {
				var b bytes.Buffer
				if err := Write(&b, goldenScan(), c.format); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = b.Bytes()
				} else if !bytes.Equal(b.Bytes(), first) {
					t.Fatalf("render %d differs from the first:\n%s", i+1, golden.Diff(first, b.Bytes()))
				}
			}
			golden.Check(t, filepath.Join("testdata", c.file), first)
		})
	}
	// The golden SARIF is SARIF 2.1.0 with a rule for every finding and the
	// waived glibc finding suppressed, not dropped.
	var b bytes.Buffer
	Write(&b, goldenScan(), "sarif")
	var s struct {
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Rules []struct{ ID string } `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID       string           `json:"ruleId"`
				Level        string           `json:"level"`
				Suppressions []map[string]any `json:"suppressions"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b.Bytes(), &s); err != nil || s.Version != "2.1.0" || len(s.Runs) != 1 {
		t.Fatalf("sarif: %v\n%s", err, b.String())
	}
	rules := map[string]bool{}
	for _, r := range s.Runs[0].Tool.Driver.Rules {
		rules[r.ID] = true
	}
	levels := ""
	for _, r := range s.Runs[0].Results {
		if !rules[r.RuleID] {
			t.Errorf("result %s has no rule", r.RuleID)
		}
		levels += r.Level[:1]
		if (r.RuleID == KindGlibc) != (len(r.Suppressions) == 1) {
			t.Errorf("%s: suppressions %v", r.RuleID, r.Suppressions)
		}
	}
	// The waived glibc finding is a note (it does not fail the scan), with
	// its suppression; guarded SVE and the header mismatch are notes.
	if want := "eennene"; levels != want {
		t.Errorf("levels %s, want %s", levels, want)
	}
	// Every kind a finding can have (and an allow file can name) has a rule.
	for k := range knownKinds {
		if !rules[k] {
			t.Errorf("SARIF has no rule for %s", k)
		}
	}
}
