package sysroot

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// TestAptDiskFull: apt says a full disk only in its text (LC_ALL=C). An
// apt run that said "No space left on device" is a full disk (ENOSPC, the
// environment), and its error names the directory and what to do, not the
// matrix's suite or packages; a mirror apt cannot reach is the network.
func TestAptDiskFull(t *testing.T) {
	s := &debianSource{spec: Spec{Name: "debian-11"}, suite: "bullseye", arch: "arm64", mirror: aptSource{URI: "http://deb.debian.org/debian"}}
	work := "/var/cache/dorisarm/sysroots/.work-debian-11"
	for _, c := range []struct {
		op, out           string
		full, unreachable bool
		want, reject      string
	}{
		{"update", "Get:1 http://deb.debian.org/debian bullseye InRelease [116 kB]\nGet:2 http://deb.debian.org/debian bullseye/main arm64 Packages [8072 kB]\nE: Write error - write (28: No space left on device)\nE: The package lists or status file could not be parsed or opened.\n",
			true, false, "the disk is full: apt could not write under " + work, "check the suite"},
		{"download", "Get:1 http://deb.debian.org/debian bullseye/main arm64 libc6 arm64 2.31-13+deb11u11 [2293 kB]\nE: Failed to fetch http://deb.debian.org/debian/pool/main/g/glibc/libc6_2.31-13+deb11u11_arm64.deb  Write error - write (28: No space left on device)\n",
			true, false, "the disk is full", "check the suite and package names"},
		{"update", "Err:1 http://deb.debian.org/debian bullseye InRelease\n  Could not connect to deb.debian.org:80 (151.101.2.132). - connect (111: Connection refused)\nE: The repository is not reachable\n",
			false, true, "the mirror cannot be reached", "the disk is full"},
		{"download", "E: Unable to locate package no-such-package\n",
			false, false, "check the suite and package names", "the disk is full"},
	} {
		err := error(s.aptError(c.op, work, []byte(c.out), errors.New("exit status 100"), []string{"libc6:arm64"}))
		if got := errors.Is(err, syscall.ENOSPC); got != c.full {
			t.Errorf("%s: errors.Is(ENOSPC) = %v: %v", c.op, got, err)
		}
		if got := fault.IsEnv(err); got != (c.full || c.unreachable) {
			t.Errorf("%s: fault.IsEnv = %v: %v", c.op, got, err)
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.reject) {
			t.Errorf("%s: %v\nwant %q, not %q", c.op, err, c.want, c.reject)
		}
	}
}
