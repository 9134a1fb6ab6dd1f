package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

func names(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, prefix+string(rune('a'+i)))
	}
	return out
}

// kunpengRecord is a Kunpeng 920 build whose scan found 5 unguarded SVE
// instructions (a leaked SVE kernel) and waived its glibc need.
func kunpengRecord() *build.Record {
	return &build.Record{
		Cell: plan.CellInfo{Doris: "2.1.8", Target: "kunpeng920", CPU: "tsv110", OS: "kylin-v10-sp1", ISA: "aarch64", Glibc: "2.28",
			March: "armv8.2-a+crypto+fp16+dotprod+fp16fml", Enabled: []string{"aes", "crc", "dotprod", "fp", "fp16", "simd"},
			Allowed: []string{"aes", "crc", "dotprod", "fp", "fp16", "lse", "simd"}, PGO: true, LTO: "thin", Description: "Huawei Kunpeng 920 on Kylin V10"},
		Compiler: toolchain.Identity{Name: "clang", Version: "16.0.6"},
		Flags: map[string][]string{
			"instrument": {"-march=armv8.2-a+crypto+fp16+dotprod+fp16fml", "-fprofile-generate"},
			"pgo":        {"--target=aarch64-linux-gnu", "-march=armv8.2-a+crypto+fp16+dotprod+fp16fml", "-mtune=tsv110", "-flto=thin"},
			"thirdparty": {"-march=armv8.2-a+crypto+fp16+dotprod+fp16fml"},
		},
		Patches: []plan.PatchRef{{ID: "bitshuffle/0001-scalar-bitshuffle"}, {ID: "doris/0001-dynamic-openssl"}, {ID: "simdprobe/0001-sve-off"}},
		Cache:   build.CacheStats{Hits: names("h", 12), Misses: names("m", 8)},
		Seconds: 83.2,
		Smoke:   []build.SmokeResult{{Model: "neoverse-n1"}, {Model: "neoverse-n1", Exit: 1}},
		Scan: &scan.Summary{
			Features: map[string]int{"aes": 3211, "crc": 0, "sve": 11, "lse": 4}, Guarded: map[string]int{"aes": 3211, "sve": 6},
			GlibcMax: "2.36", AllowedByKind: map[string]int{scan.KindGlibc: 1}, Violations: 1,
			Flags: &scan.FlagSummary{Requested: "armv8.2-a+crypto+fp16+dotprod+fp16fml", Objects: 40, AtTarget: 0.25,
				Verdicts: map[string]int{"target": 10, "lost": 30},
				Landed:   map[string]int{"-march=armv8-a+crc, -mtune=tsv110, atomics outline": 30, "-march=armv8.2-a+crypto+fp16+dotprod+fp16fml, -mtune=tsv110, atomics lse": 10}},
		},
		Finished: time.Unix(1700000000, 0),
	}
}

func gravitonRecord() *build.Record {
	return &build.Record{
		Cell: plan.CellInfo{Doris: "2.1.8", Target: "graviton3", CPU: "neoverse-v1", OS: "amazon-linux-2023", ISA: "aarch64", Glibc: "2.34",
			March: "armv8.4-a+sve", Enabled: []string{"sve"}, Allowed: []string{"sve", "bf16"}, LTO: "auto"},
		Compiler: toolchain.Identity{Name: "gcc", Version: "12.2.0"},
		Flags:    map[string][]string{"release": {"-march=armv8.4-a+sve", "-mcpu=neoverse-v1"}},
		Cache:    build.CacheStats{Hits: names("h", 7)},
		Seconds:  12.5,
		Scan: &scan.Summary{Features: map[string]int{"sve": 40, "sha3": 9}, Waived: map[string]int{"sha3": 9}, GlibcMax: "2.34", Clean: true,
			Flags: &scan.FlagSummary{Requested: "armv8.4-a+sve", Objects: 12, AtTarget: 1, Verdicts: map[string]int{"target": 12},
				Landed: map[string]int{"-march=armv8.4-a+sve, -mtune=neoverse-v1, atomics lse": 12}}},
	}
}

