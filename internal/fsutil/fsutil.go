// Package fsutil writes files whole or not at all.
package fsutil

import (
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to a temporary file beside path and renames it
// over path: a reader sees the old file or the new one, never half of one,
// and a failure leaves path as it was and no temporary file behind.
func WriteFileAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
