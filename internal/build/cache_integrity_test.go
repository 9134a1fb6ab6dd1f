package build

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// putTree stores the files of tree under key and returns the entry's directory.
func putTree(t *testing.T, c *Cache, key, tree string, files, deleted []string) string {
	t.Helper()
	if err := c.Put(Meta{Key: key, Step: "step:" + key, Deleted: deleted}, tree, files); err != nil {
		t.Fatal(err)
	}
	return c.entry(key)
}

func newCache(t *testing.T) *Cache {
	t.Helper()
	c := &Cache{Dir: t.TempDir()}
	if err := c.Init(); err != nil {
		t.Fatal(err)
	}
	return c
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCacheRoundTrip: files, a relative link and a deletion come back
// exactly; meta.json records the digest and size of files.tar.
func TestCacheRoundTrip(t *testing.T) {
	c := newCache(t)
	src := t.TempDir()
	write(t, filepath.Join(src, "lib/libx.so.1"), "ELF")
	if err := os.Symlink("libx.so.1", filepath.Join(src, "lib/libx.so")); err != nil {
		t.Fatal(err)
	}
	dir := putTree(t, c, "k1", src, []string{"lib", "lib/libx.so.1", "lib/libx.so"}, []string{"old/gone"})
	m, ok := c.Get("k1")
	if !ok {
		t.Fatal("no entry after Put")
	}
	data, _ := os.ReadFile(filepath.Join(dir, "files.tar"))
	sum := sha256.Sum256(data)
	if m.TarSHA256 != "sha256:"+hex.EncodeToString(sum[:]) || m.TarSize != int64(len(data)) {
		t.Fatalf("meta %s/%d, files.tar %x/%d", m.TarSHA256, m.TarSize, sum, len(data))
	}
	dst := t.TempDir()
	write(t, filepath.Join(dst, "old/gone"), "x")
	if err := c.Restore("k1", dst, m); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "lib/libx.so")); err != nil || string(b) != "ELF" {
		t.Errorf("restored link: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "old/gone")); !os.IsNotExist(err) {
		t.Errorf("deleted path still there: %v", err)
	}
}

// TestCorruptEntryRefused: 16 bytes flipped inside files.tar, a truncated
// files.tar, or an entry without a digest are refused as corrupt before
// the tree changes.
func TestCorruptEntryRefused(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "be/lib/doris_be"), string(bytes.Repeat([]byte("code"), 4096)))
	for name, spoil := range map[string]func(dir string){
		"flipped": func(dir string) {
			p := filepath.Join(dir, "files.tar")
			data, _ := os.ReadFile(p)
			for i := 0; i < 16; i++ {
				data[len(data)/2+i] ^= 0xff
			}
			os.WriteFile(p, data, 0o644)
		},
		"truncated": func(dir string) {
			p := filepath.Join(dir, "files.tar")
			data, _ := os.ReadFile(p)
			os.WriteFile(p, data[:len(data)-1024], 0o644)
		},
		"no digest": func(dir string) {
			p := filepath.Join(dir, "meta.json")
			var m map[string]any
			data, _ := os.ReadFile(p)
			json.Unmarshal(data, &m)
			delete(m, "tar_sha256")
			data, _ = json.Marshal(m)
			os.WriteFile(p, data, 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCache(t)
			spoil(putTree(t, c, "k", src, []string{"be/lib/doris_be"}, []string{"keep"}))
			m, ok := c.Get("k")
			if !ok {
				t.Fatal("entry not found")
			}
			dst := t.TempDir()
			write(t, filepath.Join(dst, "keep"), "still here")
			err := c.Restore("k", dst, m)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Restore of a %s entry: %v, want a CorruptError", name, err)
			}
			if _, err := os.Stat(filepath.Join(dst, "keep")); err != nil {
				t.Errorf("the tree changed before the entry was refused: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dst, "be")); !os.IsNotExist(err) {
				t.Errorf("a corrupt entry wrote into the tree: %v", err)
			}
			if err := c.Discard("k"); err != nil {
				t.Fatal(err)
			}
			if _, ok := c.Get("k"); ok {
				t.Error("the discarded entry is still there")
			}
		})
	}
}

// plant writes an entry the way an attacker with write access to the cache
// would: a consistent files.tar and meta.json with whatever paths they like.
func plant(t *testing.T, c *Cache, key string, deleted []string, entries ...*tar.Header) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len("pwned"))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte("pwned"))
		}
	}
	tw.Close()
	sum := sha256.Sum256(buf.Bytes())
	dir := c.entry(key)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "files.tar"), buf.Bytes(), 0o644)
	m, _ := json.Marshal(Meta{Key: key, Deleted: deleted, TarSHA256: "sha256:" + hex.EncodeToString(sum[:]), TarSize: int64(buf.Len())})
	os.WriteFile(filepath.Join(dir, "meta.json"), m, 0o644)
}

