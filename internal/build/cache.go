// Package build runs a plan: it copies the source tree to a work directory,
// runs each step (or restores its result from the step cache), trains PGO
// profiles, collects the outputs, smoke-runs them under qemu on the target's
// CPU model, scans them with the target's policy, and only then publishes
// them with their build record.
package build

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/linkres"
	"github.com/dorisarm/dorisarm/internal/unpack"
)

// Cache is a content-addressed store of step results: <dir>/steps/<key>/
// holds files.tar (what the step changed in the tree), meta.json, and
// nothing else. Entries appear by an atomic rename, so concurrent builds can
// share a cache and an interrupted step leaves nothing behind.
//
// A cache directory is not trusted: meta.json records the sha256 and size
// of files.tar, Restore checks them and every path in the entry before it
// touches the tree, and it writes only through an os.Root of the tree, so
// an entry that was corrupted or planted can neither change a build's
// outputs unnoticed nor write, delete or link outside the tree.
type Cache struct {
	Dir string
}

// Meta describes a cached step result.
type Meta struct {
	Key     string   `json:"key"`
	Step    string   `json:"step"`
	Deleted []string `json:"deleted,omitempty"`
	Files   int      `json:"files"`
	Bytes   int64    `json:"bytes"`
	Seconds float64  `json:"seconds"` // how long the step took to run
	// CPUSeconds is the user and system time of its programs.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// TarSHA256 and TarSize are the digest (sha256:…) and size of
	// files.tar; Restore refuses an entry whose files.tar differs.
	TarSHA256 string `json:"tar_sha256"`
	TarSize   int64  `json:"tar_size"`
	// Dirs says the entry records the empty directories the step made.
	// Entries from before (dorisarm ≤ stop 39) lack them; for an unpack
	// step, whose empty directories can steer a configure (grpc's empty
	// submodule directories), such an entry is a miss.
	Dirs bool `json:"dirs,omitempty"`
	// Sysroot is the content digest of the sysroot the step compiled
	// against. Keys name a sysroot by its spec; an unpinned Debian spec
	// made on another machine (or after the suite moved) can hold other
	// packages, and such an entry is a miss.
	Sysroot string `json:"sysroot,omitempty"`
}

// maxMeta bounds meta.json: it lists deleted paths, never file contents.
const maxMeta = 64 << 20

// CorruptError is a cache entry that cannot be trusted: its content does
// not match its metadata, or it names a path outside the tree. The runner
// discards such an entry and runs the step again.
type CorruptError struct {
	Key    string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("cache entry %s is corrupt: %s", e.Key, e.Reason)
}

// UncacheableError is a step result the cache will not store (a symbolic
// link that leads out of the tree); the step's result stays in the tree.
type UncacheableError struct{ Reason string }

func (e *UncacheableError) Error() string { return "not cached: " + e.Reason }

func (c *Cache) entry(key string) string { return filepath.Join(c.Dir, "steps", key) }

// EntryDir is where the entry of key lives (it may not exist).
func (c *Cache) EntryDir(key string) string { return c.entry(key) }

// ValidKey reports whether key can name a cache entry.
func ValidKey(key string) bool { return validKey(key) }

// MaxMeta bounds an entry's meta.json.
const MaxMeta = maxMeta

