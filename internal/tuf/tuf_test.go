package tuf

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/cjson"
)

func cached(t *testing.T, r *repo, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.cache, filepath.FromSlash(name)))
	if err != nil {
		t.Fatalf("the cache: %v", err)
	}
	return data
}

func cachedVersion(t *testing.T, r *repo, name string) int64 {
	t.Helper()
	var env struct {
		Signed struct {
			Version int64 `json:"version"`
		} `json:"signed"`
	}
	if err := json.Unmarshal(cached(t, r, name), &env); err != nil {
		t.Fatal(err)
	}
	return env.Signed.Version
}

// A first run starts from the initial root, walks the consistent-snapshot
// file names and caches everything; a second run downloads only what
// changed (the timestamp, and a probe for the next root).
func TestFirstFetchAndCache(t *testing.T) {
	r := newRepo(t)
	r.mustFetch()
	for _, f := range []string{"2.root.json", "timestamp.json", "1.snapshot.json", "1.targets.json"} {
		if r.hit(f) != 1 {
			t.Errorf("%s fetched %d times, want 1", f, r.hit(f))
		}
	}
	th := hashes(r.target)["sha256"].(string)
	if r.hit("targets/"+th+".trusted_root.json") != 1 || r.hit("targets/trusted_root.json") != 0 {
		t.Errorf("the target was not fetched by its consistent-snapshot name: %v", r.hits)
	}
	for _, f := range []string{"root.json", "timestamp.json", "snapshot.json", "targets.json"} {
		cached(t, r, f)
	}
	if !bytes.Equal(cached(t, r, "targets/trusted_root.json"), r.target) {
		t.Error("the cached target differs")
	}
	if len(r.warnings) != 0 {
		t.Errorf("warnings: %q", r.warnings)
	}

	r.mustFetch()
	if r.hit("timestamp.json") != 2 || r.hit("1.snapshot.json") != 1 || r.hit("1.targets.json") != 1 || r.hit("targets/"+th+".trusted_root.json") != 1 {
		t.Errorf("second run fetched more than the timestamp: %v", r.hits)
	}

	// A new target: the new metadata and the new target are fetched.
	r.target = []byte(`{"new": "trusted root"}`)
	r.publish(nil)
	r.mustFetch()
	if r.hit("2.snapshot.json") != 1 || r.hit("2.targets.json") != 1 || !bytes.Equal(cached(t, r, "targets/trusted_root.json"), r.target) {
		t.Errorf("the update was not fetched: %v", r.hits)
	}
}

func TestNotConsistentSnapshot(t *testing.T) {
	r := newRepo(t)
	r.consistent = false
	r.initialRoot = r.publishRoot(r.keys["root"]...)
	r.publish(nil)
	r.mustFetch()
	if r.hit("snapshot.json") != 1 || r.hit("targets.json") != 1 || r.hit("targets/trusted_root.json") != 1 {
		t.Errorf("plain names not fetched: %v", r.hits)
	}
}

// Two root rotations, threshold 2 of 3, each new root signed by two of the
// old root keys and two of its own; the second also rotates the timestamp
// key, which must void the cached timestamp (its version may go down).
func TestRootRotation(t *testing.T) {
	r := newRepo(t)
	r.version["timestamp"] = 40
	r.publish(nil)
	r.mustFetch()
	if v := cachedVersion(t, r, "timestamp.json"); v != 41 {
		t.Fatalf("cached timestamp version %d", v)
	}

	a := r.keys["root"]
	d := ecdsaTKey(t)
	r.keys["root"] = []*tkey{a[1], a[2], d}
	r.publishRoot(a[0], a[1], d) // old: a0, a1; new: a1, d

	b := r.keys["root"]
	e, f := ecdsaTKey(t), ecdsaTKey(t)
	r.keys["root"] = []*tkey{d, e, f}
	// The old timestamp key stays (so the cached timestamp still
	// verifies), a new one joins and signs from now on.
	newTS := ed25519TKey(t)
	r.keys["timestamp"] = []*tkey{r.keys["timestamp"][0], newTS}
	r.publishRoot(b[1], d, e, f) // old: a2, d; new: d, e, f

	r.version["timestamp"] = 0
	r.target = []byte(`{"after": "rotation"}`)
	r.publish(func(role string, _ map[string]any) []*tkey {
		if role == "timestamp" {
			return []*tkey{newTS}
		}
		return nil
	})
	r.mustFetch()
	if v := cachedVersion(t, r, "root.json"); v != 3 {
		t.Errorf("cached root version %d, want 3", v)
	}
	if v := cachedVersion(t, r, "timestamp.json"); v != 1 {
		t.Errorf("cached timestamp version %d, want 1", v)
	}
	if r.hit("4.root.json") != 1 {
		t.Errorf("4.root.json probed %d times", r.hit("4.root.json"))
	}
}

