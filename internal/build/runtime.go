package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// runtimeOut is where, in the runtime step's tree, its script puts the
// runtime (the step's result, and its cache entry).
const runtimeOut = "cxxrt"

// runtimeStep makes the cell's C++ runtime in a tree of its own, or
// restores it from the cache (the same key in every cell and target of
// the ISA: the first to get there builds it, the others wait and restore
// it), then puts it where the cell's compiles read it ($TOOLCHAIN/cxxrt,
// read-only to every step).
func (r *runner) runtimeStep(ctx context.Context, i int, s plan.Step) error {
	in := s.Inputs.Runtime
	if r.in.Runtime == nil || r.in.TC.Runtime == nil || in == nil {
		return fmt.Errorf("%s: the plan has a runtime step but nothing here makes runtime %s: plan again", r.in.Plan.Cell.Target, s.ID)
	}
	pr, err := r.inTree(".runtime-" + in.Name)
	if err != nil {
		return err
	}
	pr.layout = func() error { return pr.layOutRuntime(ctx, s) }
	if err := pr.step(ctx, i, s); err != nil {
		var se *StepError
		if errors.As(err, &se) {
			se.Tree = pr.tree // kept for a look at what failed
		}
		return err
	}
	defer os.RemoveAll(pr.tree)
	dst := filepath.Join(r.work, "toolchain", toolchain.RuntimeDir)
	if err := installRuntime(filepath.Join(pr.tree, "src", runtimeOut), dst, in.Libstdcxx); err != nil {
		return fmt.Errorf("%s: %s: %w", r.in.Plan.Cell.Target, s.ID, err)
	}
	r.shared.sysrootMu.Lock()
	r.in.TC.Runtime.Path = dst
	r.shared.sysrootMu.Unlock()
	return nil
}

// layOutRuntime gets what the runtime's build reads: its source (fetched
// once into the cache, checked against the plan's size and digest, and
// shown to the step read-only), its script (checked against the plan's
// digest) and the sysroot capped at the runtime's glibc.
func (r *runner) layOutRuntime(ctx context.Context, s plan.Step) error {
	in := s.Inputs.Runtime
	src, err := r.fetchRuntimeSource(ctx, in.Source)
	if err != nil {
		return err
	}
	script, err := datafs.ReadFile(r.in.Runtime.Script)
	if err != nil {
		return fmt.Errorf("runtime %s: %w", in.Name, err)
	}
	if sum := sha256.Sum256(script); "sha256:"+hex.EncodeToString(sum[:]) != in.ScriptSHA256 {
		return fmt.Errorf("runtime %s: %s changed since the plan was made: plan again", in.Name, r.in.Runtime.Script)
	}
	if err := os.MkdirAll(filepath.Join(r.root(), "src"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.root(), "src", path.Base(in.Script)), script, 0o644); err != nil {
		return err
	}
	sr, err := r.in.Runtime.MakeSysroot(ctx)
	if err != nil {
		return fmt.Errorf("runtime %s: its sysroot: %w", in.Name, err)
	}
	if sr.Key != in.Sysroot.Key {
		return fmt.Errorf("runtime %s: sysroot %s is keyed %s now, not %s as planned: plan again", in.Name, sr.Name, sr.Key, in.Sysroot.Key)
	}
	r.runtimeSource, r.runtimeSysroot = src, sr.Path
	return nil
}

