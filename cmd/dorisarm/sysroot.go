package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/sysroot"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// sysrootFor makes (or finds in the cache) the sysroot of a cell's target OS:
// the matrix's sysroot for its ISA, capped at the OS's glibc. It returns nil
// with no error when the user waived the sysroot.
func sysrootFor(ctx context.Context, m *matrix.Matrix, cell matrix.Cell, cacheDir, waiver string) (*toolchain.Sysroot, error) {
	if waiver != "" {
		return nil, nil
	}
	name := cell.OS.Sysroot[cell.ISA.Name]
	if name == "" {
		return nil, usageErr("target %s: %s has no sysroot for %s (oses.%s.sysroot in %s): add one, or pass --waive-sysroot REASON to link against this machine's libraries (the waiver and its reason are recorded, and the glibc gate is waived)",
			cell.Target.Name, cell.OS.ID, cell.ISA.Name, cell.OS.ID, m.File)
	}
	// apt and the unpacker run in other directories: the cache path must be absolute.
	abs, err := filepath.Abs(cacheDir)
	if err != nil {
		return nil, err
	}
	cacheDir = abs
	sr := m.Sysroots[name]
	spec := sysroot.Spec{Name: name, Image: sr.Image, Digest: sr.Digest, Glibc: cell.OS.Glibc, Triple: sr.Triple}
	if d := sr.Debian; d != nil {
		spec.Debian = &sysroot.DebianSpec{Suite: d.Suite, Arch: d.Arch, Packages: d.Packages, Mirror: d.Mirror}
	}
	got, err := sysroot.Ensure(ctx, spec, cacheDir)
	if err != nil {
		return nil, fault.Inputf("target %s: cannot make sysroot %s for %s: %w\n(check sysroots.%s in %s, or pass --waive-sysroot REASON to build against this machine's libraries, recorded as a waiver)",
			cell.Target.Name, name, cell.OS.ID, err, name, m.File)
	}
	run := got.Path
	if got.GlibcFrom != "" {
		// Target programs run under qemu with the real libraries the stubs stand for.
		spec.Glibc = ""
		base, err := sysroot.Ensure(ctx, spec, cacheDir)
		if err != nil {
			return nil, fault.Input(fmt.Errorf("target %s: sysroot %s: %v", cell.Target.Name, name, err))
		}
		run = base.Path
	}
	return &toolchain.Sysroot{Name: name, Path: got.Path, RunPath: run, Digest: got.Digest, Glibc: got.Glibc, Source: got.Source}, nil
}