func TestRootRefused(t *testing.T) {
	cases := []struct {
		name string
		make func(r *repo)
		want []string
	}{
		{"too few old root keys", func(r *repo) {
			old := r.keys["root"]
			n := []*tkey{ecdsaTKey(t), ecdsaTKey(t), ecdsaTKey(t)}
			r.keys["root"] = n
			r.publishRoot(old[0], n[0], n[1])
		}, []string{"2.root.json (signed by the keys of the root it replaces)", "1 valid signature(s)", "2 required"}},
		{"too few own root keys", func(r *repo) {
			old := r.keys["root"]
			n := []*tkey{ecdsaTKey(t), ecdsaTKey(t), ecdsaTKey(t)}
			r.keys["root"] = n
			r.publishRoot(old[0], old[1], n[0])
		}, []string{"2.root.json (signed by its own root keys)", "1 valid signature(s)"}},
		{"skips a version", func(r *repo) {
			r.put("2.root.json", r.envelope(r.rootSigned(3), r.keys["root"]...))
		}, []string{"2.root.json holds root version 3, not 2"}},
		{"expired", func(r *repo) {
			r.expires["root"] = r.now.Add(-time.Minute)
			r.publishRoot(r.keys["root"]...)
		}, []string{"root metadata", "version 2", "expired"}},
		{"oversized", func(r *repo) {
			r.put("2.root.json", bytes.Repeat([]byte(" "), maxRootBytes+1))
		}, []string{"2.root.json", "more than the 524288 bytes"}},
		{"bad signature", func(r *repo) {
			r.publishRoot(r.keys["root"]...)
			data := r.get("2.root.json")
			var env map[string]any
			json.Unmarshal(data, &env)
			sigs := env["signatures"].([]any)
			for _, s := range sigs[1:] {
				s := s.(map[string]any)
				b, _ := hex.DecodeString(s["sig"].(string))
				b[len(b)-1] ^= 1
				s["sig"] = hex.EncodeToString(b)
			}
			data, _ = json.Marshal(env)
			r.put("2.root.json", data)
		}, []string{"2.root.json", "1 valid signature(s)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRepo(t)
			c.make(r)
			r.mustFail(c.want...)
			if _, err := os.Stat(filepath.Join(r.cache, "targets", "trusted_root.json")); err == nil {
				t.Error("the target was cached")
			}
			// An expired root is persisted before the expiry check (TUF
			// §5.3.8, §5.3.10); a root that fails a check before is not.
			if data, err := os.ReadFile(filepath.Join(r.cache, "root.json")); c.name != "expired" && (err != nil || !bytes.Equal(data, r.initialRoot)) {
				t.Error("a refused root was cached")
			}
		})
	}
}

// setRole changes a role's signed metadata in publish.
func setRole(role string, f func(map[string]any)) func(string, map[string]any) []*tkey {
	return func(ro string, signed map[string]any) []*tkey {
		if ro == role {
			f(signed)
		}
		return nil
	}
}

