// Command dorisarm builds Apache Doris for ARM servers, proves the result fits
// its CPU and OS, and publishes signed images. See README.md.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

// Exit statuses: 0 ok, 1 a check failed, 2 bad input or usage.
const (
	exitOK    = 0
	exitCheck = 1
	exitUsage = 2
)

// exitError carries an exit status with an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func badInput(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitUsage, err: err}
}

func main() {
	root := newRoot()
	err := root.Execute()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "dorisarm: "+err.Error())
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case datafile.IsDataError(err):
		os.Exit(exitUsage)
	case isFlagError(err):
		os.Exit(exitUsage)
	default:
		os.Exit(exitCheck)
	}
}
