// Package sysroot makes the sysroot a target OS is built against: the
// headers, C runtime objects and libraries of that OS's glibc (and, when
// asked, its GCC runtime), so a cross build links against the target's
// symbol versions instead of this machine's.
//
// A sysroot is data: a Spec names where it comes from (an OCI image pinned by
// digest, or Debian packages from a suite) and, optionally, the content
// digest the result must have. Ensure fetches and unpacks it without a
// container runtime, keeping only what a compiler reads (/usr/include,
// /usr/lib*, /lib*), and stores the tree content-addressed under
// <cacheDir>/sysroots/sha256-<digest>/. A second Ensure of the same Spec finds
// the tree through a small index keyed by the Spec's hash and does nothing.
//
// A Spec may set a glibc ceiling (Spec.Glibc) below the tree's glibc: the
// tree's glibc shared libraries are then replaced by link-only stubs of the
// older ABI (LimitGlibc), made from the tree's own libraries, so a target
// OS older than any downloadable glibc (CentOS 7's 2.17) can be linked for.
package sysroot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/memo"
	digests "github.com/dorisarm/dorisarm/internal/source"
)

// Spec says where a target OS's sysroot comes from. Exactly one of Image and
// Debian is set.
type Spec struct {
	// Name is the target OS's key in matrix.yaml (oses.<name>); it is used in
	// messages only.
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// Image is an OCI image reference, by digest (repo@sha256:...). A tag is
	// refused unless WithTagsAllowed is given.
	Image string `json:"image,omitempty" yaml:"image,omitempty"`
	// Debian names packages of a Debian suite for an architecture.
	Debian *DebianSpec `json:"debian,omitempty" yaml:"debian,omitempty"`
	// Digest is the expected content digest ("sha256:...") of the resulting
	// tree (see TreeDigest). When set, a different tree is an error.
	Digest string `json:"digest,omitempty" yaml:"digest,omitempty"`
	// Glibc is a glibc ceiling: the target OS's glibc ("2.17" for CentOS 7,
	// "2.26" for Amazon Linux 2, "2.28" for Kylin V10). When it is below the
	// tree's glibc, Ensure replaces the tree's glibc shared libraries with
	// stubs of that older ABI (LimitGlibc), so a link that needs a newer
	// symbol version fails. The headers and static archives stay the tree's.
	Glibc string `json:"glibc,omitempty" yaml:"glibc,omitempty"`
	// Triple is the GNU triple of the tree's architecture
	// (aarch64-linux-gnu for Debian's arm64, x86_64-linux-gnu for amd64).
	// It is required with Glibc: it picks the binutils that make the stubs
	// (ToolsFor).
	Triple string `json:"triple,omitempty" yaml:"triple,omitempty"`
}

// DebianSpec is a set of packages from one suite of a Debian archive.
type DebianSpec struct {
	Suite string `json:"suite" yaml:"suite"`
	Arch  string `json:"arch" yaml:"arch"`
	// Packages are package names, optionally pinned: "libc6=2.31-13+deb11u11".
	// The cache is keyed by what is written here: an unpinned list is
	// fetched once and then reused as it was (pin versions, or set
	// Spec.Digest, to notice a suite's updates).
	Packages []string `json:"packages" yaml:"packages"`
	// Mirror is the archive's URL (e.g. http://deb.debian.org/debian). Empty
	// means the Debian archive this machine's apt sources use.
	Mirror string `json:"mirror,omitempty" yaml:"mirror,omitempty"`
}

