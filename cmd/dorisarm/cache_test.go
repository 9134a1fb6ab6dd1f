package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/sign"
	"github.com/dorisarm/dorisarm/internal/testproc"
)

type cacheRecord struct {
	Cache struct {
		Hits, Misses []string
		Pulled       []struct{ Step, Artifact, Signer string }
		Pushed       int
	}
	Outputs []struct{ Path, SHA256 string }
}

func readRecord(t *testing.T, out, target string) cacheRecord {
	t.Helper()
	var rec cacheRecord
	b, err := os.ReadFile(filepath.Join(out, "2.1.8", target, "dorisarm-build.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil {
		t.Fatalf("build record: %v", err)
	}
	return rec
}

// TestRegistryCache: a cold build offers every step to a docker-registry
// (--cache-to), each entry signed with a cosign key; a build on another,
// empty cache directory restores every step from it (--cache-from,
// verified against the public key) and runs no compiler, publishing the
// same files, and its record names each pulled step's artifact and
// signer; `cache pull` fills a third cache; a files.tar altered in the
// registry's storage is refused and its step runs again; a self-consistent
// entry planted unsigned under build:be's key (what anyone who can push to
// the repository can do) is refused for its signature and the step runs.
func TestRegistryCache(t *testing.T) {
	slow(t, "builds with real compilers against a real docker-registry")
	needBuildTools(t)
	addr, storage := testproc.RegistryStorage(t)
	repo := addr + "/dorisarm/cache"
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "pw")
	priv, pub, err := sign.Keygen(filepath.Join(dir, "keys"), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	// Without a trust setting a shared cache is not used at all.
	for _, args := range [][]string{
		{"build", "--target", "graviton2", "--out", filepath.Join(dir, "x"), "--cache-from", repo},
		{"build", "--target", "graviton2", "--out", filepath.Join(dir, "x"), "--cache-to", repo},
		{"cache", "pull", "--repo", repo, "--cache", filepath.Join(dir, "x")},
		{"cache", "push", "--repo", repo, "--cache", filepath.Join(dir, "x")},
	} {
		if _, errOut, code := run(t, args...); code != 2 || !strings.Contains(errOut, "--cache-trust-unsigned") {
			t.Errorf("%v: exit %d %s, want 2 and what to pass", args, code, errOut)
		}
	}
	build := func(cache, out string, extra ...string) cacheRecord {
		t.Helper()
		args := append([]string{"build", "--target", "graviton2", "--compiler", "clang", "--out", filepath.Join(dir, out), "--cache", filepath.Join(dir, cache)}, extra...)
		if stdout, errOut, code := run(t, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, errOut)
		}
		return readRecord(t, filepath.Join(dir, out), "graviton2")
	}
	cold := build("a", "out-a", "--cache-to", repo, "--cache-sign-key", priv)
	if len(cold.Cache.Hits) != 0 || cold.Cache.Pushed != len(cold.Cache.Misses) || cold.Cache.Pushed == 0 {
		t.Fatalf("cold build: %+v", cold.Cache)
	}
	warm := build("b", "out-b", "--cache-from", repo, "--cache-verify-key", pub)
	if len(warm.Cache.Misses) != 0 || len(warm.Cache.Pulled) != len(cold.Cache.Misses) {
		t.Errorf("build from the registry: misses %v, pulled %d of %d", warm.Cache.Misses, len(warm.Cache.Pulled), len(cold.Cache.Misses))
	}
	for _, p := range warm.Cache.Pulled {
		if p.Step == "" || !strings.HasPrefix(p.Artifact, repo+"@sha256:") || !strings.HasPrefix(p.Signer, "key sha256:") {
			t.Errorf("pulled step recorded as %+v", p)
		}
	}
	if logs := compilerLogs(filepath.Join(dir, "a")); len(logs) == 0 {
		t.Error("the cold build left no compiler log: the check below would prove nothing")
	}
	if logs := compilerLogs(filepath.Join(dir, "b")); len(logs) != 0 {
		t.Errorf("a compiler ran in the build from the registry: %v", logs)
	}
	if len(warm.Outputs) != len(cold.Outputs) {
		t.Fatalf("outputs: %d vs %d", len(warm.Outputs), len(cold.Outputs))
	}
	for i := range warm.Outputs {
		if warm.Outputs[i] != cold.Outputs[i] {
			t.Errorf("output %s differs from the cold build's", warm.Outputs[i].Path)
		}
	}

	stdout, errOut, code := run(t, "cache", "pull", "--repo", repo, "--cache", filepath.Join(dir, "c"), "--cache-verify-key", pub)
	if code != 0 || !strings.HasPrefix(stdout, "pulled ") || strings.HasPrefix(stdout, "pulled 0 ") {
		t.Errorf("cache pull: exit %d %s%s", code, stdout, errOut)
	}
	// Again as JSON (nothing new to pull), and a push of what is there
	// (all of it already in the registry): lists that may be empty.
	if _, errOut, code := run(t, "cache", "pull", "--repo", repo, "--cache", filepath.Join(dir, "c"), "--cache-verify-key", pub, "-o", "json"); code != 0 {
		t.Errorf("cache pull -o json: exit %d %s", code, errOut)
	}
	if _, errOut, code := run(t, "cache", "push", "--repo", repo, "--cache", filepath.Join(dir, "c"), "--cache-sign-key", priv, "-o", "json"); code != 0 {
		t.Errorf("cache push -o json: exit %d %s", code, errOut)
	}

	// Alter the largest files.tar in the registry's storage.
	var biggest string
	var size int64
	filepath.Walk(filepath.Join(storage, "docker/registry/v2/blobs"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Size() > size {
			biggest, size = p, fi.Size()
		}
		return nil
	})
	data, _ := os.ReadFile(biggest)
	for i := 0; i < 16; i++ {
		data[len(data)/2+i] ^= 0xff
	}
	os.WriteFile(biggest, data, 0o644)
	stdout, errOut, code = run(t, "build", "--target", "graviton2", "--out", filepath.Join(dir, "out-d"), "--cache", filepath.Join(dir, "d"), "--cache-from", repo, "--cache-verify-key", pub)
	if code != 0 || !strings.Contains(errOut, "refused") {
		t.Fatalf("build with an altered registry entry: exit %d\n%s%s", code, stdout, errOut)
	}
	rec := readRecord(t, filepath.Join(dir, "out-d"), "graviton2")
	if len(rec.Cache.Misses) == 0 || len(rec.Cache.Misses)+len(rec.Cache.Pulled) != len(cold.Cache.Misses) {
		t.Errorf("after the altered entry: misses %v, pulled %v; cold misses %v hits %v; d hits %v", rec.Cache.Misses, rec.Cache.Pulled, cold.Cache.Misses, cold.Cache.Hits, rec.Cache.Hits)
	}
	for i := range rec.Outputs {
		if rec.Outputs[i] != cold.Outputs[i] {
			t.Errorf("output %s differs from the cold build's", rec.Outputs[i].Path)
		}
	}

	// Plant: build:be's entry with bytes added to doris_be, made
	// self-consistent (meta.json names the step's own key, files.tar its
	// digest) and pushed unsigned over the signed one's tag.
	plantBE(t, filepath.Join(dir, "a"), filepath.Join(dir, "planted"))
	if _, errOut, code := run(t, "cache", "push", "--repo", repo, "--cache", filepath.Join(dir, "planted"), "--cache-trust-unsigned"); code != 0 {
		t.Fatalf("planting: exit %d %s", code, errOut)
	}
	stdout, errOut, code = run(t, "build", "--target", "graviton2", "--out", filepath.Join(dir, "out-e"), "--cache", filepath.Join(dir, "e"), "--cache-from", repo, "--cache-verify-key", pub)
	if code != 0 || !strings.Contains(errOut, "signature") || !strings.Contains(errOut, "build:be") {
		t.Fatalf("build with a planted entry: exit %d\n%s%s", code, stdout, errOut)
	}
	rec = readRecord(t, filepath.Join(dir, "out-e"), "graviton2")
	if !slices.Contains(rec.Cache.Misses, "build:be") {
		t.Errorf("build:be was not run after its planted entry was refused: misses %v", rec.Cache.Misses)
	}
	// (A step that runs in another cache directory compiles at another
	// path, so the published doris_be is judged by the planted bytes.)
	planted := func(out string) bool {
		b, err := os.ReadFile(filepath.Join(dir, out, "2.1.8", "graviton2", "be", "lib", "doris_be"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.HasSuffix(string(b), "planted")
	}
	if planted("out-e") {
		t.Error("the planted doris_be was published by a build that verifies the cache's signatures")
	}
	// Taking unsigned entries is the user's explicit choice, and then the
	// planted one is what comes.
	stdout, errOut, code = run(t, "build", "--target", "graviton2", "--out", filepath.Join(dir, "out-f"), "--cache", filepath.Join(dir, "f"), "--cache-from", repo, "--cache-trust-unsigned")
	if code != 0 {
		t.Fatalf("build trusting unsigned entries: exit %d\n%s%s", code, stdout, errOut)
	}
	rec = readRecord(t, filepath.Join(dir, "out-f"), "graviton2")
	if slices.Contains(rec.Cache.Misses, "build:be") || !planted("out-f") {
		t.Error("with --cache-trust-unsigned the planted entry was not taken: the refusal above proves nothing")
	}

	// Plant a link chain under build:be's key: a/b/u -> .. then
	// a/passwd -> b/u/../../etc/passwd, each link harmless read alone.
	// Even taken unsigned, the pulled entry is refused for the link, by
	// name, and the step runs: no such link is restored into the tree.
	plantLinkChain(t, filepath.Join(dir, "a"), filepath.Join(dir, "chain"))
	if _, errOut, code := run(t, "cache", "push", "--repo", repo, "--cache", filepath.Join(dir, "chain"), "--cache-trust-unsigned"); code != 0 {
		t.Fatalf("planting the link chain: exit %d %s", code, errOut)
	}
	stdout, errOut, code = run(t, "build", "--target", "graviton2", "--out", filepath.Join(dir, "out-g"), "--cache", filepath.Join(dir, "g"), "--cache-from", repo, "--cache-trust-unsigned")
	if code != 0 || !strings.Contains(errOut, "a/passwd") {
		t.Fatalf("build with a planted link chain: exit %d, want 0 and a refusal naming a/passwd\n%s%s", code, stdout, errOut)
	}
	rec = readRecord(t, filepath.Join(dir, "out-g"), "graviton2")
	if !slices.Contains(rec.Cache.Misses, "build:be") {
		t.Errorf("build:be was not run after the link chain was refused: misses %v", rec.Cache.Misses)
	}
	if _, err := os.Lstat(filepath.Join(dir, "g", "work")); err == nil {
		filepath.Walk(filepath.Join(dir, "g", "work"), func(p string, fi os.FileInfo, err error) error {
			if err == nil && strings.HasSuffix(p, "/a/passwd") {
				t.Errorf("the planted link %s was restored", p)
			}
			return nil
		})
	}
}

// plantLinkChain writes into a new cache dst an entry under the key of the
// cache src's build:be whose files.tar holds a link chain out of the tree,
// self-consistent (meta.json names the key, the tar's digest and size).
func plantLinkChain(t *testing.T, src, dst string) {
	t.Helper()
	sc := &build.Cache{Dir: src}
	ents, err := sc.Entries()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		m, ok := sc.Get(e.Key)
		if !ok || m.Step != "build:be" {
			continue
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range []*tar.Header{
			{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: "a/b/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: "a/b/u", Typeflag: tar.TypeSymlink, Linkname: ".."},
			{Name: "a/passwd", Typeflag: tar.TypeSymlink, Linkname: "b/u/../../etc/passwd"},
		} {
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
		}
		tw.Close()
		sum := sha256.Sum256(buf.Bytes())
		ed := (&build.Cache{Dir: dst}).EntryDir(m.Key)
		if err := os.MkdirAll(ed, 0o755); err != nil {
			t.Fatal(err)
		}
		meta, _ := json.Marshal(build.Meta{Key: m.Key, Step: m.Step, Files: 4, TarSHA256: "sha256:" + hex.EncodeToString(sum[:]), TarSize: int64(buf.Len()), Seconds: 1})
		os.WriteFile(filepath.Join(ed, "files.tar"), buf.Bytes(), 0o644)
		os.WriteFile(filepath.Join(ed, "meta.json"), meta, 0o644)
		// The attacker's own cache: it marks the entry as a build step's,
		// so cache push offers it.
		os.WriteFile(filepath.Join(ed, "built"), nil, 0o644)
		return
	}
	t.Fatal("no build:be entry in the cold build's cache")
}

// plantBE copies build:be's entry from the cache src into a new cache dst
// with bytes appended to every file under be/lib, as a self-consistent
// entry of the same key.
func plantBE(t *testing.T, src, dst string) {
	t.Helper()
	sc, dc := &build.Cache{Dir: src}, &build.Cache{Dir: dst}
	if err := dc.Init(); err != nil {
		t.Fatal(err)
	}
	ents, err := sc.Entries()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		m, ok := sc.Get(e.Key)
		if !ok || m.Step != "build:be" {
			continue
		}
		tree := t.TempDir()
		if err := sc.Restore(e.Key, tree, m); err != nil {
			t.Fatal(err)
		}
		var paths []string
		filepath.Walk(tree, func(p string, fi os.FileInfo, err error) error {
			if err != nil || p == tree {
				return err
			}
			rel, _ := filepath.Rel(tree, p)
			paths = append(paths, rel)
			if fi.Mode().IsRegular() && strings.Contains(rel, "be/lib/") {
				f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
				f.WriteString("planted")
				f.Close()
			}
			return nil
		})
		if err := dc.Put(build.Meta{Key: m.Key, Step: m.Step, Deleted: m.Deleted, Seconds: m.Seconds}, tree, paths); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("no build:be entry in the cold build's cache")
}

// compilerLogs are the compiler logs under a cache that a compile wrote
// to (the toolchain step makes them empty, for the sandbox to show).
func compilerLogs(cache string) []string {
	var out []string
	logs, _ := filepath.Glob(filepath.Join(cache, "work", "*", "logs", "compiler-*.log"))
	for _, l := range logs {
		if st, err := os.Stat(l); err == nil && st.Size() > 0 {
			out = append(out, l)
		}
	}
	return out
}
