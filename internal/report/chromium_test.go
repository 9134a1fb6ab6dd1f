package report

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/testproc"
)

// writePage writes r's HTML report to a file of its own.
func writePage(t *testing.T, r *Report) string {
	t.Helper()
	page := filepath.Join(t.TempDir(), "report.html")
	var b bytes.Buffer
	if err := r.HTML(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return page
}

// TestHTMLRendersInChromium opens the HTML report in headless Chromium and
// reads back what it renders: the totals, a target's row, the red row of
// an extension the CPU lacks, and the bars.
func TestHTMLRendersInChromium(t *testing.T) {
	r := sampleReport()
	page := writePage(t, r)
	w := testproc.Chromium(t)
	w.Open("file://" + page)

	if title := w.Title(); title != "Doris 2.1.8 release report" {
		t.Errorf("title %q", title)
	}
	// Totals, computed here from the records' numbers: 19 of 27 steps, 83.2 + 12.5 s.
	want := map[string]string{
		"#total-targets":  "2",
		"#total-clean":    "1/2",
		"#total-signed":   "1/2",
		"#total-attested": "1/2",
		"#total-hitrate":  fmt.Sprintf("%.1f%%", 100*19.0/27.0),
		"#total-seconds":  fmt.Sprintf("%.1f s", 83.2+12.5),
		"#total-bytes":    "4.5 MB",
		`tr[data-target="kunpeng920"] td.compiler`:                "clang 16.0.6",
		`tr[data-target="kunpeng920"] td.tune`:                    "-mtune=tsv110",
		`tr[data-target="kunpeng920"] td.pgolto`:                  "PGO + LTO thin",
		`tr[data-target="kunpeng920"] td.glibc`:                   "2.36 / 2.28 (waived)",
		`tr[data-target="kunpeng920"] td.scan`:                    "1 violation(s)",
		`tr[data-target="kunpeng920"] td.hitrate`:                 fmt.Sprintf("%.1f%%", 100*12.0/20.0),
		`tr[data-target="kunpeng920"] td.signature`:               "verified",
		`tr[data-target="graviton3"] td.signature`:                "failed",
		`tr[data-target="graviton3"] td.size`:                     "2.0 MB",
		`tr[data-target="graviton3"] td.glibc`:                    "2.34 / 2.34",
		`#ext-2\.1\.8-kunpeng920 tr[data-ext="sve"] td.unguarded`: "5",
	}
	for sel, v := range want {
		if got := w.Text(sel); got != v {
			t.Errorf("%s shows %q, want %q", sel, got, v)
		}
	}
	// CSS applied: the red row is red, an ordinary row is not; the bars
	// have widths where there are instructions and none where there are none.
	if bg := w.CSS(`#ext-2\.1\.8-kunpeng920 tr[data-ext="sve"] td`, "background-color"); bg != "rgba(255, 235, 233, 1)" && bg != "rgb(255, 235, 233)" {
		t.Errorf("SVE on kunpeng920 is not a red row: %s", bg)
	}
	// A waived glibc need is amber, a fitting one green.
	if c := w.CSS(`tr[data-target="kunpeng920"] td.glibc`, "color"); c != "rgba(191, 135, 0, 1)" && c != "rgb(191, 135, 0)" {
		t.Errorf("a waived glibc need is not amber: %s", c)
	}
	if c := w.CSS(`#ext-2\.1\.8-kunpeng920 tr[data-ext="aes"] td.waived`, "color"); strings.Contains(c, "191, 135, 0") {
		t.Errorf("an extension's waived count is amber like a waived glibc need: %s", c)
	}
	if c := w.CSS(`tr[data-target="graviton3"] td.glibc`, "color"); c != "rgba(26, 127, 55, 1)" && c != "rgb(26, 127, 55)" {
		t.Errorf("a fitting glibc need is not green: %s", c)
	}
	if bg := w.CSS(`#ext-2\.1\.8-kunpeng920 tr[data-ext="aes"] td`, "background-color"); strings.Contains(bg, "255, 235, 233") {
		t.Errorf("aes on kunpeng920 is a red row")
	}
	if w.Width(`#ext-2\.1\.8-kunpeng920 tr[data-ext="sve"] .bar .u`) <= 0 || w.Width(`#ext-2\.1\.8-kunpeng920 tr[data-ext="aes"] .bar .g`) <= 0 {
		t.Error("bars with instructions have no width")
	}
	if w.Width(`#ext-2\.1\.8-kunpeng920 tr[data-ext="crc"] .bar .u`) != 0 {
		t.Error("a bar without instructions has a width")
	}
	// A screenshot: a real picture of the page, as wide as the window.
	raw := w.Screenshot()
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil || img.Bounds().Dx() < 1000 {
		t.Fatalf("screenshot: %v %v", err, img)
	}
	if p := os.Getenv("DORISARM_SCREENSHOT"); p != "" {
		os.WriteFile(p, raw, 0o644)
		t.Logf("screenshot: %s", p)
	}
}

// TestHTMLFitsAt1400 renders a report of seven targets (as a release has),
// with the long cells a real one has (a rejected compiler, every flag of
// a PGO+ThinLTO build), in a window 1400 px wide: neither the page nor
// the targets table scrolls sideways.
func TestHTMLFitsAt1400(t *testing.T) {
	r := sampleReport()
	base := r.Targets
	r.Targets = nil
	for i, name := range []string{"generic-armv8", "kunpeng920", "graviton2", "graviton3", "graviton4", "ampere-altra", "x86_64"} {
		tg := base[i%len(base)]
		tg.Target = name
		tg.Rejected = []string{"gcc"}
		if tg.Image != nil {
			im := *tg.Image
			im.Ref = "registry.example.com/apache/doris-be:2.1.8-" + name
			tg.Image = &im
		}
		r.Targets = append(r.Targets, tg)
	}
	r.Total()
	page := writePage(t, r)
	w := testproc.Chromium(t)
	w.Resize(1400, 1000)
	w.Open("file://" + page)
	var got struct {
		Inner, Page, Table, Box float64
	}
	w.Eval(`const t = document.querySelector('#targets'), box = t.parentElement;
		return {inner: window.innerWidth, page: document.documentElement.scrollWidth, table: t.scrollWidth, box: box.clientWidth};`, &got)
	if got.Inner < 1300 || got.Inner > 1400 {
		t.Fatalf("the window is %v px wide inside, not about 1400", got.Inner)
	}
	if got.Page > got.Inner {
		t.Errorf("the page is %v px wide in a %v px window: it scrolls sideways", got.Page, got.Inner)
	}
	if got.Table > got.Box {
		var cols []string
		w.Eval(`return [...document.querySelectorAll('#targets th')].map(h => h.textContent + ' ' + Math.round(h.getBoundingClientRect().width));`, &cols)
		t.Errorf("the targets table is %v px wide in its %v px box: it scrolls sideways (columns: %s)", got.Table, got.Box, strings.Join(cols, ", "))
	}
}
