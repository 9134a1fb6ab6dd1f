package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// DefaultStall is how long a registry may send nothing (no response, or
// less than stallBytes of a body) before the request fails.
const DefaultStall = 2 * time.Minute

// DefaultMinRate is the slowest average a response body may arrive at
// (after one stall period of grace): a registry that sends just enough to
// never stall still cannot hold a read of 1 GiB for more than about 4.5
// hours, where the stall guard alone allows 33.
const DefaultMinRate = 64 << 10

// stallBytes is the progress a body must make in each stall period: with
// the default period, a link slower than about 0.5 KiB/s fails, as does a
// registry that trickles a byte a second to hold dorisarm forever. A
// request's own body (an upload) resets the wait for the response the same
// way as it is sent (see progressBody).
const stallBytes = 64 << 10

// maxManifest bounds a manifest read by digest, as go-containerregistry
// bounds the manifests it reads.
const maxManifest = 100 << 20

// manifestPath matches the path of a manifest request, with the reference
// (tag or digest) in its second group.
var manifestPath = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^/v2/(.+)/manifests/([^/]+)$`)
})

// guard is the transport under every registry request dorisarm makes. It
// does two things go-containerregistry leaves to its caller:
//
//   - It refuses Docker schema 1 manifests. For those go-containerregistry
//     takes the digest from the registry's Docker-Content-Digest header
//     instead of hashing the bytes, so a registry could answer a request
//     for NAME@D with any bytes it likes. And a manifest fetched by digest
//     must hash to that digest, whatever its media type, before anything
//     above reads it: index children and signature manifests included.
//   - It bounds time: a request that gets no response, or whose body makes
//     less than stallBytes of progress, within stall fails with an error
//     that names the registry, instead of hanging until Ctrl-C; and a body
//     must arrive at minRate on average, one stall period of grace given,
//     so a trickle just fast enough never to stall fails too.
type guard struct {
	inner   http.RoundTripper
	stall   time.Duration
	minRate int64 // bytes per second
}

// GuardError is a registry answer the guard refused: one that did not come
// in time (Slow), or one it may not trust.
type GuardError struct {
	Msg  string
	Slow bool
}

func (e *GuardError) Error() string { return e.Msg }

// Timeout says the registry or the network was too slow (a stall, a
// trickle): the environment failed, not the image (fault.Network).
func (e *GuardError) Timeout() bool { return e.Slow }

// Is makes a stall or a trickle a failure of the environment
// (fault.ErrEnv), found through go-containerregistry's joined ping errors
// too, which errors.Is searches but Unwrap does not expose.
func (e *GuardError) Is(target error) bool { return e.Slow && target == fault.ErrEnv }

func (g guard) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	stalled := func() {
		cancel(&GuardError{Slow: true, Msg: fmt.Sprintf("registry %s sent nothing for %s (%s %s): check the registry or the network, or raise --registry-timeout", req.URL.Host, g.stall, req.Method, req.URL.Path)})
	}
	// answered is set once the response has come: a late tick of the
	// timer, or of the request body still being sent, then does nothing.
	answered := new(atomic.Bool)
	timer := time.AfterFunc(g.stall, func() {
		if !answered.Load() {
			stalled()
		}
	})
	out := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		out.Body = &progressBody{rc: req.Body, timer: timer, stall: g.stall, answered: answered}
	}
	resp, err := g.inner.RoundTrip(out)
	answered.Store(true)
	if err != nil {
		timer.Stop()
		defer cancel(nil)
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil && req.Context().Err() == nil {
			return nil, c
		}
		return nil, err
	}
	timer.Stop()
	sb := &stallBody{rc: resp.Body, ctx: ctx, cancel: cancel, stall: g.stall, timer: time.AfterFunc(g.stall, stalled),
		start: time.Now(), minRate: g.minRate, size: resp.ContentLength, what: req.URL.Host + req.URL.Path}
	if sb.size > 0 && sb.minRate > 0 {
		// The whole read's deadline: a stall period plus the declared size at the minimum rate.
		limit := g.stall + time.Duration(float64(sb.size)/float64(sb.minRate)*float64(time.Second))
		sb.deadline = time.AfterFunc(limit, func() { cancel(sb.slowError()) })
	}
	resp.Body = sb
	if resp.StatusCode != http.StatusOK || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		return resp, nil
	}
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request // the request before the redirects
	}
	m := manifestPath().FindStringSubmatch(first.URL.Path)
	if m == nil {
		return resp, nil
	}
	what := first.URL.Host + "/" + m[1] + refSep(m[2]) + m[2]
	mt := types.MediaType(strings.TrimSpace(strings.Split(resp.Header.Get("Content-Type"), ";")[0]))
	if mt == types.DockerManifestSchema1 || mt == types.DockerManifestSchema1Signed {
		resp.Body.Close()
		return nil, &GuardError{Msg: fmt.Sprintf("%s: the registry answered with a Docker schema 1 manifest (%s); dorisarm reads only OCI and Docker v2 manifests, whose bytes it can check against their digest", what, mt)}
	}
	want, ok := strings.CutPrefix(m[2], "sha256:")
	if !ok || req.Method != http.MethodGet {
		return resp, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxManifest+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(b) > maxManifest {
		return nil, &GuardError{Msg: fmt.Sprintf("%s: the manifest is larger than %d MiB", what, maxManifest>>20)}
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, &GuardError{Msg: fmt.Sprintf("%s: the registry answered with other bytes than the digest names (they hash to sha256:%s); do not trust this registry's copy", what, got)}
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	return resp, nil
}

func refSep(ref string) string {
	if strings.Contains(ref, ":") {
		return "@"
	}
	return ":"
}

// drainStalls is how many stall periods the answer to a request with a
// body may take once the body has been handed to the connection.
const drainStalls = 4

// progressBody resets the wait for a response each stallBytes of the
// request's body that is sent, and gives drainStalls periods after its end.
type progressBody struct {
	rc       io.ReadCloser
	timer    *time.Timer
	stall    time.Duration
	answered *atomic.Bool
	since    int
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if b.answered.Load() {
		return n, err
	}
	switch b.since += n; {
	case err == io.EOF:
		// The last bytes may still be in the socket's buffers (megabytes
		// on a fast host, draining at the link's speed): more time for
		// them and the registry's answer.
		b.timer.Reset(drainStalls * b.stall)
	case b.since >= stallBytes:
		b.since = 0
		b.timer.Reset(b.stall)
	}
	return n, err
}

func (b *progressBody) Close() error { return b.rc.Close() }

// stallBody fails a body read once stall passes without stallBytes more of
// the body or its end (its timer ends the request's context with the stall
// error as the cause). Closing it ends the request's context.
type stallBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	stall  time.Duration
	timer  *time.Timer
	since  int // bytes since the timer was last reset
	// The average-rate bound: the whole read's deadline when the size is
	// declared (deadline), checked as it goes when it is not.
	start    time.Time
	minRate  int64
	size     int64
	read     atomic.Int64
	deadline *time.Timer
	what     string
}

// slowError says a body arrived slower than the minimum average rate.
func (b *stallBody) slowError() error {
	el := time.Since(b.start)
	got := b.read.Load()
	of := "an undeclared size"
	if b.size > 0 {
		of = fmt.Sprintf("%d bytes", b.size)
	}
	return &GuardError{Slow: true, Msg: fmt.Sprintf("registry %s sent %d of %s in %s (%.1f KiB/s), slower than the minimum of %d KiB/s on average: check the registry or the network, or lower --registry-min-rate",
		b.what, got, of, el.Round(time.Millisecond), float64(got)/1024/el.Seconds(), b.minRate>>10)}
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	total := b.read.Add(int64(n))
	if b.since += n; b.since >= stallBytes {
		b.since = 0
		b.timer.Reset(b.stall)
	}
	if b.size <= 0 && b.minRate > 0 && err == nil {
		if el := time.Since(b.start) - b.stall; el > 0 && float64(total) < float64(b.minRate)*el.Seconds() {
			e := b.slowError()
			b.cancel(e)
			return n, e
		}
	}
	if err != nil && err != io.EOF && b.ctx.Err() != nil {
		if c := context.Cause(b.ctx); c != nil {
			return n, c
		}
	}
	if err == io.EOF {
		b.timer.Stop()
		if b.deadline != nil {
			b.deadline.Stop()
		}
	}
	return n, err
}

func (b *stallBody) Close() error {
	b.timer.Stop()
	if b.deadline != nil {
		b.deadline.Stop()
	}
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// transport is the guarded transport for o: o.Transport, or
// go-containerregistry's default, under the guard.
func (o Options) transport() http.RoundTripper {
	inner := o.Transport
	if inner == nil {
		inner = remote.DefaultTransport
	}
	stall := o.Stall
	if stall <= 0 {
		stall = DefaultStall
	}
	rate := o.MinRate
	if rate <= 0 {
		rate = DefaultMinRate
	}
	return guard{inner: inner, stall: stall, minRate: rate}
}
