// Package fault names the two ways a dorisarm command fails, so libraries
// say which one they mean and the command line maps them to exit statuses
// in one place: bad input (the user must change a file, a flag or an
// argument; exit 2) and a failed gate (the input was fine but what it
// describes does not hold: a scan finding, a bad signature, a failed build;
// exit 1). Errors of other kinds count as gates.
package fault

import (
	"errors"
	"fmt"
)

var (
	// ErrInput marks bad input: a malformed file, flag or argument.
	ErrInput = errors.New("bad input")
	// ErrGate marks a check that ran on good input and failed.
	ErrGate = errors.New("check failed")
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

// IsInput reports whether err is bad input.
func IsInput(err error) bool { return errors.Is(err, ErrInput) }
