package tuf

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/cjson"

	"github.com/dorisarm/dorisarm/internal/jsonkey"
)

// The metadata of the four top-level roles (TUF specification v1.0 §4).
// Only the fields the client workflow reads are decoded; the signatures
// cover the whole of "signed", unknown fields included.

type envelope struct {
	Signatures []signature     `json:"signatures"`
	Signed     json.RawMessage `json:"signed"`
}

type signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// common is what every role's "signed" holds.
type common struct {
	Type        string    `json:"_type"`
	SpecVersion string    `json:"spec_version"`
	Version     int64     `json:"version"`
	Expires     time.Time `json:"expires"`
}

type key struct {
	KeyType string `json:"keytype"`
	Scheme  string `json:"scheme"`
	KeyVal  struct {
		Public string `json:"public"`
	} `json:"keyval"`
}

type role struct {
	KeyIDs    []string `json:"keyids"`
	Threshold int      `json:"threshold"`
}

type rootMeta struct {
	common
	ConsistentSnapshot bool            `json:"consistent_snapshot"`
	Keys               map[string]key  `json:"keys"`
	Roles              map[string]role `json:"roles"`
}

// metaFile is a timestamp's line about the snapshot, or a snapshot's
// about a targets metadata file. Length and Hashes are optional.
type metaFile struct {
	Version int64             `json:"version"`
	Length  int64             `json:"length"`
	Hashes  map[string]string `json:"hashes"`
}

type timestampMeta struct {
	common
	Meta map[string]metaFile `json:"meta"`
}

type snapshotMeta struct {
	common
	Meta map[string]metaFile `json:"meta"`
}

type targetFile struct {
	Length int64             `json:"length"`
	Hashes map[string]string `json:"hashes"`
}

type targetsMeta struct {
	common
	Targets     map[string]targetFile `json:"targets"`
	Delegations *struct {
		Roles []struct {
			Name  string   `json:"name"`
			Paths []string `json:"paths"`
		} `json:"roles"`
	} `json:"delegations"`
}

// header gives access to the common fields of every role's metadata.
func (c *common) header() *common { return c }

type metadata interface{ header() *common }

// signedDoc is a metadata file split into what was signed (canonical JSON)
// and its signatures.
type signedDoc struct {
	canonical  []byte
	signatures []signature
}

// parse decodes a metadata file of role roleName (root, timestamp,
// snapshot, targets) into m: the fields come from the very value whose
// canonical form the signatures are checked over.
func parse(data []byte, roleName string, m metadata) (*signedDoc, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("not TUF metadata: %w", err)
	}
	if len(env.Signed) == 0 || bytes.Equal(env.Signed, []byte("null")) {
		return nil, errors.New(`not TUF metadata: no "signed"`)
	}
	v, err := decode(env.Signed)
	if err != nil {
		return nil, err
	}
	canon, err := cjson.EncodeCanonical(v)
	if err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	// The fields are read from the value canonicalised (canonical JSON
	// itself is not JSON: its strings hold raw control characters).
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(plain, m); err != nil {
		return nil, fmt.Errorf("%s metadata: %w", roleName, err)
	}
	h := m.header()
	switch {
	case h.Type != roleName:
		return nil, fmt.Errorf("metadata of type %q where %s metadata belongs", h.Type, roleName)
	case !strings.HasPrefix(h.SpecVersion, "1."):
		return nil, fmt.Errorf("%s metadata for TUF specification %q; this client reads 1.x", roleName, h.SpecVersion)
	case h.Version < 1:
		return nil, fmt.Errorf("%s metadata version %d; versions start at 1", roleName, h.Version)
	case h.Expires.IsZero():
		return nil, fmt.Errorf("%s metadata without an expiry", roleName)
	}
	return &signedDoc{canonical: canon, signatures: env.Signatures}, nil
}

// decode decodes raw JSON, numbers as json.Number (OLPC canonical JSON,
// as securesystemslib defines it, has integers only; cjson refuses
// others). An object with two keys that differ only in case (Unicode
// case folding, as encoding/json matches keys) is refused: Go would
// decode either into one field, so what is read could differ from what
// the signer meant.
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not TUF metadata: %w", err)
	}
	if err := foldedDuplicates(v); err != nil {
		return nil, err
	}
	return v, nil
}

