package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/report"
	"github.com/dorisarm/dorisarm/internal/testproc"
)

func reportJSON(t *testing.T, wantCode int, args ...string) *report.Report {
	t.Helper()
	stdout, errOut, code := run(t, append([]string{"report", "--output", "json"}, args...)...)
	if code != wantCode {
		t.Fatalf("report %v: exit %d, want %d\n%s", args, code, wantCode, errOut)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("report %v: %v\n%s", args, err, stdout)
	}
	return &r
}

// TestReportFromBuildsAndRegistry builds two targets with the real cross
// compilers and qemu, publishes them to a real docker-registry, signs them,
// and checks the report against the build records, against the registry,
// and against what the registry alone (signed attestations) says.
func TestReportFromBuildsAndRegistry(t *testing.T) {
	slow(t, "builds and publishes to a real docker-registry")
	needBuildTools(t)
	addr := startRegistry(t)
	dir := t.TempDir()
	out, cache := filepath.Join(dir, "out"), filepath.Join(dir, "cache")
	// graviton2 and ampere-altra share one CPU and every flag: every step and
	// output is the same, but they are two builds with their own images.
	if _, errOut, code := run(t, "build", "--target", "generic-armv8,kunpeng920,graviton2,ampere-altra", "--out", out, "--cache", cache); code != 0 {
		t.Fatalf("build: %s", errOut)
	}

	// From the records alone: every number is the record's.
	summary := filepath.Join(dir, "step-summary.md")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	fromDir := reportJSON(t, 0, "--release", out)
	if len(fromDir.Targets) != 4 || fromDir.Totals.Targets != 4 || fromDir.Totals.Clean != 4 {
		t.Fatalf("targets: %+v", fromDir.Totals)
	}
	hits, steps := 0, 0
	for _, x := range fromDir.Targets {
		rec, err := build.ReadRecord(filepath.Join(out, "2.1.8", x.Target, build.RecordFile))
		if err != nil {
			t.Fatal(err)
		}
		hits += len(rec.Cache.Hits)
		steps += len(rec.Cache.Hits) + len(rec.Cache.Misses)
		if x.CompilerVersion != rec.Compiler.Version || x.Seconds != rec.Seconds || x.Seconds <= 0 || x.CacheHits != len(rec.Cache.Hits) || x.CacheSteps != len(rec.Cache.Hits)+len(rec.Cache.Misses) {
			t.Errorf("%s: %+v vs record compiler %s, %.2f s", x.Target, x, rec.Compiler.Version, rec.Seconds)
		}
		for _, e := range x.Extensions {
			if e.Unguarded+e.Guarded+e.Waived != rec.Scan.Features[e.Name] {
				t.Errorf("%s %s: %d+%d+%d instructions, the scan counted %d", x.Target, e.Name, e.Unguarded, e.Guarded, e.Waived, rec.Scan.Features[e.Name])
			}
			if e.Bad() {
				t.Errorf("%s: a clean build reports %s as used without the CPU having it", x.Target, e.Name)
			}
		}
		if x.Glibc != rec.Scan.GlibcMax || x.GlibcMax != rec.Cell.Glibc {
			t.Errorf("%s glibc: %s / %s", x.Target, x.Glibc, x.GlibcMax)
		}
	}
	if fromDir.Totals.CacheHits != hits || fromDir.Totals.CacheSteps != steps {
		t.Errorf("totals: %+v, records %d/%d", fromDir.Totals, hits, steps)
	}
	kp := findTarget(t, fromDir, "kunpeng920")
	if kp.Tune != "-mtune=tsv110" || !kp.PGO || kp.LTO != "thin" || kp.Compiler != "clang" || len(kp.Patches) != 4 {
		t.Errorf("kunpeng920: %+v", kp)
	}
	// Every object of the sample's kunpeng920 build is at its flags (the
	// bitshuffle neon patch, doris/0002, is what makes it so).
	if l := kp.Landed; l == nil || l.Objects == 0 || l.AtTarget != 1 || !strings.Contains(kp.LandedText(), "100.0%") {
		t.Errorf("kunpeng920 flags landed: %+v", l)
	}
	for _, e := range kp.Extensions {
		if e.Name == "sve" && (e.Allowed || e.Unguarded != 0) {
			t.Errorf("kunpeng920 sve: %+v", e)
		}
	}
	if b, err := os.ReadFile(summary); err != nil || !strings.Contains(string(b), "# Doris 2.1.8 release report") || !strings.Contains(string(b), "| kunpeng920 | tsv110 |") {
		t.Errorf("$GITHUB_STEP_SUMMARY: %v\n%s", err, b)
	}
	os.Remove(summary)

	// Published but not signed: the report says so and exits 1.
	repo := addr + "/doris"
	publish(t, "--build", out, "--repo", repo)
	keys := filepath.Join(dir, "keys")
	t.Setenv("COSIGN_PASSWORD", "report-test")
	stdout, errOut, code := run(t, "keygen", "--out", keys, "-o", "json")
	var kg map[string]string
	if code != 0 || json.Unmarshal([]byte(stdout), &kg) != nil || kg["public_key"] != filepath.Join(keys, "cosign.pub") {
		t.Fatalf("keygen -o json: exit %d %s %s", code, stdout, errOut)
	}
	pub, key := filepath.Join(keys, "cosign.pub"), filepath.Join(keys, "cosign.key")
	unsigned := reportJSON(t, 1, "--release", out, "--images", repo, "--key", pub)
	if unsigned.Totals.Signed != 0 || findTarget(t, unsigned, "kunpeng920").Image.Signature.State != report.Failed {
		t.Errorf("unsigned release: %+v", unsigned.Totals)
	}

	// From the registry alone, unsigned: rows from the annotations, every
	// target a problem, exit 1 (not bad input).
	unsignedReg := reportJSON(t, 1, "--release", repo+"/doris-be:2.1.8", "--key", pub)
	if len(unsignedReg.Targets) != 4 || unsignedReg.Totals.Signed != 0 {
		t.Errorf("unsigned release from the registry: %+v", unsignedReg.Totals)
	}
	for _, x := range unsignedReg.Targets {
		if len(x.Problems) != 1 || !strings.Contains(x.Problems[0], "no verified provenance") || x.CPU == "" || x.Compiler == "" {
			t.Errorf("unsigned %s: %+v", x.Target, x)
		}
	}

	// Signed and attested: every image verified, digests and sizes the registry's.
	var refs []string
	for _, tag := range []string{"doris-be:2.1.8", "doris-fe:2.1.8", "doris-be:2.1.8-generic-armv8", "doris-be:2.1.8-kunpeng920", "doris-be:2.1.8-graviton2", "doris-be:2.1.8-ampere-altra"} {
		refs = append(refs, repo+"/"+tag)
	}
	stdout, errOut, code = run(t, append([]string{"sign", "-o", "json", "--key", key, "--build", out}, refs...)...)
	var signedDigests []struct {
		Digest       string
		Attestations []string
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &signedDigests) != nil {
		t.Fatalf("sign: exit %d %s %s", code, stdout, errOut)
	}
	// The BE index and its one platform (generic-armv8; no x86_64 here), the
	// FE index and its one platform, the other three targets' images: each
	// once, and each with three attestations (the FE's about the tree it
	// holds, scanned for every target).
	attested := 0
	for _, d := range signedDigests {
		if len(d.Attestations) == 3 {
			attested++
		}
	}
	if len(signedDigests) != 7 || attested != 7 {
		t.Errorf("sign -o json: %+v", signedDigests)
	}
	stdout, _, code = run(t, "verify", "-o", "json", "--key", pub, repo+"/doris-be:2.1.8-kunpeng920")
	var ver struct {
		Checks []struct {
			OK      bool
			Formats []string
		}
		Failed int
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &ver) != nil || len(ver.Checks) != 4+2 || ver.Failed != 0 { // signature, 3 attestations, blobs, tag
		t.Errorf("verify -o json: exit %d %s", code, stdout)
	}
	// The signature and the attestations checked in both formats sign wrote.
	for _, c := range ver.Checks[:4] {
		if strings.Join(c.Formats, ",") != "Sigstore bundle,legacy .sig/.att tag" {
			t.Errorf("verify -o json: a check of formats %v, want the bundle and the legacy tag", c.Formats)
		}
	}
	stdout, _, code = run(t, "promote", "-o", "json", "--key", pub, "--yes", repo+"/doris-be:2.1.8-kunpeng920", addr+"/release/doris-be:2.1.8-kunpeng920")
	var prom struct {
		Plans []struct {
			Source, Destination string
			Bytes               int64
		}
		Promoted bool
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &prom) != nil || !prom.Promoted || len(prom.Plans) != 1 || prom.Plans[0].Bytes == 0 ||
		!strings.HasSuffix(prom.Plans[0].Destination, "/release/doris-be:2.1.8-kunpeng920") {
		t.Errorf("promote -o json: exit %d %s", code, stdout)
	}
	html := filepath.Join(dir, "report.html")
	if _, errOut, code := run(t, "report", "--release", out, "--images", repo, "--key", pub, "--html", html, "--markdown", filepath.Join(dir, "report.md")); code != 0 {
		t.Fatalf("report: exit %d %s", code, errOut)
	}
	signed := reportJSON(t, 0, "--release", out, "--images", repo, "--key", pub)
	if signed.Totals.Signed != 4 || signed.Totals.Attested != 4 || len(signed.Shared) != 2 {
		t.Errorf("signed release: %+v, shared %+v", signed.Totals, signed.Shared)
	}
	for _, s := range signed.Shared {
		if !strings.HasSuffix(s.Signature.Detail, "[Sigstore bundle and legacy .sig/.att tag]") {
			t.Errorf("shared %s: signature %q does not say which formats were checked", s.Ref, s.Signature.Detail)
		}
		if s.Signature.State != report.Verified || s.Attestations.State != report.Verified {
			t.Errorf("shared %s: signature %+v, attestations %+v; want both verified", s.Ref, s.Signature, s.Attestations)
		}
	}
	for _, x := range signed.Targets {
		d, err := remote.Head(mustRef(t, repo+"/doris-be:2.1.8-"+x.Target))
		if err != nil {
			t.Fatal(err)
		}
		img, _ := remote.Image(mustRef(t, repo+"/doris-be:2.1.8-"+x.Target))
		m, _ := img.Manifest()
		size := d.Size + m.Config.Size
		for _, l := range m.Layers {
			size += l.Size
		}
		if x.Image == nil || x.Image.Digest != d.Digest.String() || x.Image.Size != size {
			t.Errorf("%s image: %+v, registry %s %d bytes", x.Target, x.Image, d.Digest, size)
		}
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "<!DOCTYPE html>") || strings.Contains(string(b), "<script") || strings.Contains(string(b), "http://") {
		t.Errorf("HTML page: %v (self-contained: no scripts, no fetched resources)", err)
	}

	// The page as Chromium renders it shows the same numbers as the data.
	w := testproc.Chromium(t)
	w.Open("file://" + html)
	for sel, want := range map[string]string{
		"#total-targets":  "4",
		"#total-signed":   "4/4",
		"#total-attested": "4/4",
		"#total-hitrate":  report.Percent(100 * float64(hits) / float64(steps)),
		"#total-bytes":    report.Bytes(signed.Totals.ImageBytes),
	} {
		if got := w.Text(sel); got != want {
			t.Errorf("rendered report: %s shows %q, want %q", sel, got, want)
		}
	}
	for _, x := range signed.Targets {
		row := `tr[data-target="` + x.Target + `"] `
		rec, _ := build.ReadRecord(filepath.Join(out, "2.1.8", x.Target, build.RecordFile))
		want := rec.Compiler.Name + " " + rec.Compiler.Version
		if len(rec.RejectedCompilers) > 0 {
			// A fallback says so, from the record (gcc's C++ runtime needs glibc 2.36).
			var names []string
			for _, r := range rec.RejectedCompilers {
				names = append(names, r.Compiler)
			}
			want += " (" + strings.Join(names, ", ") + " rejected)"
		}
		if got := w.Text(row + "td.compiler"); got != want {
			t.Errorf("%s compiler shows %q, want %q", x.Target, got, want)
		}
		if got := w.Text(row + "td.digest"); !strings.HasPrefix(x.Image.Digest, got) || len(got) < 19 {
			t.Errorf("%s digest shows %q, the registry has %s", x.Target, got, x.Image.Digest)
		}
		if got := w.Text(row + "td.signature"); got != "verified" {
			t.Errorf("%s signature shows %q", x.Target, got)
		}
	}
	if p := os.Getenv("DORISARM_SCREENSHOT"); p != "" {
		os.WriteFile(p, w.Screenshot(), 0o644)
	}

	// The same release as an OCI layout: the same digests (reproducible
	// images), and signatures not checked (a layout holds none).
	layout := filepath.Join(dir, "layout")
	if _, errOut, code := run(t, "image", "build", "--build", out, "--out", "oci:"+layout, "--epoch", "1700000000", "--base", "scratch", "-o", "json"); code != 0 {
		t.Fatalf("image build: %s", errOut)
	}
	if _, errOut, code := run(t, "image", "inspect", "oci:"+layout+":doris-be:2.1.8", "-o", "json"); code != 0 {
		t.Errorf("image inspect: %s", errOut)
	}
	fromLayout := reportJSON(t, 0, "--release", out, "--images", "oci:"+layout)
	for _, a := range signed.Targets {
		b := findTarget(t, fromLayout, a.Target)
		if b.Image == nil || b.Image.Digest != a.Image.Digest || b.Image.Size != a.Image.Size || b.Image.Signature.State != report.NotChecked {
			t.Errorf("%s from the layout: %+v, registry %+v", a.Target, b.Image, a.Image)
		}
	}

	// From the registry alone: the signed attestations tell the same story.
	fromReg := reportJSON(t, 0, "--release", repo+"/doris-be:2.1.8", "--recipe", "recipes/minidoris.yaml", "--key", pub)
	if len(fromReg.Targets) != 4 || len(fromReg.Shared) != 2 {
		t.Fatalf("from the registry: %d targets, %d shared", len(fromReg.Targets), len(fromReg.Shared))
	}
	for _, a := range signed.Targets {
		b := findTarget(t, fromReg, a.Target)
		if a.CPU != b.CPU || a.March != b.March || a.Tune != b.Tune || a.Flags != b.Flags || a.CompilerVersion != b.CompilerVersion ||
			a.PGO != b.PGO || a.LTO != b.LTO || strings.Join(a.Patches, ",") != strings.Join(b.Patches, ",") || a.Glibc != b.Glibc ||
			a.CacheHits != b.CacheHits || a.CacheSteps != b.CacheSteps || a.Image.Digest != b.Image.Digest || a.BuildID != b.BuildID {
			t.Errorf("%s differs:\nrecords  %+v\nregistry %+v", a.Target, a, b)
		}
		if math.Abs(a.Seconds-b.Seconds) > 0.001 {
			t.Errorf("%s build time: %.2f s from the record, %.2f s from the provenance", a.Target, a.Seconds, b.Seconds)
		}
		ea, _ := json.Marshal(a.Extensions)
		eb, _ := json.Marshal(b.Extensions)
		if string(ea) != string(eb) {
			t.Errorf("%s extensions differ:\n%s\n%s", a.Target, ea, eb)
		}
	}

	// The images no longer match the builds: a target rebuilt, not published.
	if _, errOut, code := run(t, "build", "--target", "kunpeng920", "--compiler", "gcc", "--waive-sysroot", "GCC 12's C++ runtime needs glibc 2.36", "--out", out, "--cache", cache); code != 0 {
		t.Fatalf("rebuild: %s", errOut)
	}
	stale := reportJSON(t, 1, "--release", out, "--images", repo, "--key", pub)
	if p := findTarget(t, stale, "kunpeng920").Problems; len(p) != 1 || !strings.Contains(p[0], "not from this build") {
		t.Errorf("stale image: %v", p)
	}

	// Bad input: exit 2 and a message that says what to do.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "--release is required"},
		{[]string{"report", "--release", filepath.Join(dir, "nothing")}, "no such directory"},
		{[]string{"report", "--release", repo + "/doris-be:2.1.8"}, "give --key"},
		{[]string{"report", "--release", out, "--key", pub}, "give --images too"},
		{[]string{"report", "--release", out, "--images", "oci:" + dir}, "not an OCI layout"},
		{[]string{"report", "--release", out, "--output", "yaml"}, "--output/--format \"yaml\""},
	} {
		_, errOut, code := run(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q (want %q)", c.args, code, errOut, c.want)
		}
	}
}

func findTarget(t *testing.T, r *report.Report, name string) report.Target {
	t.Helper()
	for _, x := range r.Targets {
		if x.Target == name {
			return x
		}
	}
	t.Fatalf("no %s in the report", name)
	return report.Target{}
}
