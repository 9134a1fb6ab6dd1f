package tuf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// fetchError is a download that did not happen: the mirror could not be
// reached or answered other than 200. A size over the limit is not one:
// that is an error of its own, never a reason to fall back on the cache.
type fetchError struct {
	url    string
	status int // 0: no answer
	err    error
}

func (e *fetchError) Error() string {
	if e.status != 0 {
		return fmt.Sprintf("fetching %s: HTTP status %d", e.url, e.status)
	}
	return fmt.Sprintf("fetching %s: %v", e.url, e.err)
}

func (e *fetchError) Unwrap() error { return e.err }

// notFound says the file is not on the mirror (S3-like stores answer 403
// for a missing file).
func (e *fetchError) notFound() bool {
	return e.status == http.StatusNotFound || e.status == http.StatusForbidden
}

const defaultTimeout = 30 * time.Second

// get downloads url, at most limit bytes: it reads one more and refuses
// the file if that byte comes.
func (u *updater) get(ctx context.Context, url string, limit int64) ([]byte, error) {
	timeout := u.o.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	req.Header.Set("User-Agent", "dorisarm-tuf")
	c := u.o.HTTPClient
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, &fetchError{url: url, err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &fetchError{url: url, status: resp.StatusCode}
	}
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("fetching %s: %d bytes, more than the %d bytes allowed; the mirror is misconfigured or compromised", url, resp.ContentLength, limit)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &fetchError{url: url, err: err}
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("fetching %s: more than the %d bytes allowed; the mirror is misconfigured or compromised", url, limit)
	}
	return data, nil
}

// The cache: one directory per repository, the trusted metadata as
// root.json, timestamp.json, snapshot.json and targets.json, targets
// under targets/.

func (u *updater) cachePath(name string) string {
	return filepath.Join(u.o.CacheDir, filepath.FromSlash(name))
}

// readCache returns a cached file, or nil when there is none.
func (u *updater) readCache(name string) ([]byte, error) {
	data, err := os.ReadFile(u.cachePath(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the TUF cache: %w; set $TUF_ROOT to a writable directory", err)
	}
	return data, nil
}

// writeCache writes a file of the cache atomically (a temporary file in
// the same directory, renamed over the old one).
func (u *updater) writeCache(name string, data []byte) error {
	p := u.cachePath(name)
	hint := "; set $TUF_ROOT to a writable directory"
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("writing the TUF cache: %w%s", err, hint)
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return fmt.Errorf("writing the TUF cache: %w%s", err, hint)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing the TUF cache %s: %w%s", p, err, hint)
	}
	return nil
}

func (u *updater) removeCache(name string) error {
	if err := os.Remove(u.cachePath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s from the TUF cache: %w", name, err)
	}
	return nil
}