// Adopt moves a complete entry directory made elsewhere in the cache (by
// a pull: files.tar and meta.json, already checked) into place under key.
// The directory must be inside <cache>/steps so the rename is atomic.
// adopted is false when another build stored an entry of key first: that
// one stays, and dir is removed (its bytes are not what the cache holds).
func (c *Cache) Adopt(key, dir string) (adopted bool, err error) {
	if !validKey(key) {
		return false, fmt.Errorf("invalid cache key %q", key)
	}
	if err := os.Rename(dir, c.entry(key)); err != nil {
		if _, statErr := os.Stat(c.entry(key)); statErr == nil {
			os.RemoveAll(dir)
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// TempDir makes a directory for an entry being assembled; Entries and
// Prune ignore it, and Adopt moves it into place.
func (c *Cache) TempDir() (string, error) {
	return c.tempDir()
}

// tempDir makes an entry's assembly directory, named by this process, and
// removes those a killed process left.
func (c *Cache) tempDir() (string, error) {
	steps := filepath.Join(c.Dir, "steps")
	fsutil.RemoveStale(steps, ".tmp-")
	return fsutil.MkdirTempOwned(steps, ".tmp-")
}

// RemoteCache shares step results beyond one machine (an OCI registry):
// Pull brings the entry of key into the local cache when the remote has it
// and it is trusted (nil when the remote has none); Push offers a local
// entry to the remote.
type RemoteCache interface {
	Pull(ctx context.Context, c *Cache, key string) (*RemoteEntry, error)
	// Push offers key's local entry; files, when set, is the digest of
	// the files.tar this process stored it with, and the entry must
	// still have it.
	Push(ctx context.Context, c *Cache, key, files string) error
}

// RemoteEntry is where a pulled step result came from: the artifact by
// digest, and the signer its signature was verified against (or that it
// was taken unsigned, by the user's choice).
type RemoteEntry struct {
	Artifact string `json:"artifact"` // REGISTRY/REPO@sha256:…
	Signer   string `json:"signer"`
}

// Get returns a step's cached result, or false. An entry whose metadata
// cannot be read is a miss (Restore checks the rest).
func (c *Cache) Get(key string) (*Meta, bool) {
	if !validKey(key) {
		return nil, false
	}
	f, err := os.Open(filepath.Join(c.entry(key), "meta.json"))
	if err != nil {
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxMeta+1))
	f.Close()
	if err != nil || len(data) > maxMeta {
		return nil, false
	}
	var m Meta
	if json.Unmarshal(data, &m) != nil || m.Key != key {
		return nil, false
	}
	if !m.Dirs && strings.HasPrefix(m.Step, "unpack:") {
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(c.entry(key), "meta.json"), now, now) // LRU: last use
	return &m, true
}

// validKey reports whether key can name an entry directory (plan keys are
// sha256 hex; nothing with a path separator or dot-prefix ever is).
func validKey(key string) bool {
	return key != "" && !strings.HasPrefix(key, ".") && !strings.ContainsAny(key, "/\\\x00")
}

// Discard removes an entry (one that failed Restore's checks).
func (c *Cache) Discard(key string) error {
	if !validKey(key) {
		return fmt.Errorf("invalid cache key %q", key)
	}
	gone := filepath.Join(c.Dir, "steps", ".tmp-discard-"+key)
	if err := os.Rename(c.entry(key), gone); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return os.RemoveAll(gone)
}

// Restore applies a cached change set to a tree. It first reads the whole
// entry, checking files.tar against m's digest and size and every name,
// link and deleted path in it; only then does it change the tree. Any
// problem found before the tree changed is a *CorruptError.
func (c *Cache) Restore(key, tree string, m *Meta) error {
	_, err := c.RestoreFiles(key, tree, m)
	return err
}

// RestoreFiles is Restore that also returns the entry's paths (relative,
// slash-separated, as Put was given them).
func (c *Cache) RestoreFiles(key, tree string, m *Meta) ([]string, error) {
	f, err := os.Open(filepath.Join(c.entry(key), "files.tar"))
	if err != nil {
		return nil, &CorruptError{Key: key, Reason: err.Error()}
	}
	defer f.Close()
	root, err := os.OpenRoot(tree)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	names, err := checkEntry(f, m, root)
	if err != nil {
		return nil, &CorruptError{Key: key, Reason: err.Error()}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	for _, d := range m.Deleted {
		if err := root.RemoveAll(filepath.FromSlash(d)); err != nil {
			return nil, err
		}
	}
	return names, untar(io.LimitReader(f, m.TarSize), root)
}

// checkEntry reads files.tar once: its sha256 and size must be m's, and
// every entry must be one Put writes (directory, regular file, symbolic
// link) under a clean relative name, with links that stay in the tree as
// it will be once the entry is applied to the tree under root (resolved
// through its links and the entry's, not lexically). m's deleted paths must
// be clean relative names too.
func checkEntry(f *os.File, m *Meta, root *os.Root) (names []string, err error) {
	err = checkEntryNames(f, m, root, &names)
	return names, err
}

func checkEntryNames(f *os.File, m *Meta, root *os.Root, names *[]string) error {
	if !strings.HasPrefix(m.TarSHA256, "sha256:") {
		return fmt.Errorf("meta.json records no digest of files.tar (an entry from an older dorisarm)")
	}
	for _, d := range m.Deleted {
		if err := checkRel(d); err != nil {
			return fmt.Errorf("deleted path %q: %w", d, err)
		}
	}
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(f, h)}
	tr := tar.NewReader(cr)
	after := &linkres.Overlay{Base: linkres.RootTree{Root: root}, Entries: map[string]*string{}, Deleted: m.Deleted}
	var links []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("files.tar: %w", err)
		}
		if err := checkHeader(hdr); err != nil {
			return err
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if hdr.Typeflag == tar.TypeDir || hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeCont || hdr.Typeflag == tar.TypeSymlink {
			*names = append(*names, name)
		}
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			target := hdr.Linkname
			after.Entries[name] = &target
			links = append(links, name)
		case tar.TypeDir, tar.TypeReg, tar.TypeCont:
			after.Entries[name] = nil
		}
	}
	for _, l := range links {
		if err := linkres.CheckIn(after, l, *after.Entries[l]); err != nil {
			return err
		}
	}
	// The rest (tar's end blocks) belongs to the digest too.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return err
	}
	if cr.n != m.TarSize {
		return fmt.Errorf("files.tar is %d bytes, meta.json says %d", cr.n, m.TarSize)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != m.TarSHA256 {
		return fmt.Errorf("files.tar has digest %s, meta.json says %s", got, m.TarSHA256)
	}
	return nil
}