// Sysroot is a finished tree in the cache.
type Sysroot struct {
	Name   string `json:"name,omitempty"`
	Path   string `json:"path"`
	Digest string `json:"digest"`
	// Glibc is the release of the tree's glibc (GlibcVersion), or the libc6
	// package's upstream version when no libc.so.6 is found. For a tree
	// limited to a glibc ceiling (Spec.Glibc) it is the ceiling: what the
	// tree's libraries stand for, and the oldest glibc whose symbol versions
	// a program linked against it can need (GlibcFrom is the glibc it was
	// made from). GlibcVersion on the tree says the same: the stub
	// libc.so.6 carries a release banner with the ceiling.
	Glibc string `json:"glibc,omitempty"`
	// GlibcFrom is set when the tree was limited to a glibc ceiling: the
	// release of the glibc the stubs were made from, which is also the
	// release of the tree's headers, crt files and static archives.
	GlibcFrom string `json:"glibc_from,omitempty"`
	// GlibcDefined is the highest GLIBC_x.y version libc.so.6 defines
	// (GlibcDefinedVersion): what a program linked against the tree can need
	// at most. It may be below Glibc (2.30 for glibc 2.31 on aarch64).
	GlibcDefined string `json:"glibc_defined,omitempty"`
	// Source says where the tree came from: the image by digest, or the suite,
	// architecture and mirror.
	Source string `json:"source"`
	// Packages are the Debian packages unpacked, as name=version.
	Packages []string `json:"packages,omitempty"`
	Files    int      `json:"files"`
	Size     int64    `json:"size"`
	// Cached is true when Ensure found the tree and fetched nothing.
	Cached bool `json:"cached"`
}

// DefaultKeep are the paths kept from an image or a package: what a compiler
// and linker read. A pattern matches a path and everything under it; each
// path element is matched with path.Match.
var DefaultKeep = []string{"usr/include", "usr/lib*", "lib*"}

// Default limits.
const (
	DefaultMaxBytes   = 4 << 30
	DefaultMaxEntries = 1 << 20
)

// formatVersion is part of every cache key: bump it when the unpacking rules
// change what a tree holds.
const formatVersion = 1

// Errors callers may test with errors.Is.
var (
	// ErrLimit: the input is larger than the limits (WithMaxBytes,
	// WithMaxEntries) allow.
	ErrLimit = errors.New("input exceeds the sysroot limits")
	// ErrUnsafePath: an archive entry names a path outside the root.
	ErrUnsafePath = errors.New("archive entry escapes the sysroot")
	// ErrDigestMismatch: the tree's digest is not Spec.Digest.
	ErrDigestMismatch = errors.New("sysroot digest mismatch")
)

// Option changes how Ensure fetches.
type Option func(*options)

type options struct {
	remote     []remote.Option
	insecure   bool
	allowTags  bool
	platform   v1.Platform
	maxBytes   int64
	maxEntries int64
	keep       []string
	aptDir     string
	memo       memo.Dir
}

// WithMemo remembers the binutils' --version answers (part of the key of a
// spec with a glibc ceiling) in dir, by the digests of their binaries.
func WithMemo(dir memo.Dir) Option { return func(o *options) { o.memo = dir } }

// WithRemoteOptions passes options (auth, transport, ...) to go-containerregistry.
func WithRemoteOptions(o ...remote.Option) Option {
	return func(opts *options) { opts.remote = append(opts.remote, o...) }
}

// WithInsecure talks plain HTTP to the image's registry (a local test registry).
func WithInsecure() Option { return func(o *options) { o.insecure = true } }

// WithTagsAllowed accepts an image reference by tag. The tag is resolved to a
// digest on every Ensure; the tree is not reproducible from the Spec alone.
func WithTagsAllowed() Option { return func(o *options) { o.allowTags = true } }

// WithPlatform picks the image from an index (default linux/arm64).
func WithPlatform(p v1.Platform) Option { return func(o *options) { o.platform = p } }

// WithMaxBytes bounds the uncompressed bytes read from all layers or packages.
func WithMaxBytes(n int64) Option { return func(o *options) { o.maxBytes = n } }

// WithMaxEntries bounds the number of archive entries read.
func WithMaxEntries(n int64) Option { return func(o *options) { o.maxEntries = n } }