// TestPoisonedEntryStaysInTree: an entry with a correct digest that links
// out of the tree and writes through the link, climbs out with "..", or
// deletes outside the tree is refused, and nothing outside changes. A link
// out of the tree that a step itself left behind is not followed either.
func TestPoisonedEntryStaysInTree(t *testing.T) {
	outside := t.TempDir()
	write(t, filepath.Join(outside, "victim"), "precious")
	cases := map[string]struct {
		deleted []string
		entries []*tar.Header
	}{
		"absolute link then write through it": {entries: []*tar.Header{
			{Typeflag: tar.TypeSymlink, Name: "lib", Linkname: outside},
			{Typeflag: tar.TypeReg, Name: "lib/victim", Mode: 0o644},
		}},
		"relative link out of the tree": {entries: []*tar.Header{
			{Typeflag: tar.TypeSymlink, Name: "a/b", Linkname: "../../" + filepath.Base(outside)},
		}},
		// Lexically a/b/u/../../victim is a/victim; through the links the
		// kernel reads a/b/u as a, then the root, then outside.
		"link chain": {entries: []*tar.Header{
			{Typeflag: tar.TypeDir, Name: "a/b/", Mode: 0o755},
			{Typeflag: tar.TypeSymlink, Name: "a/b/u", Linkname: ".."},
			{Typeflag: tar.TypeSymlink, Name: "a/p", Linkname: "b/u/../../" + filepath.Base(outside)},
		}},
		// The same chain through a link the tree already has (preexisting).
		"link chain through the tree": {entries: []*tar.Header{
			{Typeflag: tar.TypeSymlink, Name: "pre/p", Linkname: "u/../../" + filepath.Base(outside)},
		}},
		// A deleted directory that the entry puts back as a link.
		"deleted dir made a link": {deleted: []string{"pre"}, entries: []*tar.Header{
			{Typeflag: tar.TypeSymlink, Name: "pre", Linkname: "."},
			{Typeflag: tar.TypeSymlink, Name: "q", Linkname: "pre/../" + filepath.Base(outside)},
		}},
		"dot-dot name":    {entries: []*tar.Header{{Typeflag: tar.TypeReg, Name: "x/../../victim", Mode: 0o644}}},
		"absolute name":   {entries: []*tar.Header{{Typeflag: tar.TypeReg, Name: filepath.Join(outside, "victim"), Mode: 0o644}}},
		"hard link":       {entries: []*tar.Header{{Typeflag: tar.TypeLink, Name: "h", Linkname: filepath.Join(outside, "victim")}}},
		"device":          {entries: []*tar.Header{{Typeflag: tar.TypeChar, Name: "zero", Devmajor: 1, Devminor: 5}}},
		"delete outside":  {deleted: []string{"../" + filepath.Base(outside) + "/victim"}},
		"delete absolute": {deleted: []string{filepath.Join(outside, "victim")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newCache(t)
			tree := filepath.Join(filepath.Dir(outside), "tree-"+filepath.Base(t.TempDir()))
			os.MkdirAll(filepath.Join(tree, "pre"), 0o755)
			os.Symlink("..", filepath.Join(tree, "pre", "u")) // pre/u is the root
			defer os.RemoveAll(tree)
			plant(t, c, "k", tc.deleted, tc.entries...)
			m, ok := c.Get("k")
			if !ok {
				t.Fatal("planted entry not found")
			}
			err := c.Restore("k", tree, m)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Errorf("Restore: %v, want a CorruptError", err)
			}
			if _, err := os.Lstat(filepath.Join(tree, "a")); err == nil {
				t.Error("the tree was changed before the entry was refused")
			}
			if b, err := os.ReadFile(filepath.Join(outside, "victim")); err != nil || string(b) != "precious" {
				t.Errorf("outside the tree: %q %v", b, err)
			}
		})
	}

	// A link out of the tree already in the tree (left by a step): a
	// restore that writes below it does not follow it.
	c := newCache(t)
	tree := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(tree, "lib")); err != nil {
		t.Fatal(err)
	}
	plant(t, c, "k", nil, &tar.Header{Typeflag: tar.TypeReg, Name: "lib/victim", Mode: 0o644})
	m, _ := c.Get("k")
	if err := c.Restore("k", tree, m); err == nil {
		t.Error("a restore wrote through a link that leaves the tree")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "victim")); string(b) != "precious" {
		t.Errorf("the file outside the tree was overwritten: %q", b)
	}
}

