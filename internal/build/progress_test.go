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
