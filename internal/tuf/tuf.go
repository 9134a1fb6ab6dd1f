// Package tuf is a client of a TUF repository (The Update Framework,
// specification v1.0, §5 "detailed client workflow"), for the top-level
// roles only: it updates the trusted root version by version, then the
// timestamp, snapshot and targets metadata, and downloads one target,
// checking signature thresholds, versions, expiry, lengths and hashes on
// the way. dorisarm uses it for Sigstore's trusted_root.json.
package tuf

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"
)

// Options say which repository to trust and where to cache it.
type Options struct {
	// Mirror is the repository's base URL: metadata at Mirror/NAME,
	// targets at Mirror/targets/NAME.
	Mirror string
	// Root is the initial trusted root.json, used when the cache holds no
	// root (or an older one).
	Root []byte
	// CacheDir holds this repository's trusted metadata and targets.
	CacheDir string
	// HTTPClient fetches (nil: http.DefaultClient); Timeout bounds each
	// fetch (0: 30 s).
	HTTPClient *http.Client
	Timeout    time.Duration
	// Now is the clock (nil: time.Now); tests fix it.
	Now func() time.Time
	// Warn is told what a person should know but that is no error: a
	// cache file ignored, or the cache used because the mirror is down.
	Warn func(string)
}

// Limits on what is downloaded: how many root versions one update walks
// (TUF §5.3.3's Y), and sizes for files whose length no metadata gives.
const (
	maxRootRotations  = 256
	maxRootBytes      = 512 << 10
	maxTimestampBytes = 64 << 10
	maxSnapshotBytes  = 4 << 20
	maxTargetsBytes   = 8 << 20
	maxTargetBytes    = 32 << 20
)

// Target updates the repository's metadata and returns the target name
// (a path listed in the top-level targets metadata), checked against its
// length and hashes. When the mirror cannot be reached, metadata and the
// target in the cache that are all still valid stand in (Options.Warn
// says so); nothing in the cache is used without being verified again.
func Target(ctx context.Context, o Options, name string) ([]byte, error) {
	if err := checkTargetName(name); err != nil {
		return nil, err
	}
	if o.Mirror == "" || o.CacheDir == "" || len(o.Root) == 0 {
		return nil, errors.New("tuf: Options need a Mirror, an initial Root and a CacheDir")
	}
	o.Mirror = strings.TrimRight(o.Mirror, "/")
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	u := &updater{o: o, now: now()} // TUF §5.1: one update start time
	if err := u.loadRoot(); err != nil {
		return nil, err
	}
	data, err := u.run(ctx, name, false)
	var fe *fetchError
	if err == nil || !errors.As(err, &fe) {
		return data, err
	}
	cached, cerr := u.run(ctx, name, true)
	if cerr != nil {
		return nil, fmt.Errorf("%w (and the TUF cache in %s cannot stand in: %v); check the network and proxy settings, or point $TUF_ROOT at an up-to-date cache", err, o.CacheDir, cerr)
	}
	u.warn(fmt.Sprintf("%v; using the verified TUF metadata cached in %s, valid until %s", err, o.CacheDir, u.validUntil.UTC().Format(time.RFC3339)))
	return cached, nil
}

// updater is one update cycle.
type updater struct {
	o          Options
	now        time.Time
	root       *rootMeta
	rootRaw    []byte    // root, when it is not (yet) in the cache
	validUntil time.Time // the earliest expiry of the metadata used
}

func (u *updater) warn(msg string) {
	if u.o.Warn != nil {
		u.o.Warn(msg)
	}
}

func (u *updater) expires(h *common, what string) error {
	if err := checkExpiry(h, what, u.now); err != nil {
		return err
	}
	if u.validUntil.IsZero() || h.Expires.Before(u.validUntil) {
		u.validUntil = h.Expires
	}
	return nil
}

func (u *updater) url(name string) string { return u.o.Mirror + "/" + name }

// run is TUF §5.3-§5.7. Offline, nothing is downloaded: the cached
// metadata must be complete, consistent and unexpired.
func (u *updater) run(ctx context.Context, name string, offline bool) ([]byte, error) {
	u.validUntil = time.Time{}
	if !offline {
		if err := u.updateRoot(ctx); err != nil {
			return nil, err
		}
	}
	if err := u.expires(&u.root.common, fmt.Sprintf("the trusted root metadata (version %d)", u.root.Version)); err != nil {
		return nil, err
	}
	ts, err := u.updateTimestamp(ctx, offline)
	if err != nil {
		return nil, err
	}
	snap, err := u.updateSnapshot(ctx, ts, offline)
	if err != nil {
		return nil, err
	}
	targets, err := u.updateTargets(ctx, snap, offline)
	if err != nil {
		return nil, err
	}
	return u.target(ctx, targets, name, offline)
}

