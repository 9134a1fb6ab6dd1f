package testproc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// Browser is headless Chromium driven through Debian's chromedriver with
// the little of the W3C WebDriver protocol tests need.
type Browser struct {
	t       testing.TB
	base    string
	session string
}

// Chromium starts chromedriver and a headless Chromium session (skipping the
// test when they are not installed), ended with the test.
func Chromium(t testing.TB) *Browser {
	t.Helper()
	driver, err := exec.LookPath("chromedriver")
	if err != nil {
		t.Skip("chromedriver not installed (scripts/install-deps.sh installs chromium and chromium-driver)")
	}
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (scripts/install-deps.sh)")
	}
	addr := FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	b := &Browser{t: t, base: "http://" + addr}
	Serve(t, b.base+"/status", driver, "--port="+port)
	// Headless and off the network: this machine's is closed, and Chromium
	// otherwise keeps trying to reach Google's services.
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--window-size=1800,2400", "--user-data-dir=" + t.TempDir()}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(b.call("POST", "/session", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome", "goog:chromeOptions": map[string]any{"binary": browser, "args": args},
	}}}), &sess)
	if sess.SessionID == "" {
		t.Fatal("chromedriver gave no session")
	}
	b.session = sess.SessionID
	t.Cleanup(func() { b.call("DELETE", "/session/"+b.session, nil) })
	return b
}

func (b *Browser) call(method, path string, body any) json.RawMessage {
	b.t.Helper()
	data := []byte{}
	if body != nil {
		data, _ = json.Marshal(body)
	}
	url := b.base + path
	if b.session != "" && !strings.HasPrefix(path, "/session/") && path != "/session" {
		url = b.base + "/session/" + b.session + path
	}
	req, _ := http.NewRequest(method, url, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("webdriver %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		b.t.Fatalf("webdriver %s %s: HTTP %d %v %s", method, path, resp.StatusCode, err, out.Value)
	}
	return out.Value
}

// Open loads a URL (file:///… for a page on disk).
func (b *Browser) Open(url string) {
	b.t.Helper()
	b.call("POST", "/url", map[string]string{"url": url})
}

// Title is the page's title.
func (b *Browser) Title() string {
	b.t.Helper()
	var s string
	json.Unmarshal(b.call("GET", "/title", nil), &s)
	return s
}

func (b *Browser) find(css string) string {
	b.t.Helper()
	var el map[string]string
	json.Unmarshal(b.call("POST", "/element", map[string]string{"using": "css selector", "value": css}), &el)
	for _, id := range el {
		return id
	}
	b.t.Fatalf("no element %s", css)
	return ""
}

// Text is the rendered text of the first element matching a CSS selector.
func (b *Browser) Text(css string) string {
	b.t.Helper()
	var s string
	json.Unmarshal(b.call("GET", "/element/"+b.find(css)+"/text", nil), &s)
	return s
}

// CSS is the computed value of a property of the first matching element.
func (b *Browser) CSS(css, prop string) string {
	b.t.Helper()
	var s string
	json.Unmarshal(b.call("GET", "/element/"+b.find(css)+"/css/"+prop, nil), &s)
	return s
}

// Width is the rendered width of the first matching element, in CSS pixels.
func (b *Browser) Width(css string) float64 {
	b.t.Helper()
	var r struct{ Width float64 }
	json.Unmarshal(b.call("GET", "/element/"+b.find(css)+"/rect", nil), &r)
	return r.Width
}

// Screenshot is a PNG of the window.
func (b *Browser) Screenshot() []byte {
	b.t.Helper()
	var s string
	json.Unmarshal(b.call("GET", "/screenshot", nil), &s)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b.t.Fatal(err)
	}
	return raw
}

// Resize sets the window's size in CSS pixels.
func (b *Browser) Resize(width, height int) {
	b.t.Helper()
	b.call("POST", "/window/rect", map[string]int{"width": width, "height": height})
}

// Eval runs a script in the page (its body: return what is wanted) and
// decodes what it returns into out.
func (b *Browser) Eval(script string, out any) {
	b.t.Helper()
	if err := json.Unmarshal(b.call("POST", "/execute/sync", map[string]any{"script": script, "args": []any{}}), out); err != nil {
		b.t.Fatalf("eval: %v", err)
	}
}
