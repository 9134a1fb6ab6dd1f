// Package fault names the ways a dorisarm command fails, so libraries say
// which one they mean and the command line maps them to exit statuses in
// one place (README.md, "Exit status"):
//
//   - bad input (the user must change a file, a flag or an argument; a
//     reference the registry does not have): exit 2;
//   - a failed gate (the input was fine but what it describes does not
//     hold: a scan finding, a bad signature, a failed build): exit 1;
//   - the environment (the machine or the network failed, not the input or
//     the build: a full disk, permission denied on dorisarm's own
//     directories, a registry that cannot be reached, times out, fails
//     with 5xx or refuses the credentials): exit 3. CI may retry these.
//
// Errors of other kinds count as gates. The environment is also told by
// the error's cause, whatever marked it: a full disk under a failed build
// is still a full disk (Env).
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
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

var (
	// ErrInput marks bad input: a malformed file, flag or argument.
	ErrInput = errors.New("bad input")
	// ErrGate marks a check that ran on good input and failed.
	ErrGate = errors.New("check failed")
	// ErrEnv marks a failure of the machine or the network, not of the
	// input or of what it describes: running again may succeed.
	ErrEnv = errors.New("the machine or the network failed")
)

// kinded is an error of a kind: its message is the error's own, and
// errors.Is finds both the error and its kind.
type kinded struct {
	err  error
	kind error
}

func (k *kinded) Error() string   { return k.err.Error() }
func (k *kinded) Unwrap() []error { return []error{k.err, k.kind} }

// Input marks err as bad input (nil stays nil).
func Input(err error) error {
	if err == nil || errors.Is(err, ErrInput) {
		return err
	}
	return &kinded{err, ErrInput}
}

// Inputf is fmt.Errorf marked as bad input.
func Inputf(format string, args ...any) error { return Input(fmt.Errorf(format, args...)) }

// Gate marks err as a failed check (nil stays nil).
func Gate(err error) error {
	if err == nil || errors.Is(err, ErrGate) {
		return err
	}
	return &kinded{err, ErrGate}
}

// Gatef is fmt.Errorf marked as a failed check.
func Gatef(format string, args ...any) error { return Gate(fmt.Errorf(format, args...)) }

// Env marks err as a failure of the machine or the network (nil stays nil).
func Env(err error) error {
	if err == nil || errors.Is(err, ErrEnv) {
		return err
	}
	return &kinded{err, ErrEnv}
}

// Envf is fmt.Errorf marked as a failure of the machine or the network.
func Envf(format string, args ...any) error { return Env(fmt.Errorf(format, args...)) }

// IsInput reports whether err is bad input.
func IsInput(err error) bool { return errors.Is(err, ErrInput) }

// because is an error with the message of err and more causes than err's
// own: errors.Is and errors.As see them, the message does not repeat them.
type because struct {
	err    error
	causes []error
}

func (b *because) Error() string   { return b.err.Error() }
func (b *because) Unwrap() []error { return append([]error{b.err}, b.causes...) }

// Because returns err with causes that its message does not say (they
// were said before: a failed build's targets, printed as each ended), so
// that their kinds still count (nil stays nil; no causes is err).
func Because(err error, causes ...error) error {
	if err == nil || len(causes) == 0 {
		return err
	}
	return &because{err, causes}
}

// IsEnv reports whether err is a failure of the machine or the network:
// marked so, or caused by a full disk, the network, a registry's outage or
// refusal of the credentials, a timeout, or permission denied on a file
// that is not the user's input (a file the user named and dorisarm may not
// read is bad input, marked so where it is read).
func IsEnv(err error) bool {
	return errors.Is(err, ErrEnv) || DiskFull(err) || Network(err) || RegistryDown(err) ||
		Denied(err) && !IsInput(err)
}

// DiskFull reports whether err is a write that found no space: ENOSPC, or
// a disk quota (EDQUOT), from any write (a file, a directory, a pipe to
// a file on a full disk).
func DiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// Denied reports whether err is the system refusing an operation on a
// file: permission denied, operation not permitted, a read-only file
// system.
func Denied(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// Network reports whether err is the network failing: a connection refused,
// reset or unreachable, a name that does not resolve, a connection closed
// in the middle of a request, or anything that timed out.
func Network(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &op) || errors.As(err, &dns) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	for _, e := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN, syscall.ETIMEDOUT} {
		if errors.Is(err, e) {
			return true
		}
	}
	var t interface{ Timeout() bool }
	if errors.As(err, &t) && t.Timeout() {
		return true
	}
	return walk(err, func(e error) bool {
		if t, ok := e.(interface{ Timeout() bool }); ok && t.Timeout() {
			return true
		}
		// An HTTP request whose connection ended before the answer did.
		var u *url.Error
		return errors.As(e, &u) && (u.Err == io.EOF || u.Err == io.ErrUnexpectedEOF)
	})
}

// RegistryDown reports whether err is a registry failing or refusing the
// machine's credentials, not the image asked for: a 5xx answer, 408, 429
// (rate limits), 401 and 403 (the credentials refused).
func RegistryDown(err error) bool {
	return walk(err, func(e error) bool {
		te, ok := e.(*transport.Error)
		if !ok {
			return false
		}
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests:
			return true
		}
		return te.StatusCode >= 500
	})
}

// MissingRef reports whether err is a registry's answer that it has no
// such manifest (tag or digest) or repository: what the user named is not
// there, which is bad input. A missing blob is not: the image is broken.
func MissingRef(err error) bool {
	return walk(err, func(e error) bool {
		te, ok := e.(*transport.Error)
		if !ok || te.StatusCode != http.StatusNotFound {
			return false
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return true
			}
		}
		return len(te.Errors) == 0 && te.Request != nil && strings.Contains(te.Request.URL.Path, "/manifests/")
	})
}

// Path is the file an error is about: the path of the first *fs.PathError
// or *os.LinkError (its destination) in err's chain, or "".
func Path(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.New
	}
	return ""
}

// Walk calls f on err and every error it wraps, depth first, until f
// returns true; it reports whether f did.
func Walk(err error, f func(error) bool) bool { return walk(err, f) }

func walk(err error, f func(error) bool) bool {
	if err == nil {
		return false
	}
	if f(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return walk(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if walk(e, f) {
				return true
			}
		}
	}
	return false
}
