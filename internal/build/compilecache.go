package build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/plan"
)

// The compile cache: ccache (the build machine's, Debian's package) under
// the BE's compiles. Doris's env.sh makes ccache the compiler launcher
// wherever it is installed (CMAKE_CXX_COMPILER_LAUNCHER); dorisarm gives
// the build steps a ccache directory of their own, outside the step's
// tree and the step cache, at a fixed path in the step's namespace
// (/dorisarm/ccache). A BE build killed half-way and run again, a second
// work directory or a second cache directory that names the same compile
// cache compiles only what it had not compiled before: what the
// compilers see is the same at the same fixed paths on every machine.
//
// Its directory is <compile cache>/<key>: the key is the compiler's
// identity and target flags (the plan's toolchain), the flags of the
// step's phase, the C++ runtime's key, the made sysroot's digest and
// ccache's version, so nothing compiled for another compiler, runtime,
// sysroot or CPU is ever a hit. ccache bounds each directory to
// Options.CompileCacheSize; cache prune removes whole directories least
// recently used first, as it does step entries.
//
// A fleet of runners shares what they compiled through a directory they
// all mount (NFS, a shared volume: Options.SharedCompileCache), laid out
// like a cache directory (<shared>/compile/<key>): each BE step sees its
// key's directory at a fixed path as ccache's remote storage (its file
// backend), reads what another runner compiled and adds what it compiles.
// A step has no network, so ccache's HTTP and Redis backends cannot be
// reached from it; the shared directory is the remote storage that keeps
// the sandbox whole. cache prune --dir <shared> bounds it as any cache.
//
// The step writes it: a tree the build runs can plant a result under a
// key a later build of another tree looks up. Build untrusted trees with
// --be-compile-cache off (or a directory of their own); the scan gate and
// the flag read-back check what such a build publishes as any other.

// seenCompileCache is where a step sees its compile cache, and
// seenSharedCompileCache the shared one (ccache's remote storage).
const (
	seenCompileCache       = stepRoot + "/ccache"
	seenSharedCompileCache = stepRoot + "/ccache-shared"
)

// compileSubdir is the default compile cache under the cache directory.
const compileSubdir = "compile"

// usedMark is touched in a compile cache directory each time a step uses
// it (what cache prune orders by).
const usedMark = ".dorisarm-used"

// CompileCacheOff is the --be-compile-cache value that turns it off.
const CompileCacheOff = "off"