func checkHeader(h *tar.Header) error {
	switch h.Typeflag {
	case tar.TypeXGlobalHeader, 'V':
		return nil // archive metadata, no path
	case tar.TypeDir, tar.TypeReg, tar.TypeCont:
	case tar.TypeSymlink:
		if err := checkLink(h.Name, h.Linkname); err != nil {
			return fmt.Errorf("link %q: %w", h.Name, err)
		}
	default:
		return fmt.Errorf("entry %q has type %q, which the cache never stores", h.Name, h.Typeflag)
	}
	name := h.Name
	if h.Typeflag == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
	}
	if err := checkRel(name); err != nil {
		return fmt.Errorf("entry %q: %w", h.Name, err)
	}
	return nil
}

// checkRel accepts a clean, relative, slash-separated path inside the tree.
func checkRel(p string) error {
	switch {
	case p == "" || strings.ContainsRune(p, 0):
		return errors.New("empty or NUL in the name")
	case path.IsAbs(p):
		return errors.New("absolute path")
	case path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return errors.New("not a clean path inside the tree")
	}
	return nil
}

// checkLink accepts a relative symbolic link at name (relative to the
// tree) whose target, resolved from name's directory, stays inside the tree.
func checkLink(name, target string) error {
	if target == "" || strings.ContainsRune(target, 0) {
		return errors.New("empty target")
	}
	if path.IsAbs(target) {
		return fmt.Errorf("points to the absolute path %s", target)
	}
	resolved := path.Join(path.Dir(name), target)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return fmt.Errorf("points to %s, outside the tree", target)
	}
	return nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Put stores a step's change set: the files of tree listed in changed. A
// change set the cache cannot restore safely (a link out of the tree, an
// unclean name) is refused with an *UncacheableError before anything is
// written.
func (c *Cache) Put(m Meta, tree string, changed []string) error {
	_, err := c.store(m, tree, changed)
	return err
}