// WithAptConfigDir reads the machine's apt sources from dir instead of /etc/apt.
func WithAptConfigDir(dir string) Option { return func(o *options) { o.aptDir = dir } }

func (s Spec) where() string {
	if s.Name == "" {
		return "the sysroot in matrix.yaml"
	}
	return "matrix.yaml oses." + s.Name + ".sysroot"
}

func (s Spec) label() string {
	if s.Name == "" {
		return "sysroot"
	}
	return fmt.Sprintf("sysroot %q", s.Name)
}

// source fetches one kind of input into a tree.
type source interface {
	// key is what identifies the content, besides the keep patterns.
	key() any
	// fill unpacks the input into u's root, using work for scratch files.
	fill(ctx context.Context, u *unpacker, work string) (filled, error)
}

type filled struct {
	source   string
	packages []string
	libc6    string // upstream version of the libc6 package, if any
}

// glibcKey is the part of the cache key a glibc ceiling adds.
type glibcKey struct {
	Ceiling string `json:"ceiling"`
	Triple  string `json:"triple"`
	Tools   string `json:"tools"` // the first lines of as --version and ld --version
	Stubs   int    `json:"stubs"` // stubFormat
}

type indexRecord struct {
	Key      json.RawMessage `json:"key"`
	Digest   string          `json:"digest"`
	Glibc    string          `json:"glibc,omitempty"`
	Defined  string          `json:"glibc_defined,omitempty"`
	From     string          `json:"glibc_from,omitempty"`
	Source   string          `json:"source"`
	Packages []string        `json:"packages,omitempty"`
	Files    int             `json:"files"`
	Size     int64           `json:"size"`
}

// Ensure returns the sysroot s describes, building it under cacheDir unless
// it is there already.
func Ensure(ctx context.Context, s Spec, cacheDir string, opts ...Option) (*Sysroot, error) {
	pr, err := prepare(ctx, s, cacheDir, opts)
	if err != nil {
		return nil, err
	}
	return pr.ensure(ctx)
}

// Key is the cache key of the sysroot s names, computed without making it:
// the spec (image digest, or suite, architecture, package list and mirror),
// the unpacking rules and, with a glibc ceiling, the binutils that make the
// stubs. Ensure finds a made tree under this key; a plan keys the steps
// that compile against the sysroot by it.
func Key(ctx context.Context, s Spec, cacheDir string, opts ...Option) (string, error) {
	pr, err := prepare(ctx, s, cacheDir, opts)
	if err != nil {
		return "", err
	}
	return "sha256:" + pr.key, nil
}

// prepared is a Spec checked and keyed, ready to be made.
type prepared struct {
	s        Spec
	o        options
	src      source
	tools    Tools
	limit    *glibcKey
	keyDoc   []byte
	key      string
	cacheDir string
}

