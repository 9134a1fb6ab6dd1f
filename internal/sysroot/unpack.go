package sysroot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/dorisarm/dorisarm/internal/unpack"
)

// unpacker applies tar streams (image layers in order, or packages) to a root
// directory, the way a container runtime applies layers, through dorisarm's
// one extractor (internal/unpack, Rebase): names are relative to the root
// and ".." cannot leave it (ErrUnsafePath); only paths matching keep are
// written; paths resolve inside the root with chroot semantics, so no write
// lands outside it; symlinks that are absolute or climb out are rewritten
// to the relative path of the same place inside the root (the tree works
// with --sysroot, under qemu -L, and after being moved); whiteouts remove
// what lower layers wrote; hard links stay hard links; devices and FIFOs are
// dropped; owners, times and set-id bits are not kept.
type unpacker struct{ t *unpack.Tree }

func newUnpacker(root *os.Root, keep []string, maxBytes, maxEntries int64) *unpacker {
	return &unpacker{unpack.New(root, unpack.Options{
		Links: unpack.Rebase, Whiteouts: true,
		Keep:     func(p string) bool { return keptBy(keep, p) },
		MaxBytes: maxBytes, MaxEntries: maxEntries,
	})}
}

// apply unpacks one tar stream; label names it in errors.
func (u *unpacker) apply(ctx context.Context, r io.Reader, label string) error {
	err := u.t.Apply(ctx, r, label)
	switch {
	case errors.Is(err, unpack.ErrLimit):
		return fmt.Errorf("%w: %v (WithMaxBytes, WithMaxEntries)", ErrLimit, err)
	case errors.Is(err, unpack.ErrUnsafePath):
		return fmt.Errorf("%w: %v", ErrUnsafePath, err)
	}
	return err
}

func (u *unpacker) close() error { return u.t.Close() }

func join(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

// keptBy: p is a pattern's path or below it.
func keptBy(patterns []string, p string) bool {
	el := strings.Split(p, "/")
	for _, pat := range patterns {
		pel := strings.Split(pat, "/")
		if len(el) < len(pel) {
			continue
		}
		ok := true
		for i, pe := range pel {
			if m, err := path.Match(pe, el[i]); err != nil || !m {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
