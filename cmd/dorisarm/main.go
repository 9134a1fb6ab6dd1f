// Command dorisarm builds Apache Doris for ARM servers, proves the result fits
// its CPU and OS, and publishes signed images. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// Exit statuses: 0 ok, 1 a check failed, 2 bad input or usage.
const (
	exitOK    = 0
	exitCheck = 1
	exitUsage = 2
)

// exitCode is the one mapping from errors to exit statuses. An error
// before a command's RunE ran (flags, arguments, unknown commands, required
// flags) is usage. After that, a failed gate anywhere in the chain wins,
// then bad input; anything else is a failed check.
func exitCode(err error, ran bool) int {
	switch {
	case err == nil:
		return exitOK
	case !ran:
		return exitUsage
	case errors.Is(err, fault.ErrGate):
		return exitCheck
	case errors.Is(err, fault.ErrInput):
		return exitUsage
	}
	return exitCheck
}

// usageErr is a bad-input error made at the command line (flag checks).
func usageErr(format string, args ...any) error { return fault.Inputf(format, args...) }

// markRuns wraps every command's RunE so that *ran tells, after Execute,
// whether a command ran or cobra refused the command line first.
func markRuns(c *cobra.Command) *bool {
	ran := new(bool)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				*ran = true
				return run(cmd, args)
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(c)
	return ran
}

// exitInterrupted is the status after Ctrl-C or SIGTERM (128 + SIGINT).
const exitInterrupted = 130

func main() {
	root := newRootFor(os.Args[1:])
	ran := markRuns(root)
	// Every command, planning included, runs under a context that Ctrl-C
	// (or SIGTERM) cancels, so that what it was making is cleaned up; a
	// second Ctrl-C kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := root.ExecuteContext(ctx)
	if ctx.Err() != nil {
		msg := "dorisarm: interrupted; what was being made is removed, finished steps stay in the cache"
		if err != nil && !errors.Is(err, context.Canceled) {
			msg += " (" + err.Error() + ")"
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(exitInterrupted)
	}
	stop()
	code := exitCode(err, *ran)
	switch {
	case err == nil && stdout.err != nil:
		err, code = fmt.Errorf("writing the output: %w", stdout.err), exitCheck
	case stdout.err != nil && errors.Is(err, stdout.err):
		// The command failed because its output could not be written
		// (cobra's own commands, completion for one, return that error
		// before a command of ours is marked as run).
		code = exitCheck
	}
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "dorisarm: "+err.Error())
	os.Exit(code)
}