// store is Put that says the digest of the files.tar it stored, "" when
// another build stored an entry of the key first (that one stays).
func (c *Cache) store(m Meta, tree string, changed []string) (files string, err error) {
	if !validKey(m.Key) {
		return "", fmt.Errorf("invalid cache key %q", m.Key)
	}
	for _, d := range m.Deleted {
		if err := checkRel(d); err != nil {
			return "", &UncacheableError{Reason: fmt.Sprintf("deleted path %q: %v", d, err)}
		}
	}
	var root *os.Root // the live tree, opened for the first link judged
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	for _, rel := range changed {
		if err := checkRel(rel); err != nil {
			return "", &UncacheableError{Reason: fmt.Sprintf("%q: %v", rel, err)}
		}
		full := filepath.Join(tree, filepath.FromSlash(rel))
		st, err := os.Lstat(full)
		if err == nil && !st.IsDir() && !st.Mode().IsRegular() && st.Mode()&fs.ModeSymlink == 0 {
			return "", &UncacheableError{Reason: fmt.Sprintf("the step made %s, %s (a step's result holds files, directories and links)", rel, fsutil.Kind(st.Mode()))}
		}
		if err == nil && st.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(full)
			if err != nil {
				return "", err
			}
			if err := checkLink(rel, target); err != nil {
				return "", &UncacheableError{Reason: fmt.Sprintf("the step made the link %s, which %v", rel, err)}
			}
			if root == nil {
				if root, err = os.OpenRoot(tree); err != nil {
					return "", err
				}
			}
			// As the kernel resolves it, through the tree's other links.
			if err := linkres.Check(root, rel, target); err != nil {
				return "", &UncacheableError{Reason: err.Error()}
			}
		}
	}
	tmp, err := c.tempDir()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	f, err := os.Create(filepath.Join(tmp, "files.tar"))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	n, err := tarFiles(io.MultiWriter(f, h), tree, changed)
	var size int64
	if err == nil {
		size, err = f.Seek(0, io.SeekCurrent) // what was written: the tar's size
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	m.Files, m.Bytes, m.Dirs = len(changed), n, true
	m.TarSHA256, m.TarSize = "sha256:"+hex.EncodeToString(h.Sum(nil)), size
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "meta.json"), data, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, builtFile), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, c.entry(m.Key)); err != nil {
		if _, statErr := os.Stat(c.entry(m.Key)); statErr == nil {
			return "", nil // another build stored the same result first
		}
		return "", err
	}
	return m.TarSHA256, nil
}

// builtFile marks an entry a build's own step stored (a pulled entry has
// none: it is the registry's, vouched for by whoever signed it then).
const builtFile = "built"

// Built reports whether key's entry was stored by a step of a build on
// this machine (dorisarm cache push offers only those).
func (c *Cache) Built(key string) bool {
	if !validKey(key) {
		return false
	}
	st, err := os.Lstat(filepath.Join(c.entry(key), builtFile))
	return err == nil && st.Mode().IsRegular()
}

// Init creates the cache directories.
func (c *Cache) Init() error {
	for _, d := range []string{"steps", "locks"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// lockKey holds key's lock until unlock is called: one step at a time,
// across the goroutines and processes that use the cache, looks a key up
// and makes its entry. wait is called once if another holds it.
func (c *Cache) lockKey(ctx context.Context, key string, wait func()) (unlock func(), err error) {
	if !validKey(key) {
		return nil, fmt.Errorf("invalid cache key %q", key)
	}
	return lockWork(ctx, filepath.Join(c.Dir, "locks", key+".lock"), wait)
}

// Entry is one cached step, for pruning and listing.
type Entry struct {
	Key      string
	Bytes    int64
	LastUsed time.Time
}

// Entries lists the cache, least recently used first.
func (c *Cache) Entries() ([]Entry, error) {
	names, err := entryDirs(filepath.Join(c.Dir, "steps"))
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, name := range names {
		e := Entry{Key: name}
		if st, err := os.Stat(filepath.Join(c.entry(name), "meta.json")); err == nil {
			e.LastUsed = st.ModTime()
		}
		if st, err := os.Stat(filepath.Join(c.entry(name), "files.tar")); err == nil {
			e.Bytes = st.Size()
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.Before(out[j].LastUsed) })
	return out, nil
}

// entryDirs are the names of the entry directories under root (none when
// root is missing), leaving out what a prune is removing (.tmp-*).
func entryDirs(root string) ([]string, error) {
	dirs, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var names []string
	for _, d := range dirs {
		if d.IsDir() && !strings.HasPrefix(d.Name(), ".tmp-") {
			names = append(names, d.Name())
		}
	}
	return names, nil
}

// Prune removes least recently used entries until the cache holds at most
// maxBytes; it returns what it removed.
func (c *Cache) Prune(maxBytes int64) (removed []Entry, err error) {
	entries, err := c.Entries()
	if err != nil {
		return nil, err
	}
	// The compile cache under it (compile/<key>) is pruned with it, a
	// directory at a time.
	compiled, err := compileCacheEntries(filepath.Join(c.Dir, compileSubdir))
	if err != nil {
		return nil, err
	}
	entries = append(entries, compiled...)
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].LastUsed.Before(entries[j].LastUsed) })
	var total int64
	for _, e := range entries {
		total += e.Bytes
	}
	for _, e := range entries {
		if total <= maxBytes {
			break
		}
		// Rename first so a concurrent reader never sees half an entry.
		from, gone := c.entry(e.Key), filepath.Join(c.Dir, "steps", ".tmp-prune-"+e.Key)
		if key, ok := strings.CutPrefix(e.Key, compileSubdir+"/"); ok {
			from, gone = filepath.Join(c.Dir, compileSubdir, key), filepath.Join(c.Dir, compileSubdir, ".tmp-prune-"+key)
		}
		if err := os.Rename(from, gone); err != nil {
			continue
		}
		os.RemoveAll(gone)
		total -= e.Bytes
		removed = append(removed, e)
	}
	return removed, nil
}

