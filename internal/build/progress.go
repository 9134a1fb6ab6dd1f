package build

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dorisarm/dorisarm/internal/textfmt"
)

// Progress reports a build: one updating line on a terminal, timestamped
// lines otherwise (CI logs). A nil Progress reports nothing.
type Progress struct {
	W   io.Writer
	TTY bool
	// Width, when set, is the terminal's width in columns, asked at each
	// update (a resize takes effect at the next): the updating line is cut
	// to fit, since one that wraps leaves a copy in the scrollback.
	Width func() int
	mu    sync.Mutex
	total map[string]int
	hits  map[string]int
	start map[string]time.Time
	// running are each target's steps running now, in the order they started.
	running map[string][]string
	// eta is each target's estimate of the time left, as shown.
	eta map[string]string
}

// NewProgress makes a reporter.
func NewProgress(w io.Writer, tty bool) *Progress {
	return &Progress{W: w, TTY: tty, total: map[string]int{}, hits: map[string]int{}, start: map[string]time.Time{}, running: map[string][]string{}}
}

func (p *Progress) line(format string, a ...any) {
	if p.TTY {
		s := fmt.Sprintf(format, a...)
		if p.Width != nil {
			s = textfmt.Fit(s, p.Width())
		}
		fmt.Fprint(p.W, "\r\033[K"+s)
		return
	}
	fmt.Fprintf(p.W, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
}

// Begin starts a target's build.
func (p *Progress) Begin(target string, steps int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total[target], p.start[target] = steps, time.Now()
	if !p.TTY {
		p.line("%s: %d steps", target, steps)
	}
}

// Start says a step begins running.
func (p *Progress) Start(target string, i int, id string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running == nil {
		p.running = map[string][]string{}
	}
	p.running[target] = append(p.running[target], id)
	also := ""
	if n := len(p.running[target]); n > 1 {
		also = fmt.Sprintf(" (running: %s)", strings.Join(p.running[target], ", "))
	}
	if p.TTY {
		p.line("%s [%d/%d] %s  %.0fs  cache hits %d%s", target, i+1, p.total[target], id, time.Since(p.start[target]).Seconds(), p.hits[target], also)
		return
	}
	p.line("%s [%d/%d] %s started%s", target, i+1, p.total[target], id, also)
}

// Step says a step finished (ran or came from the cache).
func (p *Progress) Step(target string, i int, id string, cached bool, d time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.running[target], id); i >= 0 {
		p.running[target] = slices.Delete(p.running[target], i, i+1)
	}
	how := "ran"
	if cached {
		how = "cached"
		p.hits[target]++
	}
	if p.TTY {
		p.line("%s [%d/%d] %s %s  %.0fs  cache hits %d%s", target, i+1, p.total[target], id, how, time.Since(p.start[target]).Seconds(), p.hits[target], p.eta[target])
		return
	}
	p.line("%s [%d/%d] %s %s %.1fs%s", target, i+1, p.total[target], id, how, d.Seconds(), p.eta[target])
}

// Failed says a step stopped with an error: it no longer runs.
func (p *Progress) Failed(target string, i int, id string, d time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.running[target], id); i >= 0 {
		p.running[target] = slices.Delete(p.running[target], i, i+1)
	}
	p.line("%s [%d/%d] %s failed after %.1fs", target, i+1, p.total[target], id, d.Seconds())
}

// Stop says a step was stopped (the build is ending): it no longer runs.
func (p *Progress) Stop(target, id string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.running[target], id); i >= 0 {
		p.running[target] = slices.Delete(p.running[target], i, i+1)
	}
}

// ETA sets a target's estimate of the time left (simulated from the
// recorded times of its steps' last runs); unknown steps were never timed,
// so the estimate is a lower bound then; borrowed ones were timed only for
// other targets, and the estimate says so.
func (p *Progress) ETA(target string, seconds float64, unknown, borrowed int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.eta == nil {
		p.eta = map[string]string{}
	}
	left := (time.Duration(seconds) * time.Second).Round(time.Second)
	from := ""
	if borrowed > 0 {
		from = fmt.Sprintf("; %d steps timed only for other targets", borrowed)
	}
	switch {
	case left < time.Second && unknown > 0:
		// Nothing timed is left: "at least 0s" says nothing.
		p.eta[target] = ""
	case unknown > 0:
		p.eta[target] = fmt.Sprintf("  (at least %s left; %d steps never timed%s)", left, unknown, from)
	default:
		p.eta[target] = fmt.Sprintf("  (about %s left%s)", left, from)
	}
}

// Wait says a step waits for another build (another target of this one,
// or another process) that is making the same cache entry.
func (p *Progress) Wait(target string, i int, id string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line("%s [%d/%d] %s waits for another build making the same step", target, i+1, p.total[target], id)
	if p.TTY {
		fmt.Fprintln(p.W)
	}
}

// UpToDate says a target's published build is current.
func (p *Progress) UpToDate(target string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line("%s up to date", target)
	if p.TTY {
		fmt.Fprintln(p.W)
	}
}

// Warn reports a warning.
func (p *Progress) Warn(target, msg string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.TTY {
		fmt.Fprintln(p.W)
	}
	fmt.Fprintf(p.W, "warning: %s: %s\n", target, msg)
}

// Rejected finishes a target's build whose compiler its check refused:
// not a failure of the target, which is planned again with its next
// compiler (when the build replans; otherwise the error says so).
func (p *Progress) Rejected(target, compiler string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line("%s: %s rejected by its check after %.1fs; the target is planned again with its next compiler", target, compiler, time.Since(p.start[target]).Seconds())
	if p.TTY {
		fmt.Fprintln(p.W)
	}
}

// End finishes a target's build: its steps, and of the cacheable ones
// how many came from the cache (the record's counts, as build's summary
// and its JSON say them).
func (p *Progress) End(target string, ok bool, c CacheStats) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	state := "done"
	if !ok {
		state = "FAILED"
	}
	p.line("%s %s in %.1fs (%d steps; %d of %d cacheable steps from the cache)", target, state, time.Since(p.start[target]).Seconds(),
		p.total[target], len(c.Hits), len(c.Hits)+len(c.Misses))
	if p.TTY {
		fmt.Fprintln(p.W)
	}
}