// buildRuntime runs the runtime's script in the step's sandbox: it sees
// the source and the capped sysroot read-only, and writes only its tree.
func (r *runner) buildRuntime(ctx context.Context, s plan.Step, log io.Writer) error {
	in := s.Inputs.Runtime
	env := stepEnv(os.Environ(), nil)
	env = append(env,
		"CXXRT_SOURCE="+r.seen(r.runtimeSource),
		"CXXRT_SYSROOT="+r.seen(r.runtimeSysroot),
		"CXXRT_HOST="+in.Triple,
		"CXXRT_CC="+r.in.Runtime.CC,
		"CXXRT_GLIBC="+in.Glibc,
		"CXXRT_PREFIX="+r.seen(filepath.Join(r.src, runtimeOut)),
		"CXXRT_WORK="+r.seen(filepath.Join(r.src, ".cxxrt-work")),
		"JOBS="+strconv.Itoa(max(r.opts.Jobs, 1)),
		"PATH="+r.hostPath,
	)
	fmt.Fprintf(log, "runtime %s (GCC %s) for %s against glibc %s, from %s (sha256 %s)\n", in.Name, in.Libstdcxx, in.Triple, in.Glibc, in.Source.URL, in.Source.SHA256)
	return r.run(ctx, s, "/bin/bash", []string{r.seen(filepath.Join(r.src, path.Base(in.Script)))}, env, r.seen(r.src), log)
}

// downloadTimeout bounds a runtime source's download.
var downloadTimeout = 20 * time.Minute

// fetchRuntimeSource is the runtime's source archive in the cache
// (downloads/sha256-<hex>/<name>), fetched when it is not there yet: at most
// src.Size bytes are read, and a file of another size or digest is never
// kept.
func (r *runner) fetchRuntimeSource(ctx context.Context, src plan.RuntimeSource) (string, error) {
	name := src.Archive()
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\") {
		return "", fmt.Errorf("runtime source %s: its URL names no archive file", src.URL)
	}
	// Under its digest, with its own name (the script tells archives by it).
	dir := filepath.Join(r.opts.Cache, "downloads", "sha256-"+src.SHA256)
	dst := filepath.Join(dir, name)
	if err := checkDownload(dst, src); err == nil {
		return dst, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		// Not what the plan pins (a partial copy, or changed since):
		// fetched again.
		os.Remove(dst)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.URL, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w (or put the file, sha256 %s, at %s)", src.URL, err, src.SHA256, dst)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetching %s: %s (check runtimes.*.source.url in matrix.yaml, or put the file, sha256 %s, at %s)", src.URL, resp.Status, src.SHA256, dst)
	}
	f, err := os.CreateTemp(dir, ".download-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, src.Size+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", src.URL, err)
	}
	if n != src.Size {
		return "", fmt.Errorf("fetching %s: the server sent %s bytes, the pin says %d: not the pinned archive (check runtimes.*.source in matrix.yaml)", src.URL, sizeSaid(n, src.Size), src.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != src.SHA256 {
		return "", fmt.Errorf("fetching %s: sha256 %s, the pin says %s: not the pinned archive (check runtimes.*.source in matrix.yaml)", src.URL, got, src.SHA256)
	}
	if err := os.Chmod(f.Name(), 0o444); err != nil {
		return "", err
	}
	return dst, os.Rename(f.Name(), dst)
}

func sizeSaid(n, want int64) string {
	if n > want {
		return "more than " + strconv.FormatInt(want, 10)
	}
	return strconv.FormatInt(n, 10)
}

// checkDownload checks that the file at p is the pinned archive.
func checkDownload(p string, src plan.RuntimeSource) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Size() != src.Size {
		return fmt.Errorf("%s is not the pinned archive (%d bytes)", p, src.Size)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != src.SHA256 {
		return fmt.Errorf("%s is not the pinned archive (sha256 %s)", p, src.SHA256)
	}
	return nil
}

// installRuntime moves a made runtime to dst, replacing what was there.
// A runtime is directories and regular files, with the headers of its
// C++ library and its archives: anything else (a link, a device) is
// refused, as is a runtime without them.
func installRuntime(from, dst, libstdcxx string) error {
	for _, want := range []string{"include/c++/" + libstdcxx, "lib/libstdc++.a", "lib/libgcc_eh.a"} {
		if _, err := os.Lstat(filepath.Join(from, filepath.FromSlash(want))); err != nil {
			return fmt.Errorf("the made runtime has no %s: the script's build went wrong (see its log)", want)
		}
	}
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() && !d.IsDir() {
			rel, _ := filepath.Rel(from, p)
			return fmt.Errorf("the made runtime holds %s, which is not a regular file or directory (%s): refused", rel, d.Type())
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Rename(from, dst)
}