// sampleReport is two targets with images: kunpeng920 signed, graviton3
// with a failed signature.
func sampleReport() *Report {
	k, g := FromRecord(kunpengRecord()), FromRecord(gravitonRecord())
	k.Image = &Image{Ref: "r/doris-be:2.1.8-kunpeng920", Digest: "sha256:" + strings.Repeat("a", 64), Size: 2500000,
		Signature: Status{State: Verified}, Attestations: Status{State: Verified}}
	g.Image = &Image{Ref: "r/doris-be:2.1.8-graviton3", Digest: "sha256:" + strings.Repeat("b", 64), Size: 2000000,
		Signature: Status{State: Failed, Detail: "no signature by this key"}, Attestations: Status{State: Failed}}
	r := &Report{From: "out", Images: "r", Trust: "cosign public key k.pub", Targets: []Target{k, g}}
	r.Sort()
	r.Total()
	return r
}

func TestFromRecord(t *testing.T) {
	k := FromRecord(kunpengRecord())
	if k.Tune != "-mtune=tsv110" || !strings.Contains(k.Flags, "-flto=thin") || k.HitRate() != 60 || k.Seconds != 83.2 || len(k.Patches) != 3 {
		t.Errorf("kunpeng920: %+v", k)
	}
	if k.Smoke != "1 passed, 1 failed under qemu -cpu neoverse-n1" {
		t.Errorf("smoke: %q", k.Smoke)
	}
	// The glibc need is beyond Kylin's 2.28 but waived: not a failure, and said so.
	if k.Glibc != "2.36" || !k.GlibcWaived || !k.GlibcOK() || glibc(k) != "2.36 / 2.28 (waived)" || k.GlibcState() != "waived" {
		t.Errorf("glibc: %+v", k)
	}
	ext := map[string]Extension{}
	var order []string
	for _, e := range k.Extensions {
		ext[e.Name] = e
		order = append(order, e.Name)
	}
	// Every allowed extension is listed, used or not; then the others.
	if got := strings.Join(order, " "); got != "aes crc dotprod fp fp16 lse simd sve" {
		t.Errorf("order: %s", got)
	}
	if e := ext["sve"]; e.Unguarded != 5 || e.Guarded != 6 || e.Allowed || !e.Bad() {
		t.Errorf("sve: %+v", e)
	}
	if e := ext["aes"]; e.Unguarded != 0 || e.Guarded != 3211 || !e.Allowed || !e.Enabled || e.Bad() {
		t.Errorf("aes: %+v", e)
	}
	if e := ext["lse"]; e.Unguarded != 4 || e.Enabled || e.Bad() {
		t.Errorf("lse: %+v", e)
	}
	g := FromRecord(gravitonRecord())
	if g.Tune != "-mcpu=neoverse-v1" || g.HitRate() != 100 || !g.Clean || g.Smoke != "" {
		t.Errorf("graviton3: %+v", g)
	}
	for _, e := range g.Extensions {
		if e.Name == "sha3" && (e.Waived != 9 || e.Unguarded != 0 || e.Bad()) {
			t.Errorf("waived sha3: %+v", e)
		}
	}
	// Without a scan there are no counts and no glibc need.
	rec := gravitonRecord()
	rec.Scan = nil
	if n := FromRecord(rec); n.Scanned || n.Glibc != "" || !n.GlibcOK() || scanState(n) != "not scanned" {
		t.Errorf("unscanned: %+v", n)
	}
	// A glibc need beyond the OS, not waived, fails.
	rec = kunpengRecord()
	rec.Scan.AllowedByKind = nil
	if n := FromRecord(rec); n.GlibcOK() || n.GlibcState() != "bad" {
		t.Error("glibc 2.36 on a 2.28 OS passes")
	}
}