func foldedDuplicates(v any) error {
	switch v := v.(type) {
	case map[string]any:
		seen := make(map[string]string, len(v))
		for k, e := range v {
			l := jsonkey.Fold(k)
			if o, ok := seen[l]; ok {
				return fmt.Errorf("metadata has both %q and %q keys in one object", o, k)
			}
			seen[l] = k
			if err := foldedDuplicates(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := foldedDuplicates(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// verifyRole checks that a threshold of roleName's keys in root signed
// doc. A key counts once however many signatures it made (by key id and
// by the key itself, in case two ids name one key); signatures by keys
// outside the role, of unknown types, or that do not verify do not count.
func verifyRole(doc *signedDoc, root *rootMeta, roleName, what string) error {
	r, ok := root.Roles[roleName]
	if !ok {
		return fmt.Errorf("the root metadata (version %d) has no %s role", root.Version, roleName)
	}
	if r.Threshold < 1 {
		return fmt.Errorf("the root metadata (version %d) gives the %s role threshold %d; at least 1 is required", root.Version, roleName, r.Threshold)
	}
	inRole := make(map[string]bool, len(r.KeyIDs))
	for _, id := range r.KeyIDs {
		inRole[id] = true
	}
	byID := map[string]bool{}
	byKey := map[string]bool{}
	for _, s := range doc.signatures {
		if !inRole[s.KeyID] || byID[s.KeyID] {
			continue
		}
		k, ok := root.Keys[s.KeyID]
		if !ok {
			continue
		}
		pk, err := parseKey(k)
		if err != nil {
			continue
		}
		if byKey[pk.id] {
			continue
		}
		sig, err := hex.DecodeString(s.Sig)
		if err != nil || len(sig) == 0 || !pk.verify(doc.canonical, sig) {
			continue
		}
		byID[s.KeyID] = true
		byKey[pk.id] = true
	}
	if len(byID) < r.Threshold {
		return fmt.Errorf("%s: %d valid signature(s) by the %s role's keys in root version %d, %d required", what, len(byID), roleName, root.Version, r.Threshold)
	}
	return nil
}

// checkExpiry refuses metadata that expired at or before now (a freeze
// attack, or a repository not kept up).
func checkExpiry(h *common, what string, now time.Time) error {
	if !h.Expires.After(now) {
		return fmt.Errorf("%s expired at %s (now %s): the repository may be frozen by an attacker or not maintained", what, h.Expires.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// checkHashes checks data against a length (when positive or required)
// and hashes: every sha256 and sha512 listed must match, and with
// needHash at least one of them must be listed. Other algorithms are not
// checked.
func checkHashes(data []byte, length int64, hashes map[string]string, needHash bool, what string) error {
	if length > 0 && int64(len(data)) != length {
		return fmt.Errorf("%s is %d bytes, the metadata says %d", what, len(data), length)
	}
	known := 0
	for alg, want := range hashes {
		var got []byte
		switch alg {
		case "sha256":
			s := sha256.Sum256(data)
			got = s[:]
		case "sha512":
			s := sha512.Sum512(data)
			got = s[:]
		default:
			continue
		}
		w, err := hex.DecodeString(want)
		if err != nil || subtle.ConstantTimeCompare(w, got) != 1 {
			return fmt.Errorf("%s has %s %x, the metadata says %s", what, alg, got, want)
		}
		known++
	}
	if needHash && known == 0 {
		return fmt.Errorf("the metadata lists no sha256 or sha512 for %s", what)
	}
	return nil
}

// sameRole says whether role name has the same keys and threshold in a
// and b.
func sameRole(a, b *rootMeta, name string) bool {
	ra, rb := a.Roles[name], b.Roles[name]
	if ra.Threshold != rb.Threshold || len(ra.KeyIDs) != len(rb.KeyIDs) {
		return false
	}
	ids := map[string]bool{}
	for _, id := range ra.KeyIDs {
		ids[id] = true
	}
	for _, id := range rb.KeyIDs {
		if !ids[id] {
			return false
		}
		ka, kb := a.Keys[id], b.Keys[id]
		if ka.KeyType != kb.KeyType || ka.Scheme != kb.Scheme || ka.KeyVal.Public != kb.KeyVal.Public {
			return false
		}
	}
	return true
}
