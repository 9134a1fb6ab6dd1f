package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestKinds(t *testing.T) {
	base := fmt.Errorf("reading x: %w", context.Canceled)
	in := Input(base)
	if in.Error() != base.Error() {
		t.Errorf("message changed: %q", in.Error())
	}
	if !IsInput(in) || !errors.Is(in, context.Canceled) || errors.Is(in, ErrGate) {
		t.Errorf("Input lost its kind or its cause: %v", in)
	}
	wrapped := fmt.Errorf("plan: %w", in)
	if !IsInput(wrapped) {
		t.Error("wrapping lost the kind")
	}
	if Input(nil) != nil || Gate(nil) != nil {
		t.Error("nil became an error")
	}
	if Input(in) != in {
		t.Error("marked twice")
	}
	g := Gatef("scan: %d findings", 3)
	if IsInput(g) || !errors.Is(g, ErrGate) || g.Error() != "scan: 3 findings" {
		t.Errorf("Gatef: %v", g)
	}
	if IsInput(errors.New("plain")) {
		t.Error("a plain error counted as input")
	}
}

// TestEnvironment: the causes that make a failure the machine's or the
// network's, found through wrapping and marks, with real errors where the
// system makes them.
func TestEnvironment(t *testing.T) {
	_, refused := net.Dial("tcp", "127.0.0.1:1") // nothing listens on port 1
	if refused == nil {
		t.Skip("something listens on 127.0.0.1:1")
	}
	enospc := &fs.PathError{Op: "write", Path: "/cache/x.tmp", Err: syscall.ENOSPC}
	eacces := &fs.PathError{Op: "open", Path: "/out/2.1.8", Err: syscall.EACCES}
	missing := &transport.Error{StatusCode: 404, Errors: []transport.Diagnostic{{Code: transport.ManifestUnknownErrorCode, Message: "manifest unknown", Detail: map[string]any{"Tag": "9.9.9"}}}}
	get := &http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "r:5000", Path: "/v2/doris/doris-be/manifests/9.9.9"}}
	for _, c := range []struct {
		name           string
		err            error
		env, full, ref bool
	}{
		{"ENOSPC under a gate", Gatef("build failed: %w", enospc), true, true, false},
		{"EDQUOT", fmt.Errorf("x: %w", os.NewSyscallError("write", syscall.EDQUOT)), true, true, false},
		{"ENOSPC as a cause not said", Because(Gatef("build failed for kunpeng920"), enospc), true, true, false},
		{"permission denied on the machine's directory", fmt.Errorf("publishing: %w", eacces), true, false, false},
		{"permission denied on a file the user named", Input(eacces), false, false, false},
		{"read-only file system", &fs.PathError{Op: "mkdir", Path: "/out", Err: syscall.EROFS}, true, false, false},
		{"connection refused", Input(fmt.Errorf("verify: %w", &url.Error{Op: "Get", URL: "http://127.0.0.1:1/v2/", Err: refused})), true, false, false},
		{"DNS", &url.Error{Op: "Get", URL: "https://r.invalid/v2/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "r.invalid", IsNotFound: true}}}, true, false, false},
		{"timeout", &url.Error{Op: "Get", URL: "https://r/v2/", Err: os.ErrDeadlineExceeded}, true, false, false},
		{"connection dropped", &url.Error{Op: "Get", URL: "https://r/v2/", Err: io.EOF}, true, false, false},
		{"registry 503", fmt.Errorf("r/doris: %w", &transport.Error{StatusCode: 503, Request: get}), true, false, false},
		{"registry 429", &transport.Error{StatusCode: 429}, true, false, false},
		{"credentials refused", &transport.Error{StatusCode: 401, Errors: []transport.Diagnostic{{Code: transport.UnauthorizedErrorCode}}}, true, false, false},
		{"marked", Envf("the mirror is down"), true, false, false},
		{"unknown tag", Gate(fmt.Errorf("promote: %w", missing)), false, false, true},
		{"unknown tag, HEAD (no body)", &transport.Error{StatusCode: 404, Request: get}, false, false, true},
		{"missing blob", &transport.Error{StatusCode: 404, Errors: []transport.Diagnostic{{Code: transport.BlobUnknownErrorCode}}}, false, false, false},
		{"a hostile manifest", &url.Error{Op: "Get", URL: "https://r/v2/", Err: errors.New("the registry answered with other bytes than the digest names")}, false, false, false},
		{"plain", errors.New("scan found 3 violations"), false, false, false},
		{"EOF reading a file", fmt.Errorf("reading x: %w", io.ErrUnexpectedEOF), false, false, false},
	} {
		if got := IsEnv(c.err); got != c.env {
			t.Errorf("%s: IsEnv(%v) = %v", c.name, c.err, got)
		}
		if got := DiskFull(c.err); got != c.full {
			t.Errorf("%s: DiskFull = %v", c.name, got)
		}
		if got := MissingRef(c.err); got != c.ref {
			t.Errorf("%s: MissingRef = %v", c.name, got)
		}
	}
	if p := Path(Gatef("x: %w", enospc)); p != "/cache/x.tmp" {
		t.Errorf("Path = %q", p)
	}
	if b := Because(Gatef("build failed for kunpeng920"), enospc); b.Error() != "build failed for kunpeng920" || !errors.Is(b, ErrGate) {
		t.Errorf("Because changed the message or lost the kind: %v", b)
	}
	if Env(nil) != nil || Because(nil, enospc) != nil {
		t.Error("nil became an error")
	}
}