func TestTotalsAndMarkdown(t *testing.T) {
	r := sampleReport()
	want := Totals{Targets: 2, Clean: 1, Signed: 1, Attested: 1, CacheHits: 19, CacheSteps: 27, Seconds: 95.7, ImageBytes: 4500000}
	if got := r.Totals; got.Targets != want.Targets || got.Clean != want.Clean || got.Signed != want.Signed || got.Attested != want.Attested ||
		got.CacheHits != want.CacheHits || got.CacheSteps != want.CacheSteps || got.Seconds-want.Seconds > 1e-9 || got.ImageBytes != want.ImageBytes {
		t.Errorf("totals %+v, want %+v", got, want)
	}
	if r.Targets[0].Target != "graviton3" || len(r.Doris) != 1 || r.Doris[0] != "2.1.8" {
		t.Errorf("order %s, doris %v", r.Targets[0].Target, r.Doris)
	}
	var b bytes.Buffer
	if err := r.Markdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, s := range []string{
		"# Doris 2.1.8 release report",
		"**2 targets · 1/2 scans clean · 1/2 signed · 1/2 attested · images 4.5 MB · cache 19/27 steps (70.4%) · build 95.7 s**",
		"| kunpeng920 | tsv110 | kylin-v10-sp1 | `armv8.2-a+crypto+fp16+dotprod+fp16fml` | 25.0% of 40 objects at target; 30: -march=armv8-a+crc, -mtune=tsv110, atomics outline | `-mtune=tsv110` | clang 16.0.6 | PGO + LTO thin | 3 | 2.36 / 2.28 (waived) | 1 violation(s) | 60.0% | 83.2 s |",
		"| `r/doris-be:2.1.8-graviton3` | `sha256:bbbbbbbbbbbb` | 2.0 MB | failed | failed |",
		"| sve ✗ | no | no | 5 | 6 | 0 |",
		"| sha3 | no | no | 0 | 0 | 9 |",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	b.Reset()
	if err := r.HTML(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`<tr data-ext="sve" class="badext">`, `id="total-hitrate">70.4%<`, `<td class="signature bad" title="no signature by this key">failed</td>`} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("html lacks %q", s)
		}
	}
	// A target with no extension counts (x86_64) says so instead of an empty table.
	x86 := FromRecord(&build.Record{Cell: plan.CellInfo{Doris: "2.1.8", Target: "x86_64", ISA: "x86_64", Glibc: "2.17"}, Scan: &scan.Summary{Clean: true}})
	one := &Report{From: "out", Targets: []Target{x86}}
	one.Total()
	b.Reset()
	one.Markdown(&b)
	if !strings.Contains(b.String(), "No ISA extension counts") || strings.Contains(b.String(), "| extension |") {
		t.Errorf("x86_64 markdown:\n%s", b.String())
	}
	b.Reset()
	one.HTML(&b)
	if !strings.Contains(b.String(), "No ISA extension counts") || strings.Contains(b.String(), `class="extensions"`) {
		t.Error("x86_64 html has an empty extension table")
	}

	// Text from the data is escaped, never markup.
	r.Targets[0].Description = `<img src=x onerror=alert(1)>`
	b.Reset()
	r.HTML(&b)
	if strings.Contains(b.String(), "<img src=x") {
		t.Error("the HTML does not escape the data")
	}
}

func TestVersionOrderAndFormats(t *testing.T) {
	for _, c := range []struct {
		a, b string
		le   bool
	}{{"2.28", "2.36", true}, {"2.36", "2.28", false}, {"2.3", "2.28", true}, {"2.28", "2.28", true}, {"2.28.1", "2.28", false}} {
		if le := scan.CompareVersions(c.a, c.b) <= 0; le != c.le {
			t.Errorf("%s <= %s: want %v", c.a, c.b, c.le)
		}
	}
	if barWidth(0, 10) != 0 || barWidth(10, 10) != 100 || barWidth(3, 3000) <= 10 {
		t.Errorf("bar widths: %v %v %v", barWidth(0, 10), barWidth(10, 10), barWidth(3, 3000))
	}
	if Bytes(12684254) != "12.7 MB" || Bytes(999) != "999 B" || Bytes(2_500_000_000) != "2.50 GB" {
		t.Error("Bytes")
	}
}

func TestOpenStore(t *testing.T) {
	for loc, ok := range map[string]bool{
		"127.0.0.1:5000":                   true, // a registry's root
		"127.0.0.1:5000/release":           true,
		"ghcr.io/org/doris":                true,
		"127.0.0.1:5000/release/doris:2.1": false, // a tag, not a prefix
		"ghcr.io/org/doris@sha256:abc":     false,
		"oci:" + t.TempDir():               false, // no layout there
		"Not A Registry/UPPER":             false,
	} {
		_, err := OpenStore(loc, registry.Options{})
		if (err == nil) != ok {
			t.Errorf("OpenStore(%q): %v, want ok=%v", loc, err, ok)
		}
	}
}

