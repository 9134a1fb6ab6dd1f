package report

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/testproc"
)

// webDriver is the little of the W3C WebDriver protocol the test needs,
// spoken to Debian's chromedriver driving Debian's chromium.
type webDriver struct {
	t       *testing.T
	base    string
	session string
}

func (w *webDriver) call(method, path string, body any) json.RawMessage {
	w.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	url := w.base + path
	if w.session != "" && !strings.HasPrefix(path, "/session/") && path != "/session" {
		url = w.base + "/session/" + w.session + path
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatalf("webdriver %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		w.t.Fatalf("webdriver %s %s: HTTP %d %v %s", method, path, resp.StatusCode, err, out.Value)
	}
	return out.Value
}

func (w *webDriver) find(css string) string {
	w.t.Helper()
	var el map[string]string
	json.Unmarshal(w.call("POST", "/element", map[string]string{"using": "css selector", "value": css}), &el)
	for _, id := range el {
		return id
	}
	w.t.Fatalf("no element %s", css)
	return ""
}

func (w *webDriver) text(css string) string {
	w.t.Helper()
	var s string
	json.Unmarshal(w.call("GET", "/element/"+w.find(css)+"/text", nil), &s)
	return s
}

func (w *webDriver) css(sel, prop string) string {
	w.t.Helper()
	var s string
	json.Unmarshal(w.call("GET", "/element/"+w.find(sel)+"/css/"+prop, nil), &s)
	return s
}

func (w *webDriver) width(sel string) float64 {
	w.t.Helper()
	var r struct{ Width float64 }
	json.Unmarshal(w.call("GET", "/element/"+w.find(sel)+"/rect", nil), &r)
	return r.Width
}

func startChromium(t *testing.T) *webDriver {
	t.Helper()
	driver, err := exec.LookPath("chromedriver")
	if err != nil {
		t.Skip("chromedriver not installed (scripts/install-deps.sh installs chromium and chromium-driver)")
	}
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (scripts/install-deps.sh)")
	}
	addr := testproc.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	w := &webDriver{t: t, base: "http://" + addr}
	testproc.Serve(t, w.base+"/status", driver, "--port="+port)
	// Headless and off the network: this machine's is closed, and Chromium
	// otherwise keeps trying to reach Google's services.
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--window-size=1800,2400", "--user-data-dir=" + t.TempDir()}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(w.call("POST", "/session", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome", "goog:chromeOptions": map[string]any{"binary": browser, "args": args},
	}}}), &sess)
	if sess.SessionID == "" {
		t.Fatal("chromedriver gave no session")
	}
	w.session = sess.SessionID
	t.Cleanup(func() { w.call("DELETE", "/session/"+w.session, nil) })
	return w
}

// TestHTMLRendersInChromium opens the HTML report in headless Chromium and
// reads back what it renders: the totals, a target's row, the red row of
// an extension the CPU lacks, and the bars.
func TestHTMLRendersInChromium(t *testing.T) {
	r := sampleReport()
	page := filepath.Join(t.TempDir(), "report.html")
	var b bytes.Buffer
	if err := r.HTML(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	w := startChromium(t)
	w.call("POST", "/url", map[string]string{"url": "file://" + page})

	var title string
	json.Unmarshal(w.call("GET", "/title", nil), &title)
	if title != "Doris 2.1.8 release report" {
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
		if got := w.text(sel); got != v {
			t.Errorf("%s shows %q, want %q", sel, got, v)
		}
	}
	// CSS applied: the red row is red, an ordinary row is not; the bars
	// have widths where there are instructions and none where there are none.
	if bg := w.css(`#ext-2\.1\.8-kunpeng920 tr[data-ext="sve"] td`, "background-color"); bg != "rgba(255, 235, 233, 1)" && bg != "rgb(255, 235, 233)" {
		t.Errorf("SVE on kunpeng920 is not a red row: %s", bg)
	}
	// A waived glibc need is amber, a fitting one green.
	if c := w.css(`tr[data-target="kunpeng920"] td.glibc`, "color"); c != "rgba(191, 135, 0, 1)" && c != "rgb(191, 135, 0)" {
		t.Errorf("a waived glibc need is not amber: %s", c)
	}
	if c := w.css(`tr[data-target="graviton3"] td.glibc`, "color"); c != "rgba(26, 127, 55, 1)" && c != "rgb(26, 127, 55)" {
		t.Errorf("a fitting glibc need is not green: %s", c)
	}
	if bg := w.css(`#ext-2\.1\.8-kunpeng920 tr[data-ext="aes"] td`, "background-color"); strings.Contains(bg, "255, 235, 233") {
		t.Errorf("aes on kunpeng920 is a red row")
	}
	if w.width(`#ext-2\.1\.8-kunpeng920 tr[data-ext="sve"] .bar .u`) <= 0 || w.width(`#ext-2\.1\.8-kunpeng920 tr[data-ext="aes"] .bar .g`) <= 0 {
		t.Error("bars with instructions have no width")
	}
	if w.width(`#ext-2\.1\.8-kunpeng920 tr[data-ext="crc"] .bar .u`) != 0 {
		t.Error("a bar without instructions has a width")
	}
	// A screenshot: a real picture of the page, as wide as the window.
	var shot string
	json.Unmarshal(w.call("GET", "/screenshot", nil), &shot)
	raw, err := base64.StdEncoding.DecodeString(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil || img.Bounds().Dx() < 1000 {
		t.Fatalf("screenshot: %v %v", err, img)
	}
	if p := os.Getenv("DORISARM_SCREENSHOT"); p != "" {
		os.WriteFile(p, raw, 0o644)
		t.Logf("screenshot: %s", p)
	}
}
