package build

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestProgressShowsWhatRuns: a step that starts beside others names them
// all; a finished step leaves the list.
func TestProgressShowsWhatRuns(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, false)
	p.Begin("kunpeng920", 4)
	p.Start("kunpeng920", 0, "thirdparty:LZ4")
	p.Start("kunpeng920", 1, "thirdparty:BZIP")
	p.Step("kunpeng920", 0, "thirdparty:LZ4", false, time.Second)
	p.Start("kunpeng920", 2, "thirdparty:SNAPPY")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"kunpeng920 [1/4] thirdparty:LZ4 started",
		"kunpeng920 [2/4] thirdparty:BZIP started (running: thirdparty:LZ4, thirdparty:BZIP)",
		"kunpeng920 [1/4] thirdparty:LZ4 ran 1.0s",
		"kunpeng920 [3/4] thirdparty:SNAPPY started (running: thirdparty:BZIP, thirdparty:SNAPPY)",
	}
	if len(lines) != len(want)+1 {
		t.Fatalf("progress:\n%s", b.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i+1], " "+w) {
			t.Errorf("line %d: %q, want it to end %q", i+1, lines[i+1], w)
		}
	}
}

// TestProgressRejectedIsNoFailure: a target whose compiler its check
// refused is planned again, not failed: its line says so, and never
// FAILED.
func TestProgressRejectedIsNoFailure(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, false)
	p.Begin("x86_64", 9)
	p.Rejected("x86_64", "gcc")
	out := b.String()
	if strings.Contains(out, "FAILED") || !strings.Contains(out, "x86_64: gcc rejected by its check after ") || !strings.Contains(out, "planned again with its next compiler") {
		t.Errorf("progress:\n%s", out)
	}
}

// TestProgressFitsTheTerminal: on a terminal of 80 columns the updating
// line never fills a row (one that wraps left a copy of itself in the
// scrollback at every update: 113 lines for one build); the width is
// asked at each update, so a resize takes effect at the next.
func TestProgressFitsTheTerminal(t *testing.T) {
	var b bytes.Buffer
	cols := 80
	p := NewProgress(&b, true)
	p.Width = func() int { return cols }
	p.Begin("kunpeng920", 40)
	for i, id := range []string{"thirdparty:JEMALLOC_DORIS", "thirdparty:CROARINGBITMAP", "thirdparty:HYPERSCAN", "build:be:instrument"} {
		p.Start("kunpeng920", i, id)
		p.ETA("kunpeng920", 1800, 3, 2)
	}
	cols = 40
	p.Step("kunpeng920", 0, "thirdparty:JEMALLOC_DORIS", false, time.Minute)
	updates := strings.Split(b.String(), "\r\033[K")[1:]
	if len(updates) < 5 {
		t.Fatalf("%d updates:\n%q", len(updates), b.String())
	}
	for i, u := range updates {
		w := len([]rune(u))
		limit := 80
		if i == len(updates)-1 {
			limit = 40
		}
		if w >= limit || strings.Contains(u, "\n") {
			t.Errorf("update %d takes %d columns of %d: %q", i, w, limit, u)
		}
	}
}