// The most common flags that landed instead of the target's are named, and
// a -march that only starts like the requested one is not taken for it.
func TestLandedTextNamesTheOther(t *testing.T) {
	x := Target{Landed: &scan.FlagSummary{Requested: "armv8-a", Objects: 4, AtTarget: 0.25,
		Landed: map[string]int{"-march=armv8-a, atomics outline": 1, "-march=armv8-a+crc, atomics outline": 3}}}
	if got := x.LandedText(); !strings.Contains(got, "3: -march=armv8-a+crc") || x.LandedOK() {
		t.Errorf("LandedText: %q", got)
	}
	if got := (Target{}).LandedText(); got != "not read back" {
		t.Errorf("no read-back: %q", got)
	}
}

// TestPGONoneSaidPlainly: a target that uses PGO, built without a profile,
// reads "PGO: none (no profile)" in the report, not a bare dash.
func TestPGONoneSaidPlainly(t *testing.T) {
	for _, c := range []struct {
		t    Target
		want string
	}{
		{Target{PGO: true, LTO: "thin"}, "PGO + LTO thin"},
		{Target{PGONone: "no profile", LTO: "thin"}, "PGO: none (no profile) + LTO thin"},
		{Target{}, "—"},
	} {
		if got := pgoLTO(c.t); got != c.want {
			t.Errorf("pgoLTO(%+v) = %q, want %q", c.t, got, c.want)
		}
	}
}

// TestStamp: a report names the dorisarm that made it, the date and the
// matrix digests of its builds, in Markdown, HTML and JSON.
func TestStamp(t *testing.T) {
	r := &Report{From: "out", Targets: []Target{{Target: "kunpeng920", Matrix: "sha256:bbbb"}, {Target: "graviton3", Matrix: "sha256:aaaa"}, {Target: "x86_64", Matrix: "sha256:bbbb"}}}
	r.Stamp("v1.2.3", time.Unix(1700000000, 0))
	if r.Made == nil || r.Made.Dorisarm != "v1.2.3" || r.Made.Date != "2023-11-14 22:13 UTC" || strings.Join(r.Made.Matrix, ",") != "sha256:aaaa,sha256:bbbb" {
		t.Fatalf("Made = %+v", r.Made)
	}
	var md, html strings.Builder
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "Made by dorisarm v1.2.3 on 2023-11-14 22:13 UTC; matrix sha256:aaaa, sha256:bbbb.") {
		t.Errorf("Markdown:\n%s", md.String())
	}
	if err := r.HTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "Made by dorisarm v1.2.3 on 2023-11-14 22:13 UTC") {
		t.Error("the HTML page does not say who made it")
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"made":{"dorisarm":"v1.2.3","date":"2023-11-14 22:13 UTC","matrix_digests":["sha256:aaaa","sha256:bbbb"]}`) {
		t.Errorf("JSON: %s", b)
	}
	// Unstamped (a library caller), nothing is said.
	r.Made = nil
	md.Reset()
	r.Markdown(&md)
	if strings.Contains(md.String(), "Made by") {
		t.Error("an unstamped report says who made it")
	}
}

// TestFallbackShown: a target whose build fell back from a rejected
// compiler says so beside the compiler it used.
func TestFallbackShown(t *testing.T) {
	rec := &build.Record{Compiler: toolchain.Identity{Name: "clang", Version: "16.0.6"}, RejectedCompilers: []build.Rejection{{Compiler: "gcc", Why: "needs glibc 2.36"}}}
	r := &Report{From: "out", Targets: []Target{FromRecord(rec)}}
	var md, html strings.Builder
	r.Markdown(&md)
	if !strings.Contains(md.String(), "clang 16.0.6 (gcc rejected)") {
		t.Errorf("Markdown:\n%s", md.String())
	}
	r.HTML(&html)
	if !strings.Contains(html.String(), "(gcc rejected)") {
		t.Error("HTML does not say gcc was rejected")
	}
}