// parseRoot reads root metadata and checks its shape: the four top-level
// roles, each with keys and a threshold it can reach.
func parseRoot(data []byte) (*rootMeta, *signedDoc, error) {
	var r rootMeta
	doc, err := parse(data, "root", &r)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range []string{"root", "timestamp", "snapshot", "targets"} {
		ro, ok := r.Roles[name]
		switch {
		case !ok:
			return nil, nil, fmt.Errorf("root metadata version %d has no %s role", r.Version, name)
		case ro.Threshold < 1 || ro.Threshold > len(ro.KeyIDs):
			return nil, nil, fmt.Errorf("root metadata version %d gives the %s role threshold %d with %d keys", r.Version, name, ro.Threshold, len(ro.KeyIDs))
		}
	}
	return &r, doc, nil
}

// loadRoot is TUF §5.2: the trusted root is the cached one, or the initial
// one when the cache has none or an older version. A cached root that is
// not root metadata signed by a threshold of its own root keys is ignored.
func (u *updater) loadRoot() error {
	r, doc, err := parseRoot(u.o.Root)
	if err == nil {
		err = verifyRole(doc, r, "root", "the initial root metadata")
	}
	if err != nil {
		return fmt.Errorf("the initial trusted root: %w", err)
	}
	u.root, u.rootRaw = r, u.o.Root
	data, err := u.readCache("root.json")
	if err != nil || data == nil {
		return err
	}
	c, doc, err := parseRoot(data)
	if err == nil {
		err = verifyRole(doc, c, "root", "the cached root.json")
	}
	if err != nil {
		u.warn(fmt.Sprintf("ignoring the cached %s: %v", u.cachePath("root.json"), err))
		return nil
	}
	if c.Version >= r.Version {
		u.root, u.rootRaw = c, nil
	}
	return nil
}

// updateRoot is TUF §5.3: each next version, signed by a threshold of the
// trusted root's root keys and of its own, becomes the trusted root.
func (u *updater) updateRoot(ctx context.Context) error {
	start := u.root
	if u.rootRaw != nil { // the initial root: the next run starts from it
		if err := u.writeCache("root.json", u.rootRaw); err != nil {
			return err
		}
		u.rootRaw = nil
	}
	for range maxRootRotations {
		n := u.root.Version + 1
		url := u.url(fmt.Sprintf("%d.root.json", n))
		data, err := u.get(ctx, url, maxRootBytes)
		var fe *fetchError
		if errors.As(err, &fe) && fe.notFound() {
			break
		}
		if err != nil {
			return err
		}
		next, doc, err := parseRoot(data)
		if err != nil {
			return fmt.Errorf("%s: %w", url, err)
		}
		if err := verifyRole(doc, u.root, "root", url+" (signed by the keys of the root it replaces)"); err != nil {
			return err
		}
		if err := verifyRole(doc, next, "root", url+" (signed by its own root keys)"); err != nil {
			return err
		}
		if next.Version != n {
			return fmt.Errorf("%s holds root version %d, not %d: a rollback or a skipped version", url, next.Version, n)
		}
		u.root = next
		if err := u.writeCache("root.json", data); err != nil {
			return err
		}
	}
	if err := checkExpiry(&u.root.common, fmt.Sprintf("the newest root metadata on %s (version %d)", u.o.Mirror, u.root.Version), u.now); err != nil {
		return err
	}
	// §5.3.11: new timestamp or snapshot keys void the trusted timestamp
	// and snapshot (recovery from a fast-forward attack).
	if !sameRole(start, u.root, "timestamp") || !sameRole(start, u.root, "snapshot") {
		if err := u.removeCache("timestamp.json"); err != nil {
			return err
		}
		if err := u.removeCache("snapshot.json"); err != nil {
			return err
		}
	}
	return nil
}

// loadTrusted reads cached metadata of role roleName into m, verified by
// the trusted root's keys (not its expiry): ok is false when there is
// none, or when it does not verify (it is then ignored, never trusted).
func (u *updater) loadTrusted(file, roleName string, m metadata) (raw []byte, ok bool, err error) {
	raw, err = u.readCache(file)
	if err != nil || raw == nil {
		return nil, false, err
	}
	doc, err := parse(raw, roleName, m)
	if err == nil {
		err = verifyRole(doc, u.root, roleName, "the cached "+file)
	}
	if err != nil {
		u.warn(fmt.Sprintf("ignoring the cached %s: %v", u.cachePath(file), err))
		return nil, false, nil
	}
	return raw, true, nil
}