// TestPutRefusesLinksOut: a step whose result links out of the tree is not
// cached (the build goes on; the step runs again next time).
func TestPutRefusesLinksOut(t *testing.T) {
	c := newCache(t)
	tree := t.TempDir()
	if err := os.Symlink("/usr/lib", filepath.Join(tree, "abs")); err != nil {
		t.Fatal(err)
	}
	err := c.Put(Meta{Key: "k"}, tree, []string{"abs"})
	var ue *UncacheableError
	if !errors.As(err, &ue) {
		t.Fatalf("Put of a link to /usr/lib: %v, want an UncacheableError", err)
	}
	if _, ok := c.Get("k"); ok {
		t.Error("the uncacheable result was stored")
	}
	// A link chain that leaves the tree only through another link.
	os.MkdirAll(filepath.Join(tree, "a", "b"), 0o755)
	os.Symlink("..", filepath.Join(tree, "a", "b", "u"))
	os.Symlink("b/u/../../etc", filepath.Join(tree, "a", "p"))
	if err := c.Put(Meta{Key: "k2"}, tree, []string{"a/b/u", "a/p"}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "a/p -> b/u/../../etc climbs above") {
		t.Errorf("Put of a link chain out of the tree: %v, want an UncacheableError naming a/p", err)
	}
	// A FIFO a step left: no entry (a restore would refuse it, and a
	// reader of it would block).
	if err := syscall.Mkfifo(filepath.Join(tree, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(Meta{Key: "k3"}, tree, []string{"fifo"}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "fifo") {
		t.Errorf("Put of a FIFO: %v, want an UncacheableError naming it", err)
	}
	for _, key := range []string{"", "../x", ".tmp-x", "a/b"} {
		if err := c.Put(Meta{Key: key}, tree, nil); err == nil {
			t.Errorf("Put accepted the key %q", key)
		}
		if _, ok := c.Get(key); ok {
			t.Errorf("Get accepted the key %q", key)
		}
	}
}

// TestEmptyDirectoriesCached: a step's empty directories are part of its
// result (grpc 1.54.3's archive has empty submodule directories, and its
// CMake downloads into any that are missing): the snapshot diff names them,
// the cache stores them, a restore makes them. A directory that was empty
// and now holds a file is not deleted. An unpack entry written before the
// cache recorded directories is a miss, not a result without them.
func TestEmptyDirectoriesCached(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "thirdparty/src/grpc/CMakeLists.txt"), "project(grpc)")
	before, err := takeSnapshot(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"thirdparty/src/grpc/third_party/xds", "thirdparty/src/grpc/third_party/envoy-api"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	after, err := takeSnapshot(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	changed, deleted := diff(before, after)
	want := []string{"thirdparty/src/grpc/third_party/envoy-api", "thirdparty/src/grpc/third_party/xds"}
	if strings.Join(changed, " ") != strings.Join(want, " ") || len(deleted) != 0 {
		t.Fatalf("diff: changed %v deleted %v, want changed %v", changed, deleted, want)
	}
	c := newCache(t)
	if err := c.Put(Meta{Key: "u1", Step: "unpack:GRPC"}, src, changed); err != nil {
		t.Fatal(err)
	}
	m, ok := c.Get("u1")
	if !ok || !m.Dirs {
		t.Fatalf("Get: %+v %v", m, ok)
	}
	dst := t.TempDir()
	if err := c.Restore("u1", dst, m); err != nil {
		t.Fatal(err)
	}
	for _, d := range want {
		if st, err := os.Stat(filepath.Join(dst, d)); err != nil || !st.IsDir() {
			t.Errorf("%s not restored: %v", d, err)
		}
	}

	// Filling an empty directory is a new file, not a deletion.
	write(t, filepath.Join(src, "thirdparty/src/grpc/third_party/xds/BUILD"), "x")
	filled, err := takeSnapshot(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	changed, deleted = diff(after, filled)
	if strings.Join(changed, " ") != "thirdparty/src/grpc/third_party/xds/BUILD" || len(deleted) != 0 {
		t.Errorf("filling xds: changed %v deleted %v", changed, deleted)
	}
	// Removing one is a deletion.
	os.Remove(filepath.Join(src, "thirdparty/src/grpc/third_party/envoy-api"))
	gone, _ := takeSnapshot(src, nil)
	if _, deleted = diff(filled, gone); strings.Join(deleted, " ") != "thirdparty/src/grpc/third_party/envoy-api" {
		t.Errorf("removing envoy-api: deleted %v", deleted)
	}

	// An entry without the marker: a miss for an unpack step only.
	for step, hit := range map[string]bool{"unpack:GRPC": false, "thirdparty:GRPC": true} {
		key := strings.NewReplacer(":", "-").Replace(step)
		if err := c.Put(Meta{Key: key, Step: step}, src, []string{"thirdparty/src/grpc/CMakeLists.txt"}); err != nil {
			t.Fatal(err)
		}
		meta := filepath.Join(c.EntryDir(key), "meta.json")
		data, _ := os.ReadFile(meta)
		old := strings.Replace(string(data), `"dirs": true`, `"seconds": 0`, 1)
		if old == string(data) {
			t.Fatalf("meta.json has no dirs marker: %s", data)
		}
		os.WriteFile(meta, []byte(old), 0o644)
		if _, ok := c.Get(key); ok != hit {
			t.Errorf("%s entry without the marker: hit %v, want %v", step, ok, hit)
		}
	}
}