func prepare(ctx context.Context, s Spec, cacheDir string, opts []Option) (*prepared, error) {
	o := options{
		platform:   v1.Platform{OS: "linux", Architecture: "arm64"},
		maxBytes:   DefaultMaxBytes,
		maxEntries: DefaultMaxEntries,
		keep:       DefaultKeep,
		aptDir:     "/etc/apt",
	}
	for _, f := range opts {
		f(&o)
	}
	if cacheDir == "" {
		return nil, fmt.Errorf("%s: no cache directory given", s.label())
	}
	// apt runs with its own working directory: every path it is given is absolute.
	if abs, err := filepath.Abs(cacheDir); err == nil {
		cacheDir = abs
	}
	for _, k := range o.keep {
		if _, err := path.Match(k, ""); err != nil || k == "" || path.IsAbs(k) || path.Clean(k) != k || strings.HasPrefix(k, "..") {
			return nil, fmt.Errorf("%s: keep pattern %q is not a clean relative path pattern (DefaultKeep)", s.label(), k)
		}
	}
	if s.Digest != "" && !digests.ValidDigest(s.Digest) {
		return nil, fmt.Errorf("%s: digest %q is not sha256:<64 hex digits>; fix %s.digest", s.label(), s.Digest, s.where())
	}
	var src source
	var err error
	switch {
	case s.Image != "" && s.Debian != nil:
		return nil, fmt.Errorf("%s: both image and debian are set; keep one in %s", s.label(), s.where())
	case s.Image != "":
		src, err = newImageSource(ctx, s, &o)
	case s.Debian != nil:
		src, err = newDebianSource(s, &o)
	default:
		return nil, fmt.Errorf("%s: neither image nor debian is set; give one in %s", s.label(), s.where())
	}
	if err != nil {
		return nil, err
	}

	// A glibc ceiling: its binutils are looked for before anything is
	// fetched, and their versions are part of the key, as the stubs' bytes
	// depend on them.
	var tools Tools
	var limit *glibcKey
	if s.Glibc != "" {
		if !reCeiling().MatchString(s.Glibc) {
			return nil, fmt.Errorf("%s: glibc ceiling %q is not a version such as 2.17; fix %s.glibc", s.label(), s.Glibc, s.where())
		}
		if s.Triple == "" {
			return nil, fmt.Errorf("%s: a glibc ceiling needs the GNU triple of the sysroot's architecture, to pick the binutils that make the stubs: set %s.triple (aarch64-linux-gnu for arm64, x86_64-linux-gnu for amd64)", s.label(), s.where())
		}
		if tools, err = ToolsFor(s.Triple); err != nil {
			return nil, fmt.Errorf("%s: %w; they make the stubs for the glibc ceiling in %s.glibc", s.label(), err, s.where())
		}
		id, err := tools.identity(ctx, o.memo)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.label(), err)
		}
		limit = &glibcKey{Ceiling: s.Glibc, Triple: s.Triple, Tools: id, Stubs: stubFormat}
	}

	keyDoc, err := json.Marshal(struct {
		Format int       `json:"format"`
		Keep   []string  `json:"keep"`
		Source any       `json:"source"`
		Glibc  *glibcKey `json:"glibc,omitempty"`
	}{formatVersion, o.keep, src.key(), limit})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(keyDoc)
	return &prepared{s: s, o: o, src: src, tools: tools, limit: limit, keyDoc: keyDoc, key: hex.EncodeToString(sum[:]), cacheDir: cacheDir}, nil
}