// compileCacheSize checks a ccache max_size value ("20G", "500M", "0" for
// no limit).
var compileCacheSize = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[kKMGT]?i?$`) })

// CheckCompileCacheSize says what is wrong with a --be-compile-cache-size.
func CheckCompileCacheSize(s string) error {
	if !compileCacheSize().MatchString(s) {
		return fault.Inputf("--be-compile-cache-size %q: give a size as ccache takes it (20G, 500M; 0 for no limit)", s)
	}
	return nil
}

// usesCompileCache says whether step s compiles through the compile
// cache: the BE and FE build steps, and the slice's.
func usesCompileCache(s plan.Step) bool {
	return s.Kind == plan.KindBuild
}

// compileCacheDir is the compile cache directory of step s on this
// machine, made if missing; "" when the compile cache is off or ccache
// is not installed.
func (r *runner) compileCacheDir(s plan.Step) (string, error) {
	if !usesCompileCache(s) || r.opts.CompileCache == CompileCacheOff {
		return "", nil
	}
	version := ccacheVersion()
	if version == "" {
		return "", nil
	}
	root := r.opts.CompileCache
	if root == "" {
		root = filepath.Join(r.opts.Cache, compileSubdir)
	}
	phase := stepPhase(s)
	r.shared.mu.Lock()
	flags := r.rec.Flags[phase]
	r.shared.mu.Unlock()
	material := struct {
		Toolchain plan.ToolchainInfo `json:"toolchain"`
		Phase     string             `json:"phase"`
		Flags     []string           `json:"flags"`
		Runtime   string             `json:"runtime,omitempty"`
		Sysroot   string             `json:"sysroot,omitempty"`
		Ccache    string             `json:"ccache"`
	}{r.in.Plan.Toolchain, phase, flags, "", r.sysrootDigest(s), version}
	if rt := r.in.TC.Runtime; rt != nil {
		material.Runtime = rt.Key
	}
	b, err := json.Marshal(material)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	dir, err := keyDir(root, hex.EncodeToString(sum[:]))
	if err != nil {
		return "", fmt.Errorf("the compile cache %s: %w", root, err)
	}
	return dir, nil
}

// keyDir is root/key, made if missing and marked used (what cache prune
// orders by).
func keyDir(root, key string) (string, error) {
	dir := filepath.Join(root, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := markUsed(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// sharedCompileDir is the shared compile cache's directory for the same
// key as dir (this machine's compile cache directory of a step), made if
// missing; "" when no shared compile cache is given.
func (r *runner) sharedCompileDir(dir string) (string, error) {
	if r.opts.SharedCompileCache == "" || dir == "" {
		return "", nil
	}
	shared, err := keyDir(filepath.Join(r.opts.SharedCompileCache, compileSubdir), filepath.Base(dir))
	if err != nil {
		return "", fmt.Errorf("the shared compile cache %s: %w", r.opts.SharedCompileCache, err)
	}
	return shared, nil
}

// markUsed touches dir's usedMark through an os.Root: steps write the
// directory, and a link planted at that name must not make dorisarm
// create or touch a file outside it.
func markUsed(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := root.OpenFile(usedMark, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	now := time.Now()
	return root.Chtimes(usedMark, now, now)
}

// compileCacheEnv is ccache's configuration for a step: its directory at
// the fixed path and how it hashes, or disabled.
func (r *runner) compileCacheEnv(s plan.Step, dir, shared string) []string {
	if dir == "" {
		// ccache, where Doris's env.sh or a package picks it up, only runs
		// the compiler: nothing of a build is kept where no step asked.
		return []string{"CCACHE_DISABLE=1"}
	}
	size := r.opts.CompileCacheSize
	if size == "" {
		size = DefaultCompileCacheSize
	}
	env := []string{
		"CCACHE_DIR=" + seenCompileCache,
		"CCACHE_MAXSIZE=" + size,
		// The compiler is the phase's wrapper: its content (the flags and
		// the real compiler's path) is the same at the fixed paths; the
		// directory's key names the real compiler's identity.
		"CCACHE_COMPILERCHECK=content",
		// No base_dir: the paths are the same on every machine already, and
		// base_dir would make ccache hand the compiler relative paths, so
		// what it records (-frecord-command-line) would differ from a build
		// without ccache.
		// Doris's precompiled headers (ENABLE_PCH) are cacheable only so.
		"CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime",
		"CCACHE_TEMPDIR=/tmp",
		"CCACHE_STATSLOG=" + r.seen(r.statsLog(s)),
	}
	if shared != "" {
		env = append(env, "CCACHE_REMOTE_STORAGE=file:"+seenSharedCompileCache)
	}
	return env
}

// DefaultCompileCacheSize bounds each compile cache directory.
const DefaultCompileCacheSize = "20G"

var (
	ccacheMu   sync.Mutex
	ccacheSeen = map[string]string{} // ccache's path → its version line
)

// ccacheVersion is the first line of the installed ccache's --version,
// "" where none is installed.
var ccacheVersion = func() string {
	p, err := exec.LookPath("ccache")
	if err != nil {
		return ""
	}
	ccacheMu.Lock()
	defer ccacheMu.Unlock()
	if v, ok := ccacheSeen[p]; ok {
		return v
	}
	v := ""
	if out, err := exec.Command(p, "--version").Output(); err == nil {
		v, _, _ = strings.Cut(string(out), "\n")
	}
	ccacheSeen[p] = v
	return v
}

// CompileStats is what the compile cache did for a step.
type CompileStats struct {
	// Hits and Misses count the compiles ccache answered from the cache
	// and the ones it ran (and stored).
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	// SharedHits are the hits found in the shared compile cache (not in
	// this machine's).
	SharedHits int64 `json:"shared_hits,omitempty"`
}

// statsLog is where a step's ccache writes what each compile did (its
// stats_log: a "# <file>" line, then the counters it bumped), one per
// phase, beside the compiler log.
func (r *runner) statsLog(s plan.Step) string {
	phase := stepPhase(s)
	return filepath.Join(r.logs, "ccache-"+phase+".log")
}

// maxStatsLog bounds what is read of a stats log (a step writes it).
const maxStatsLog = 256 << 20

// readCompileStats counts the hits and misses a step's stats log records.
func readCompileStats(path string) (CompileStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return CompileStats{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStatsLog))
	if err != nil {
		return CompileStats{}, err
	}
	var st CompileStats
	for line := range strings.SplitSeq(string(b), "\n") {
		switch strings.TrimSpace(line) {
		case "direct_cache_hit", "preprocessed_cache_hit":
			st.Hits++
		case "cache_miss":
			st.Misses++
		case "remote_storage_hit":
			st.SharedHits++
		}
	}
	return st, nil
}

// compileCacheEntries are the compile cache directories under root, as
// prunable entries ("compile/<key>"), least recently used first.
func compileCacheEntries(root string) ([]Entry, error) {
	names, err := entryDirs(root)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, name := range names {
		dir := filepath.Join(root, name)
		e := Entry{Key: compileSubdir + "/" + name}
		if st, err := os.Stat(filepath.Join(dir, usedMark)); err == nil {
			e.LastUsed = st.ModTime()
		}
		filepath.WalkDir(dir, func(_ string, de fs.DirEntry, err error) error {
			if err == nil && de.Type().IsRegular() {
				if info, err := de.Info(); err == nil {
					e.Bytes += info.Size()
				}
			}
			return nil
		})
		out = append(out, e)
	}
	return out, nil
}

// startCompileCache gives build step s its compile cache directory (and an
// empty stats log); done reads what ccache did into the step's record.
func (r *runner) startCompileCache(s plan.Step, log io.Writer) (done func(), err error) {
	dir, err := r.compileCacheDir(s)
	if err != nil || dir == "" {
		return func() {}, err
	}
	stats := r.statsLog(s)
	if err := os.WriteFile(stats, nil, 0o644); err != nil {
		return nil, err
	}
	shared, err := r.sharedCompileDir(dir)
	if err != nil {
		return nil, err
	}
	r.shared.mu.Lock()
	if r.shared.compileDirs == nil {
		r.shared.compileDirs = map[string][2]string{}
	}
	r.shared.compileDirs[s.ID] = [2]string{dir, shared}
	r.shared.mu.Unlock()
	fmt.Fprintf(log, "compile cache: %s (%s), at %s in the step\n", dir, ccacheVersion(), seenCompileCache)
	if shared != "" {
		fmt.Fprintf(log, "shared compile cache: %s, at %s in the step (ccache's remote storage)\n", shared, seenSharedCompileCache)
	}
	return func() {
		st, err := readCompileStats(stats)
		if err != nil {
			fmt.Fprintf(log, "compile cache: no stats: %v\n", err)
			return
		}
		fmt.Fprintf(log, "compile cache: %d hits (%d from the shared cache), %d misses\n", st.Hits, st.SharedHits, st.Misses)
		r.shared.mu.Lock()
		if r.shared.compileStats == nil {
			r.shared.compileStats = map[string]*CompileStats{}
		}
		r.shared.compileStats[s.ID] = &st
		r.shared.mu.Unlock()
	}, nil
}

// compileDirs are build step s's compile cache directory and its shared
// one, "" for none.
func (r *runner) compileDirs(s plan.Step) (dir, shared string) {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	d := r.shared.compileDirs[s.ID]
	return d[0], d[1]
}

// compiled is what the compile cache did for step s, nil for nothing.
func (r *runner) compiled(s plan.Step) *CompileStats {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	return r.shared.compileStats[s.ID]
}