func TestMetadataRefused(t *testing.T) {
	past := testNow.Add(-time.Second)
	cases := []struct {
		name string
		make func(r *repo)
		want []string
	}{
		{"expired timestamp", func(r *repo) {
			r.expires["timestamp"] = past
			r.publish(nil)
		}, []string{"timestamp.json expired"}},
		{"expired snapshot", func(r *repo) {
			r.expires["snapshot"] = past
			r.publish(nil)
		}, []string{"2.snapshot.json expired"}},
		{"expired targets", func(r *repo) {
			r.expires["targets"] = testNow // expiring now is expired
			r.publish(nil)
		}, []string{"2.targets.json expired"}},
		{"snapshot version differs from the timestamp's", func(r *repo) {
			r.publish(nil)
			r.put("3.snapshot.json", r.get("2.snapshot.json"))
			r.put("timestamp.json", r.envelope(map[string]any{
				"_type": "timestamp", "spec_version": "1.0.31", "version": 3, "expires": expiry(r.expires["timestamp"]),
				"meta": map[string]any{"snapshot.json": map[string]any{"version": 3}},
			}, r.keys["timestamp"]...))
		}, []string{"3.snapshot.json is version 2, the timestamp names version 3"}},
		{"targets version differs from the snapshot's", func(r *repo) {
			r.metaHashes = false
			r.publish(setRole("snapshot", func(s map[string]any) { s["meta"] = map[string]any{"targets.json": map[string]any{"version": 3}} }))
			r.put("3.targets.json", r.get("2.targets.json"))
		}, []string{"3.targets.json is version 2, the snapshot names version 3"}},
		{"snapshot hash differs from the timestamp's", func(r *repo) {
			r.publish(nil)
			r.put("2.snapshot.json", append(r.get("2.snapshot.json")[:len(r.get("2.snapshot.json"))-1], ' '))
		}, []string{"2.snapshot.json has sha", "the metadata says"}},
		{"target hash differs", func(r *repo) {
			th := hashes(r.target)["sha256"].(string)
			bad := bytes.ToUpper(r.target)
			r.put("targets/"+th+".trusted_root.json", bad)
		}, []string{".trusted_root.json has sha", "the metadata says"}},
		{"target shorter", func(r *repo) {
			th := hashes(r.target)["sha256"].(string)
			r.put("targets/"+th+".trusted_root.json", r.target[1:])
		}, []string{"bytes, the targets metadata says"}},
		{"target longer", func(r *repo) {
			th := hashes(r.target)["sha256"].(string)
			r.put("targets/"+th+".trusted_root.json", append(append([]byte{}, r.target...), ' '))
		}, []string{".trusted_root.json: ", "more than the 74 bytes allowed"}},
		{"oversized timestamp", func(r *repo) {
			r.publish(setRole("timestamp", func(s map[string]any) { s["x-padding"] = strings.Repeat("x", maxTimestampBytes) }))
		}, []string{"timestamp.json: ", "more than the 65536 bytes allowed"}},
		{"bad timestamp signature", func(r *repo) {
			r.publish(nil)
			data := r.get("timestamp.json")
			r.put("timestamp.json", bytes.Replace(data, []byte(`"version": 2`), []byte(`"version": 3`), 1))
		}, []string{"timestamp.json: 0 valid signature(s) by the timestamp role's keys", "1 required"}},
		{"one key's signature twice", func(r *repo) {
			k := r.keys["targets"][0]
			r.publish(func(role string, _ map[string]any) []*tkey {
				if role == "targets" {
					return []*tkey{k, k}
				}
				return nil
			})
		}, []string{"2.targets.json: 1 valid signature(s) by the targets role's keys", "2 required"}},
		{"one key under two ids", func(r *repo) {
			// The root lists targets key 0 again under another id: it
			// still counts once.
			k := r.keys["targets"][0]
			r.signTargetsWith(&tkey{id: strings.Repeat("ab", 32), obj: k.obj, sign: k.sign})
		}, []string{"2.targets.json: 1 valid signature(s)"}},
		{"a key of an unknown type", func(r *repo) {
			k := r.keys["targets"][0]
			r.signTargetsWith(&tkey{id: strings.Repeat("cd", 32), obj: map[string]any{"keytype": "unknown", "scheme": "x", "keyval": map[string]any{"public": "x"}}, sign: k.sign})
		}, []string{"2.targets.json: 1 valid signature(s)"}},
		{"a signature by a key of another role", func(r *repo) {
			r.publish(func(role string, _ map[string]any) []*tkey {
				if role == "targets" {
					return []*tkey{r.keys["targets"][0], r.keys["root"][0]}
				}
				return nil
			})
		}, []string{"2.targets.json: 1 valid signature(s)"}},
		{"timestamp signed as the wrong role", func(r *repo) {
			r.publish(setRole("timestamp", func(s map[string]any) { s["_type"] = "snapshot" }))
		}, []string{`metadata of type "snapshot" where timestamp metadata belongs`}},
		{"delegated target", func(r *repo) {
			r.publish(setRole("targets", func(s map[string]any) {
				s["targets"] = map[string]any{}
				s["delegations"] = map[string]any{"keys": map[string]any{}, "roles": []any{map[string]any{"name": "other", "keyids": []any{}, "threshold": 1, "paths": []any{"*"}, "terminating": true}}}
			}))
		}, []string{"trusted_root.json is not listed by the top-level targets metadata", "delegat"}},
		{"no such target", func(r *repo) {
			r.publish(setRole("targets", func(s map[string]any) { s["targets"] = map[string]any{} }))
		}, []string{"trusted_root.json is not in the TUF repository"}},
		{"a floating-point number", func(r *repo) {
			r.publish(nil)
			r.put("timestamp.json", bytes.Replace(r.get("timestamp.json"), []byte(`"_type"`), []byte(`"x-float": 1.5, "_type"`), 1))
		}, []string{"canonical JSON"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRepo(t)
			c.make(r)
			r.mustFail(c.want...)
			if _, err := os.Stat(filepath.Join(r.cache, "targets", "trusted_root.json")); err == nil {
				t.Error("the target was cached")
			}
		})
	}
}