// updateTimestamp is TUF §5.4.
func (u *updater) updateTimestamp(ctx context.Context, offline bool) (*timestampMeta, error) {
	var old timestampMeta
	_, haveOld, err := u.loadTrusted("timestamp.json", "timestamp", &old)
	if err != nil {
		return nil, err
	}
	if offline {
		if !haveOld {
			return nil, errors.New("no valid cached timestamp.json")
		}
		if _, ok := old.Meta["snapshot.json"]; !ok {
			return nil, errors.New("the cached timestamp.json lists no snapshot.json")
		}
		return &old, u.expires(&old.common, "the cached timestamp.json")
	}
	url := u.url("timestamp.json")
	data, err := u.get(ctx, url, maxTimestampBytes)
	if err != nil {
		return nil, err
	}
	var ts timestampMeta
	doc, err := parse(data, "timestamp", &ts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	if err := verifyRole(doc, u.root, "timestamp", url); err != nil {
		return nil, err
	}
	sm, ok := ts.Meta["snapshot.json"]
	if !ok || sm.Version < 1 {
		return nil, fmt.Errorf("%s lists no snapshot.json version", url)
	}
	if haveOld {
		if ts.Version < old.Version {
			return nil, fmt.Errorf("%s is version %d, older than the trusted version %d: a rollback attack?", url, ts.Version, old.Version)
		}
		if o := old.Meta["snapshot.json"].Version; sm.Version < o {
			return nil, fmt.Errorf("%s names snapshot version %d, older than the trusted timestamp's %d: a rollback attack?", url, sm.Version, o)
		}
	}
	if err := u.expires(&ts.common, url); err != nil {
		return nil, err
	}
	return &ts, u.writeCache("timestamp.json", data)
}

// metaLimit is how much of a metadata file to download: its length when
// listed, else a fixed bound.
func metaLimit(m metaFile, bound int64) int64 {
	if m.Length > 0 && m.Length < bound {
		return m.Length
	}
	return bound
}

// fetchMeta downloads role's metadata file as m (from namedBy) describes
// it — VERSION.ROLE.json under consistent snapshots — and accepts it only
// when its length and hashes match m, a threshold of the role's keys in the
// trusted root signed it, and it is the version m names. It decodes into
// into and returns the bytes and the URL they came from.
func (u *updater) fetchMeta(ctx context.Context, role string, m metaFile, bound int64, namedBy string, into metadata) ([]byte, string, error) {
	file := role + ".json"
	if u.root.ConsistentSnapshot {
		file = fmt.Sprintf("%d.%s.json", m.Version, role)
	}
	url := u.url(file)
	data, err := u.get(ctx, url, metaLimit(m, bound))
	if err != nil {
		return nil, url, err
	}
	if err := checkHashes(data, m.Length, m.Hashes, false, url); err != nil {
		return nil, url, err
	}
	doc, err := parse(data, role, into)
	if err != nil {
		return nil, url, fmt.Errorf("%s: %w", url, err)
	}
	if err := verifyRole(doc, u.root, role, url); err != nil {
		return nil, url, err
	}
	if v := into.header().Version; v != m.Version {
		return nil, url, fmt.Errorf("%s is version %d, %s names version %d", url, v, namedBy, m.Version)
	}
	return data, url, nil
}

// updateSnapshot is TUF §5.5.
func (u *updater) updateSnapshot(ctx context.Context, ts *timestampMeta, offline bool) (*snapshotMeta, error) {
	sm := ts.Meta["snapshot.json"]
	var old snapshotMeta
	raw, haveOld, err := u.loadTrusted("snapshot.json", "snapshot", &old)
	if err != nil {
		return nil, err
	}
	// The cached snapshot is the one the timestamp names: keep it.
	if haveOld && old.Version == sm.Version && checkHashes(raw, sm.Length, sm.Hashes, false, "the cached snapshot.json") == nil {
		return u.checkSnapshot(&old, "the cached snapshot.json")
	}
	if offline {
		return nil, fmt.Errorf("the cached snapshot.json is not version %d, the one the cached timestamp.json names", sm.Version)
	}
	var snap snapshotMeta
	data, url, err := u.fetchMeta(ctx, "snapshot", sm, maxSnapshotBytes, "the timestamp", &snap)
	if err != nil {
		return nil, err
	}
	if haveOld {
		for f, m := range old.Meta {
			n, ok := snap.Meta[f]
			if !ok {
				return nil, fmt.Errorf("%s no longer lists %s, which the trusted snapshot did: a rollback attack?", url, f)
			}
			if n.Version < m.Version {
				return nil, fmt.Errorf("%s names %s version %d, older than the trusted snapshot's %d: a rollback attack?", url, f, n.Version, m.Version)
			}
		}
	}
	if _, err := u.checkSnapshot(&snap, url); err != nil {
		return nil, err
	}
	return &snap, u.writeCache("snapshot.json", data)
}

func (u *updater) checkSnapshot(s *snapshotMeta, what string) (*snapshotMeta, error) {
	if tm, ok := s.Meta["targets.json"]; !ok || tm.Version < 1 {
		return nil, fmt.Errorf("%s lists no targets.json version", what)
	}
	return s, u.expires(&s.common, what)
}

// updateTargets is TUF §5.6, for the top-level targets role.
func (u *updater) updateTargets(ctx context.Context, snap *snapshotMeta, offline bool) (*targetsMeta, error) {
	tm := snap.Meta["targets.json"]
	var old targetsMeta
	raw, haveOld, err := u.loadTrusted("targets.json", "targets", &old)
	if err != nil {
		return nil, err
	}
	if haveOld && old.Version == tm.Version && checkHashes(raw, tm.Length, tm.Hashes, false, "the cached targets.json") == nil {
		return &old, u.expires(&old.common, "the cached targets.json")
	}
	if offline {
		return nil, fmt.Errorf("the cached targets.json is not version %d, the one the cached snapshot.json names", tm.Version)
	}
	var t targetsMeta
	data, url, err := u.fetchMeta(ctx, "targets", tm, maxTargetsBytes, "the snapshot", &t)
	if err != nil {
		return nil, err
	}
	if err := u.expires(&t.common, url); err != nil {
		return nil, err
	}
	return &t, u.writeCache("targets.json", data)
}

// target is TUF §5.7 for a target of the top-level targets role: the
// cached copy when it matches, else a download.
func (u *updater) target(ctx context.Context, t *targetsMeta, name string, offline bool) ([]byte, error) {
	tf, ok := t.Targets[name]
	if !ok {
		if t.Delegations != nil && len(t.Delegations.Roles) > 0 {
			return nil, fmt.Errorf("%s is not listed by the top-level targets metadata (version %d) of %s; it may be delegated, and this client does not follow delegations", name, t.Version, u.o.Mirror)
		}
		return nil, fmt.Errorf("%s is not in the TUF repository %s (targets version %d)", name, u.o.Mirror, t.Version)
	}
	what := "target " + name
	if tf.Length < 0 || tf.Length > maxTargetBytes {
		return nil, fmt.Errorf("%s: length %d, outside 0..%d", what, tf.Length, maxTargetBytes)
	}
	h := tf.Hashes["sha256"]
	if h == "" {
		h = tf.Hashes["sha512"]
	}
	if _, err := hex.DecodeString(h); err != nil || h == "" {
		return nil, fmt.Errorf("%s: the targets metadata gives no hex sha256 or sha512", what)
	}
	check := func(data []byte, what string) error {
		if int64(len(data)) != tf.Length {
			return fmt.Errorf("%s is %d bytes, the targets metadata says %d", what, len(data), tf.Length)
		}
		return checkHashes(data, tf.Length, tf.Hashes, true, what)
	}
	cacheName := "targets/" + name
	if cached, err := u.readCache(cacheName); err != nil {
		return nil, err
	} else if cached != nil {
		if err := check(cached, "the cached "+name); err == nil {
			return cached, nil
		} else if !offline {
			u.warn(fmt.Sprintf("ignoring %s: %v", u.cachePath(cacheName), err))
		} else {
			return nil, err
		}
	}
	if offline {
		return nil, fmt.Errorf("no cached %s", name)
	}
	file := name
	if u.root.ConsistentSnapshot {
		dir, base := path.Split(name)
		file = dir + h + "." + base
	}
	url := u.url("targets/" + file)
	data, err := u.get(ctx, url, tf.Length)
	if err != nil {
		return nil, err
	}
	if err := check(data, url); err != nil {
		return nil, err
	}
	return data, u.writeCache(cacheName, data)
}

// checkTargetName refuses target names that are not plain relative paths
// (they become paths in the cache).
func checkTargetName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) || path.Clean(name) != name || name == "." || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("tuf: target name %q is not a relative path", name)
	}
	return nil
}
