// Command dorisarm builds Apache Doris for ARM servers, proves the result fits
// its CPU and OS, and publishes signed images. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// Exit statuses, as README.md's "Exit status" table documents them
// (TestExitStatusTable holds the two together).
const (
	exitOK    = 0 // success
	exitCheck = 1 // a check failed: the input was fine, what it describes does not hold
	exitUsage = 2 // bad input or usage: change a file, a flag or an argument
	exitEnv   = 3 // the machine or the network failed: running again may succeed
	// exitInterrupted is the status after Ctrl-C or SIGTERM (128 + SIGINT).
	exitInterrupted = 130
)

// exitCode is the one mapping from errors to exit statuses. An error
// before a command's RunE ran (flags, arguments, unknown commands, required
// flags) is usage. After that, a failure of the machine or the network
// anywhere in the chain wins (fault.IsEnv: marked so, or caused by a full
// disk, the network, a registry's outage, permission denied where dorisarm
// writes): the check or the input was not what failed. Then a failed gate,
// then bad input (a tag or manifest the registry does not have is bad
// input); anything else is a failed check.
func exitCode(err error, ran bool) int {
	switch {
	case err == nil:
		return exitOK
	case !ran:
		return exitUsage
	case fault.IsEnv(err):
		return exitEnv
	case errors.Is(err, fault.ErrGate):
		return exitCheck
	case errors.Is(err, fault.ErrInput), fault.MissingRef(err):
		return exitUsage
	}
	return exitCheck
}

// message is what dorisarm prints of err: its text, with a registry's
// error answers said as registry.Describe says them (never the library's
// codes and Go-printed detail), and, for a failure of the machine or the
// network, a line saying which and what to do.
func message(err error) string {
	msg := "dorisarm: " + registry.Text(err)
	if h := envHint(err); h != "" {
		msg += "\ndorisarm: " + h + " (exit status 3: the machine or the network failed, not the input or the build)"
	}
	return msg
}

// envHint names the failure of the machine or the network that err is, and
// what to do ("" when it is none, or the message says it already).
func envHint(err error) string {
	switch {
	case fault.DiskFull(err):
		if p := fault.Path(err); p == os.Stdout.Name() {
			return "the disk is full: no space left where the output goes (stdout); free space there, or send it to a disk with room, then run again"
		} else if p != "" {
			return fmt.Sprintf("the disk is full: no space left on the filesystem that holds %s; free space there (df -h %s), or point --out, --cache or TMPDIR at a disk with room, then run again", p, filepath.Dir(p))
		}
		return "the disk is full (no space left on device): free space, or point --out, --cache or TMPDIR at a disk with room, then run again"
	case fault.Denied(err) && !fault.IsInput(err):
		if p := fault.Path(err); p != "" {
			return fmt.Sprintf("permission denied on %s, which dorisarm must write or read: give its user access (owner, mode, a read-only mount), or point --out or --cache elsewhere", p)
		}
		return "permission denied on a file dorisarm must write or read: give its user access, or point --out or --cache elsewhere"
	case fault.Network(err):
		return fmt.Sprintf("the network failed%s: check the address, that the registry or mirror is up and that this machine reaches it (DNS, proxy, firewall), then run again", netWhere(err))
	}
	return ""
}

// netWhere is " reaching HOST" for a network error that names where it
// went, else "".
func netWhere(err error) string {
	var u *url.Error
	if errors.As(err, &u) {
		if p, perr := url.Parse(u.URL); perr == nil && p.Host != "" {
			return " reaching " + p.Host
		}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.Name != "" {
		return " resolving " + dns.Name
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return " reaching " + op.Addr.String()
	}
	return ""
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
		err = fmt.Errorf("writing the output: %w", stdout.err)
		code = exitCode(err, true)
	case stdout.err != nil && errors.Is(err, stdout.err):
		// The command failed because its output could not be written
		// (cobra's own commands, completion for one, return that error
		// before a command of ours is marked as run): a failed check,
		// or the environment (a full disk).
		code = exitCode(err, true)
	}
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, message(err))
	os.Exit(code)
}