func TestRollbackRefused(t *testing.T) {
	for _, c := range []struct {
		name, role, want string
	}{
		{"timestamp version", "timestamp", "timestamp.json is version 1, older than the trusted version 2"},
		{"snapshot version in the timestamp", "snapshot", "names snapshot version 1, older than the trusted timestamp's 2"},
		{"targets version in the snapshot", "targets", "3.snapshot.json names targets.json version 1, older than the trusted snapshot's 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRepo(t)
			r.publish(nil)
			r.mustFetch()
			r.version[c.role] = 0
			r.publish(nil)
			r.mustFail(c.want, "rollback")
		})
	}
}

// With the mirror down, unexpired cached metadata and a target that
// matches them stand in, and say so; expired ones do not.
func TestCacheWhenMirrorIsDown(t *testing.T) {
	r := newRepo(t)
	r.mustFetch()
	r.srv.Close()
	r.mustFetch()
	if len(r.warnings) != 1 || !strings.Contains(r.warnings[0], "using the verified TUF metadata cached in") || !strings.Contains(r.warnings[0], "valid until 2026-06-08T12:00:00Z") {
		t.Errorf("warnings: %q", r.warnings)
	}

	r.now = testNow.Add(8 * 24 * time.Hour)
	r.mustFail("cannot stand in", "expired")
}

func TestCorruptCacheNotTrusted(t *testing.T) {
	flip := func(t *testing.T, r *repo, name string) {
		p := filepath.Join(r.cache, filepath.FromSlash(name))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(data, []byte(`"expires": "2026`)); i >= 0 {
			data[i+len(`"expires": "2026`)-1] = '7' // in what is signed
		} else {
			data[len(data)/2] ^= 0x20
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"targets/trusted_root.json", "timestamp.json", "snapshot.json", "targets.json", "root.json"} {
		t.Run(name, func(t *testing.T) {
			r := newRepo(t)
			r.mustFetch()
			flip(t, r, name)
			r.srv.Close()
			_, err := r.fetch()
			if name == "root.json" {
				// The initial root stands in for a corrupt cached one.
				if err != nil {
					t.Fatalf("with the initial root: %v", err)
				}
				if len(r.warnings) == 0 || !strings.Contains(r.warnings[0], "ignoring the cached") {
					t.Errorf("warnings: %q", r.warnings)
				}
				return
			}
			if err == nil {
				t.Fatal("a corrupt cache was used")
			}
			if !strings.Contains(err.Error(), "cannot stand in") {
				t.Errorf("error: %v", err)
			}
		})
		t.Run(name+" refetched", func(t *testing.T) {
			r := newRepo(t)
			r.mustFetch()
			flip(t, r, name)
			r.mustFetch()
			if !bytes.Equal(cached(t, r, "targets/trusted_root.json"), r.target) {
				t.Error("the cached target was not repaired")
			}
		})
	}
}

func TestCacheUnwritable(t *testing.T) {
	r := newRepo(t)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	r.cache = filepath.Join(file, "cache")
	r.mustFail("the TUF cache", "set $TUF_ROOT to a writable directory")
}

func TestTargetName(t *testing.T) {
	for _, n := range []string{"", "/etc/passwd", "../x", "a/../../x", `a\b`, ".", "a//b"} {
		if _, err := Target(t.Context(), Options{Mirror: "http://127.0.0.1:1", Root: []byte("{}"), CacheDir: t.TempDir()}, n); err == nil || !strings.Contains(err.Error(), "not a relative path") {
			t.Errorf("%q: %v", n, err)
		}
	}
}

func TestCanonical(t *testing.T) {
	canonical := func(raw []byte) ([]byte, error) {
		v, err := decode(raw)
		if err != nil {
			return nil, err
		}
		return cjson.EncodeCanonical(v)
	}
	got, err := canonical([]byte(`{"b": 1, "a": ["x\"y\\z\n", true, null, "<&>"], "c": {"z": -2, "y": "é"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"a\":[\"x\\\"y\\\\z\n\",true,null,\"<&>\"],\"b\":1,\"c\":{\"y\":\"é\",\"z\":-2}}"
	if string(got) != want {
		t.Errorf("canonical: %s, want %s", got, want)
	}
	if _, err := canonical([]byte(`{"version": 1, "Version": 2}`)); err == nil {
		t.Error("keys differing in case accepted")
	}
	if _, err := canonical([]byte(`{"a": 1.5}`)); err == nil {
		t.Error("a float accepted")
	}
}
