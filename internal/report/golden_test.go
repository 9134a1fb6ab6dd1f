package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/golden"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// goldenReport is a release that shows every part of the page: two
// AArch64 targets with images (one signed, one whose signature failed), an
// x86_64 target built without a sysroot (waived) and without an image, a
// shared multi-arch index, and a report-level problem. Everything in it is
// fixed: digests, sizes, times.
func goldenReport() *Report {
	k, g := FromRecord(kunpengRecord()), FromRecord(gravitonRecord())
	x := FromRecord(&build.Record{
		Cell: plan.CellInfo{Doris: "2.1.8", Target: "x86_64", CPU: "x86-64-v2", OS: "centos-7", ISA: "x86_64", Glibc: "2.17",
			March: "x86-64-v2", SysrootWaiver: "no CentOS 7 sysroot on the build host"},
		Compiler: toolchain.Identity{Name: "gcc", Version: "12.2.0"},
		Flags:    map[string][]string{"release": {"-march=x86-64-v2"}},
		Cache:    build.CacheStats{Misses: names("m", 4)},
		Seconds:  40,
		Scan:     &scan.Summary{Clean: true, GlibcMax: "2.17"},
	})
	k.Sysroot = sysrootText("kylin-v10-sp1", "2.28", "sha256:"+strings.Repeat("c", 64))
	k.Image = &Image{Ref: "r/doris-be:2.1.8-kunpeng920", Digest: "sha256:" + strings.Repeat("a", 64), Size: 2500000,
		Signature: Status{State: Verified, Detail: "1 signature(s)"}, Attestations: Status{State: Verified, Detail: "3 attestation(s)"}}
	g.Image = &Image{Ref: "r/doris-be:2.1.8-graviton3", Digest: "sha256:" + strings.Repeat("b", 64), Size: 2000000,
		Signature: Status{State: Failed, Detail: "no signature by this key"}, Attestations: Status{State: Failed}}
	x.Problems = append(x.Problems, "no image of 2.1.8 for x86_64 in r")
	r := &Report{From: "out", Images: "r", Trust: "cosign public key k.pub", Targets: []Target{x, k, g},
		Shared: []Image{
			{Ref: "r/doris-be:2.1.8", Digest: "sha256:" + strings.Repeat("d", 64), Size: 4600000, Platforms: 2,
				Signature: Status{State: Verified}, Attestations: Status{State: None, Detail: "not made from one build"}},
			{Ref: "r/doris-fe:2.1.8", Digest: "sha256:" + strings.Repeat("e", 64), Size: 90000000,
				Signature: Status{State: NotChecked}, Attestations: Status{State: None}},
		},
		Problems: []string{"r/doris-be:2.1.8-ampere-altra is an image for ampere-altra, which has no build here"},
	}
	r.Sort()
	r.Total()
	return r
}

func render(t *testing.T, r *Report, html bool) []byte {
	t.Helper()
	var b bytes.Buffer
	var err error
	if html {
		err = r.HTML(&b)
	} else {
		err = r.Markdown(&b)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGoldenReports: the Markdown and HTML pages of a fixed release are
// byte for byte the ones under testdata/ (go test -update rewrites them),
// and rendering the same release again, from records built afresh, gives
// the same bytes.
func TestGoldenReports(t *testing.T) {
	for _, c := range []struct {
		file string
		html bool
		has  []string // what makes it the report, not an error page
	}{
		{"report.golden.md", false, []string{"# Doris 2.1.8 release report", "| x86_64 |", "## Images", "## Waivers", "## Problems"}},
		{"report.golden.html", true, []string{"<title>Doris 2.1.8 release report</title>", `data-target="kunpeng920"`, "<h2>Shared images</h2>", "<h2>Waivers</h2>", "</html>"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			got := render(t, goldenReport(), c.html)
			for _, s := range c.has {
				if !bytes.Contains(got, []byte(s)) {
					t.Errorf("%s lacks %q", c.file, s)
				}
			}
			for i := range 20 {
				if again := render(t, goldenReport(), c.html); !bytes.Equal(again, got) {
					t.Fatalf("render %d differs from the first:\n%s", i+2, golden.Diff(got, again))
				}
			}
			golden.Check(t, filepath.Join("testdata", c.file), got)
		})
	}
}