func tarFiles(w io.Writer, root string, files []string) (int64, error) {
	tw := tar.NewWriter(w)
	var total int64
	for _, rel := range files {
		full := filepath.Join(root, filepath.FromSlash(rel))
		st, err := os.Lstat(full)
		if err != nil {
			return 0, err
		}
		hdr, err := tar.FileInfoHeader(st, "")
		if err != nil {
			return 0, err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			if hdr.Linkname, err = os.Readlink(full); err != nil {
				return 0, err
			}
		}
		hdr.Name = rel
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return 0, err
		}
		if st.Mode().IsRegular() {
			f, err := os.Open(full)
			if err != nil {
				return 0, err
			}
			n, err := io.Copy(tw, f)
			f.Close()
			if err != nil {
				return 0, err
			}
			total += n
		}
	}
	return total, tw.Close()
}

// untar writes the entries of a checked files.tar into root, through
// dorisarm's one extractor: every operation goes through the os.Root, no
// link may lead out of the tree (checked as each is made and again on the
// finished tree), nothing is written through a link, and files keep their
// recorded modes and times.
func untar(r io.Reader, root *os.Root) error {
	t := unpack.New(root, unpack.Options{Links: unpack.Confine, Times: true, ExactModes: true})
	err := t.Apply(context.Background(), r, "files.tar")
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeFile writes r to path with mode and modification time mtime.
func writeFile(path string, r io.Reader, mode os.FileMode, mtime time.Time) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err := fill(f, err, r); err != nil {
		return err
	}
	return os.Chtimes(path, mtime, mtime)
}

// fill copies r into f, just opened (or not: openErr), and closes it.
func fill(f *os.File, openErr error, r io.Reader) error {
	if openErr != nil {
		return openErr
	}
	_, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// DefaultCacheDir is where the step cache lives by default:
// $DORISARM_CACHE, else the user's cache directory, else .cache/dorisarm.
func DefaultCacheDir(getenv func(string) string) string {
	if d := getenv("DORISARM_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dorisarm")
	}
	return ".cache/dorisarm"
}

// Pruned is what PruneTo did.
type Pruned struct {
	RemovedEntries int64 `json:"removed_entries"`
	RemovedBytes   int64 `json:"removed_bytes"`
	EntriesLeft    int64 `json:"entries_left"`
}

// WriteText prints p for people.
func (p Pruned) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "removed %d entries (%d bytes); %d left\n", p.RemovedEntries, p.RemovedBytes, p.EntriesLeft)
	return err
}

// PruneTo removes least recently used entries until the cache holds at
// most maxBytes, and says what it removed and what is left.
func (c *Cache) PruneTo(maxBytes int64) (Pruned, error) {
	if maxBytes < 0 {
		return Pruned{}, fault.Inputf("--max-size %d: give the bytes the cache may keep (0 empties it)", maxBytes)
	}
	removed, err := c.Prune(maxBytes)
	if err != nil {
		return Pruned{}, err
	}
	p := Pruned{RemovedEntries: int64(len(removed))}
	for _, e := range removed {
		p.RemovedBytes += e.Bytes
	}
	left, err := c.Entries()
	if err != nil {
		return p, err
	}
	compiled, err := compileCacheEntries(filepath.Join(c.Dir, compileSubdir))
	p.EntriesLeft = int64(len(left) + len(compiled))
	return p, err
}