func (pr *prepared) ensure(ctx context.Context) (*Sysroot, error) {
	s, o, src, tools, limit, keyDoc, key, cacheDir := pr.s, pr.o, pr.src, pr.tools, pr.limit, pr.keyDoc, pr.key, pr.cacheDir
	store := filepath.Join(cacheDir, "sysroots")
	if rec, ok := readIndex(store, key); ok {
		return finish(s, store, rec, true)
	}

	if err := os.MkdirAll(store, 0o755); err != nil {
		return nil, fmt.Errorf("%s: cache: %w", s.label(), err)
	}
	// One maker per key: builds of several targets at once (in this
	// process or others) that need the same sysroot wait for the first.
	if err := os.MkdirAll(filepath.Join(store, "index"), 0o755); err != nil {
		return nil, fmt.Errorf("%s: cache: %w", s.label(), err)
	}
	unlock, err := lockKey(ctx, filepath.Join(store, "index", key+".lock"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.label(), err)
	}
	defer unlock()
	if rec, ok := readIndex(store, key); ok {
		return finish(s, store, rec, true)
	}
	fsutil.RemoveStale(store, ".build-") // what a killed dorisarm was making
	tmp, err := fsutil.MkdirTempOwned(store, ".build-")
	if err != nil {
		return nil, fmt.Errorf("%s: cache: %w", s.label(), err)
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "root")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(tree, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(tree)
	if err != nil {
		return nil, err
	}
	u := newUnpacker(root, o.keep, o.maxBytes, o.maxEntries)
	f, err := src.fill(ctx, u, filepath.Join(tmp, "work"))
	if cerr := u.close(); err == nil {
		err = cerr
	}
	root.Close()
	switch {
	case errors.Is(err, ErrLimit):
		return nil, fmt.Errorf("%s: %w; a sysroot holds little more than glibc and the GCC runtime: point %s at a smaller source, or raise the limit", s.label(), err, s.where())
	case errors.Is(err, ErrUnsafePath):
		return nil, fmt.Errorf("%s: %w; the source is malformed or hostile: do not use it in %s", s.label(), err, s.where())
	case err != nil:
		return nil, fmt.Errorf("%s: %w", s.label(), err)
	}
	var from string
	if limit != nil {
		lim, err := limitGlibc(ctx, tree, s.Glibc, tools)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; check %s.glibc and .triple", s.label(), err, s.where())
		}
		if len(lim.Stubbed) > 0 {
			from = lim.Release
			f.source += fmt.Sprintf(", glibc %s limited to the glibc %s ABI", lim.Release, s.Glibc)
		}
	}
	st, err := TreeDigest(tree)
	if err != nil {
		return nil, fmt.Errorf("%s: digest: %w", s.label(), err)
	}
	glibc, defined, gerr := glibcVersions(tree)
	if gerr != nil {
		glibc = f.libc6
	} else if glibc == "" {
		glibc = defined
	}
	final := filepath.Join(store, "sha256-"+strings.TrimPrefix(st.Digest, "sha256:"))
	if err := os.Rename(tree, final); err != nil {
		// The same content may be there already (another Spec, or a
		// concurrent Ensure): content addressing makes it the same tree.
		if _, serr := os.Stat(final); serr != nil {
			return nil, fmt.Errorf("%s: cache: %w", s.label(), err)
		}
	}
	rec := indexRecord{Key: keyDoc, Digest: st.Digest, Glibc: glibc, Defined: defined, From: from, Source: f.source,
		Packages: f.packages, Files: st.Files, Size: st.Size}
	if err := writeIndex(store, key, rec); err != nil {
		return nil, fmt.Errorf("%s: cache: %w", s.label(), err)
	}
	return finish(s, store, rec, false)
}

func finish(s Spec, store string, rec indexRecord, cached bool) (*Sysroot, error) {
	path, err := filepath.Abs(filepath.Join(store, "sha256-"+strings.TrimPrefix(rec.Digest, "sha256:")))
	if err != nil {
		return nil, err
	}
	sr := &Sysroot{Name: s.Name, Path: path, Digest: rec.Digest, Glibc: rec.Glibc, GlibcDefined: rec.Defined, GlibcFrom: rec.From, Source: rec.Source,
		Packages: rec.Packages, Files: rec.Files, Size: rec.Size, Cached: cached}
	if s.Digest != "" && s.Digest != rec.Digest {
		return sr, fmt.Errorf("%s: %w: %s is %s but %s.digest says %s; if the source changed on purpose, put the new digest in matrix.yaml, else find out why it changed",
			s.label(), ErrDigestMismatch, rec.Source, rec.Digest, s.where(), s.Digest)
	}
	return sr, nil
}

func readIndex(store, key string) (indexRecord, bool) {
	var rec indexRecord
	b, err := os.ReadFile(filepath.Join(store, "index", key+".json"))
	if err != nil || json.Unmarshal(b, &rec) != nil || !digests.ValidDigest(rec.Digest) {
		return rec, false
	}
	fi, err := os.Stat(filepath.Join(store, "sha256-"+strings.TrimPrefix(rec.Digest, "sha256:")))
	if err != nil || !fi.IsDir() {
		return rec, false
	}
	return rec, true
}

func writeIndex(store, key string, rec indexRecord) error {
	dir := filepath.Join(store, "index")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".index-")
	if err != nil {
		return err
	}
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(f.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(dir, key+".json"))
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// lockKey takes an exclusive flock on path, waiting until ctx is done.
func lockKey(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
