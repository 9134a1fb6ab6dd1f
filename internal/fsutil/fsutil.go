// Package fsutil writes files whole or not at all, reads input files whole
// within a bound, and names temporary directories by the process that owns
// them so that what a killed process left can be told apart and removed.
package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// WriteFileAtomic writes data to a temporary file beside path and renames it
// over path: a reader sees the old file or the new one, never half of one,
// and a failure leaves path as it was and no temporary file behind. The
// file is synced before the rename and its directory after, so a crash
// (of the machine, not only the process) leaves the old file or the whole
// new one, not an empty or truncated one under path's name.
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
	if err := syncFile(tmp); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncFile is (*os.File).Sync; tests replace it to see what is synced, and
// when.
var syncFile = (*os.File).Sync

// syncDir syncs the directory dir, so that a rename in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = syncFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// OpenRegular opens the regular file at path for reading, refusing
// anything else without waiting: a named pipe, a device such as /dev/zero,
// a socket or a directory given where a file belongs would otherwise block
// for ever or read without end. The error names path and says what it is.
// It is the one check for every file a user names (ReadFile uses it); a
// caller that streams the file (a digest) bounds nothing more.
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	// O_NONBLOCK: opening a named pipe for reading must not wait for a
	// writer; it changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		// A socket cannot be opened (ENXIO): say what it is.
		if fi, serr := os.Stat(path); errors.Is(err, syscall.ENXIO) && serr == nil && !fi.Mode().IsRegular() {
			return nil, nil, notRegular(path, fi)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, notRegular(path, fi)
	}
	return f, fi, nil
}

func notRegular(path string, fi fs.FileInfo) error {
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("not a regular file (%s); give the path of a file", Kind(fi.Mode()))}
}

// ReadFile reads the regular file at path whole (see OpenRegular),
// refusing anything over max bytes. The error names path and says what is
// wrong.
func ReadFile(path string, max int64) ([]byte, error) {
	f, fi, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("the file is %d bytes, more than the %d this input may have (is it the right file?)", fi.Size(), max)}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("the file grew past the %d bytes this input may have while it was read", max)}
	}
	return data, nil
}

// Kind names the kind of a file that is not regular ("a named pipe").
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}

// MkdirTempOwned makes a new directory in dir named prefix<pid>-<random>:
// the process that made it is in its name, so that RemoveStale can tell a
// directory a killed process left from one a running build is filling.
func MkdirTempOwned(dir, prefix string) (string, error) {
	return os.MkdirTemp(dir, fmt.Sprintf("%s%d-", prefix, os.Getpid()))
}

// RemoveStale removes the entries of dir that MkdirTempOwned made with
// prefix for a process that no longer runs, and returns their names.
func RemoveStale(dir, prefix string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var gone []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || processRuns(pid) {
			continue
		}
		if os.RemoveAll(filepath.Join(dir, e.Name())) == nil {
			gone = append(gone, e.Name())
		}
	}
	return gone
}

// processRuns reports whether a process with this pid exists (one of
// another user counts: EPERM).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
