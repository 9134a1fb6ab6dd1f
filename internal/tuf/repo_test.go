package tuf

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/cjson"
)

// A TUF repository built in the test: keys of each type the client reads,
// metadata signed by them, served over HTTP by httptest.

// tkey is a signing key and its TUF key object.
type tkey struct {
	id   string
	obj  map[string]any
	sign func(msg []byte) []byte
}

func newTKey(t *testing.T, obj map[string]any, sign func([]byte) []byte) *tkey {
	t.Helper()
	c, err := cjson.EncodeCanonical(obj)
	if err != nil {
		t.Fatal(err)
	}
	id := sha256.Sum256(c)
	return &tkey{id: hex.EncodeToString(id[:]), obj: obj, sign: sign}
}

func pkixPEM(t *testing.T, pub crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func ecdsaTKey(t *testing.T) *tkey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"keytype": "ecdsa", "scheme": "ecdsa-sha2-nistp256", "keyval": map[string]any{"public": pkixPEM(t, &k.PublicKey)}}
	return newTKey(t, obj, func(msg []byte) []byte {
		h := sha256.Sum256(msg)
		s, err := ecdsa.SignASN1(rand.Reader, k, h[:])
		if err != nil {
			panic(err)
		}
		return s
	})
}

func ed25519TKey(t *testing.T) *tkey {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"keytype": "ed25519", "scheme": "ed25519", "keyval": map[string]any{"public": hex.EncodeToString(pub)}}
	return newTKey(t, obj, func(msg []byte) []byte { return ed25519.Sign(priv, msg) })
}

// One RSA key for all tests (generating one takes a while).
var rsaPriv = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func rsaTKey(t *testing.T) *tkey {
	k := rsaPriv()
	obj := map[string]any{"keytype": "rsa", "scheme": "rsassa-pss-sha256", "keyval": map[string]any{"public": pkixPEM(t, &k.PublicKey)}}
	return newTKey(t, obj, func(msg []byte) []byte {
		h := sha256.Sum256(msg)
		s, err := rsa.SignPSS(rand.Reader, k, crypto.SHA256, h[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		if err != nil {
			panic(err)
		}
		return s
	})
}

// repo is a TUF repository and its HTTP server.
type repo struct {
	t   *testing.T
	now time.Time

	mu    sync.Mutex
	files map[string][]byte
	hits  map[string]int
	srv   *httptest.Server

	keys       map[string][]*tkey // by role
	threshold  map[string]int
	expires    map[string]time.Time
	version    map[string]int64 // last published, by role
	consistent bool
	target     []byte
	// metaHashes: the timestamp and snapshot list lengths and hashes.
	metaHashes bool

	initialRoot []byte
	cache       string
	warnings    []string
}

var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// newRepo is a repository at root version 1 (root keys 2 of 3 ECDSA,
// timestamp Ed25519, snapshot RSA, targets 2 of 3 ECDSA) with
// trusted_root.json published.
func newRepo(t *testing.T) *repo {
	r := &repo{
		t: t, now: testNow,
		files: map[string][]byte{}, hits: map[string]int{},
		keys: map[string][]*tkey{
			"root":      {ecdsaTKey(t), ecdsaTKey(t), ecdsaTKey(t)},
			"timestamp": {ed25519TKey(t)},
			"snapshot":  {rsaTKey(t)},
			"targets":   {ecdsaTKey(t), ecdsaTKey(t), ecdsaTKey(t)},
		},
		threshold:  map[string]int{"root": 2, "timestamp": 1, "snapshot": 1, "targets": 2},
		expires:    map[string]time.Time{},
		version:    map[string]int64{},
		consistent: true,
		metaHashes: true,
		target:     []byte(`{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`),
		cache:      t.TempDir(),
	}
	for _, role := range []string{"root", "timestamp", "snapshot", "targets"} {
		r.expires[role] = testNow.Add(7 * 24 * time.Hour)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		name := strings.TrimPrefix(req.URL.Path, "/")
		data, ok := r.files[name]
		r.hits[name]++
		r.mu.Unlock()
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(r.srv.Close)
	r.initialRoot = r.publishRoot(r.keys["root"]...)
	r.publish(nil)
	return r
}

func (r *repo) opts() Options {
	return Options{
		Mirror: r.srv.URL, Root: r.initialRoot, CacheDir: r.cache,
		HTTPClient: r.srv.Client(), Timeout: 5 * time.Second,
		Now:  func() time.Time { return r.now },
		Warn: func(s string) { r.warnings = append(r.warnings, s) },
	}
}

func (r *repo) fetch() ([]byte, error) {
	return Target(r.t.Context(), r.opts(), "trusted_root.json")
}

func (r *repo) put(name string, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files[name] = data
}

func (r *repo) get(name string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.files[name]
}

func (r *repo) hit(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[name]
}

func expiry(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// rootSigned is the root metadata of the current keys, at version v.
func (r *repo) rootSigned(v int64) map[string]any {
	keys := map[string]any{}
	roles := map[string]any{}
	for role, ks := range r.keys {
		var ids []any
		for _, k := range ks {
			keys[k.id] = k.obj
			ids = append(ids, k.id)
		}
		roles[role] = map[string]any{"keyids": ids, "threshold": r.threshold[role]}
	}
	return map[string]any{
		"_type": "root", "spec_version": "1.0.31", "version": v,
		"expires": expiry(r.expires["root"]), "consistent_snapshot": r.consistent,
		"keys": keys, "roles": roles,
		"x-unknown-field": "kept in what is signed",
	}
}

// envelope signs signed with each of signers (a key twice signs twice).
func (r *repo) envelope(signed map[string]any, signers ...*tkey) []byte {
	r.t.Helper()
	c, err := cjson.EncodeCanonical(signed)
	if err != nil {
		r.t.Fatal(err)
	}
	sigs := []any{}
	for _, k := range signers {
		sigs = append(sigs, map[string]any{"keyid": k.id, "sig": hex.EncodeToString(k.sign(c))})
	}
	// Not canonical on the wire, as real repositories publish it.
	out, err := json.MarshalIndent(map[string]any{"signed": signed, "signatures": sigs}, "", " ")
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// publishRoot publishes the next root version, signed by signers.
func (r *repo) publishRoot(signers ...*tkey) []byte {
	r.version["root"]++
	v := r.version["root"]
	data := r.envelope(r.rootSigned(v), signers...)
	r.put(fmt.Sprintf("%d.root.json", v), data)
	r.put("root.json", data)
	return data
}

func hashes(data []byte) map[string]any {
	a, b := sha256.Sum256(data), sha512.Sum512(data)
	return map[string]any{"sha256": hex.EncodeToString(a[:]), "sha512": hex.EncodeToString(b[:])}
}

func (r *repo) metaLine(v int64, data []byte) map[string]any {
	m := map[string]any{"version": v}
	if r.metaHashes {
		m["length"] = len(data)
		m["hashes"] = hashes(data)
	}
	return m
}

// publish publishes r.target and new targets, snapshot and timestamp
// versions, each signed by its role's keys; edit may change a role's
// signed metadata first (role, signed) and return the signers to use
// (nil: the role's keys).
func (r *repo) publish(edit func(role string, signed map[string]any) []*tkey) {
	sign := func(role string, signed map[string]any) []byte {
		signers := r.keys[role]
		if edit != nil {
			if s := edit(role, signed); s != nil {
				signers = s
			}
		}
		return r.envelope(signed, signers...)
	}
	name := func(role string, v int64) string {
		if r.consistent {
			return fmt.Sprintf("%d.%s.json", v, role)
		}
		return role + ".json"
	}
	th := hashes(r.target)
	r.put("targets/"+th["sha256"].(string)+".trusted_root.json", r.target)
	r.put("targets/trusted_root.json", r.target)

	r.version["targets"]++
	tv := r.version["targets"]
	targets := sign("targets", map[string]any{
		"_type": "targets", "spec_version": "1.0.31", "version": tv, "expires": expiry(r.expires["targets"]),
		"targets": map[string]any{
			"trusted_root.json": map[string]any{"length": len(r.target), "hashes": th, "custom": map[string]any{"sigstore": map[string]any{"usage": "Unknown"}}},
		},
	})
	r.put(name("targets", tv), targets)

	r.version["snapshot"]++
	sv := r.version["snapshot"]
	snapshot := sign("snapshot", map[string]any{
		"_type": "snapshot", "spec_version": "1.0.31", "version": sv, "expires": expiry(r.expires["snapshot"]),
		"meta": map[string]any{"targets.json": r.metaLine(tv, targets)},
	})
	r.put(name("snapshot", sv), snapshot)

	r.version["timestamp"]++
	ts := sign("timestamp", map[string]any{
		"_type": "timestamp", "spec_version": "1.0.31", "version": r.version["timestamp"], "expires": expiry(r.expires["timestamp"]),
		"meta": map[string]any{"snapshot.json": r.metaLine(sv, snapshot)},
	})
	r.put("timestamp.json", ts)
}

// signTargetsWith lists extra as one more targets key in a new root, and
// publishes targets metadata signed by the first targets key and extra.
func (r *repo) signTargetsWith(extra *tkey) {
	k := r.keys["targets"][0]
	r.keys["targets"] = append(r.keys["targets"], extra)
	r.publishRoot(r.keys["root"]...)
	r.publish(func(role string, _ map[string]any) []*tkey {
		if role == "targets" {
			return []*tkey{k, extra}
		}
		return nil
	})
}

func (r *repo) mustFetch() []byte {
	r.t.Helper()
	data, err := r.fetch()
	if err != nil {
		r.t.Fatalf("fetch: %v", err)
	}
	if !bytes.Equal(data, r.target) {
		r.t.Fatalf("fetched %q, want %q", data, r.target)
	}
	return data
}

func (r *repo) mustFail(want ...string) error {
	r.t.Helper()
	data, err := r.fetch()
	if err == nil {
		r.t.Fatalf("fetch succeeded (%d bytes), want an error with %q", len(data), want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			r.t.Fatalf("error %q does not say %q", err, w)
		}
	}
	return err
}
