package sign

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
)

func TestVerifiedText(t *testing.T) {
	checks := []Check{{What: "signature of r@sha256:aa", OK: true}, {What: "attestation x of r@sha256:aa", Why: "none"}, {What: "blobs of r@sha256:aa", OK: true}}
	v := NewVerified("r:1", checks)
	if v.Failed != 1 {
		t.Errorf("Failed = %d, want 1", v.Failed)
	}
	var b strings.Builder
	v.WriteText(&b)
	want := "ok    signature of r@sha256:aa\nFAIL  attestation x of r@sha256:aa: none\nok    blobs of r@sha256:aa\n"
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	v.Paint = func(ok bool, word string) string {
		if ok {
			return "<" + word + ">"
		}
		return "[" + word + "]"
	}
	b.Reset()
	v.WriteText(&b)
	want = "<ok>    signature of r@sha256:aa\n[FAIL]  attestation x of r@sha256:aa: none\n<ok>    blobs of r@sha256:aa\n"
	if b.String() != want {
		t.Errorf("painted text:\n%s\nwant:\n%s", b.String(), want)
	}
	if err := v.Err(); !errors.Is(err, fault.ErrGate) || err.Error() != "1 of 3 checks failed for r:1" {
		t.Errorf("Err = %v", err)
	}
	if err := NewVerified("r:1", checks[:1]).Err(); err != nil {
		t.Errorf("all passed: Err = %v", err)
	}
	// The JSON is the object verify -o json always printed.
	got, _ := json.Marshal(v)
	old, _ := json.Marshal(map[string]any{"ref": "r:1", "checks": checks, "failed": 1})
	if string(got) != string(old) {
		t.Errorf("JSON = %s, want %s", got, old)
	}
}

func TestNewKeyPair(t *testing.T) {
	dir := t.TempDir()
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	k, err := NewKeyPair(dir, pw)
	if err != nil || k.Private != filepath.Join(dir, "cosign.key") || k.Public != filepath.Join(dir, "cosign.pub") {
		t.Fatalf("NewKeyPair = %+v, %v", k, err)
	}
	if _, err := LoadSigner(k.Private, []byte("pw")); err != nil {
		t.Errorf("the private key does not load with its password: %v", err)
	}
	if _, err := NewKeyPair(dir, pw); !fault.IsInput(err) {
		t.Errorf("a second key pair in %s: %v, want bad input", dir, err)
	}
	noPW := errors.New("no password")
	if _, err := NewKeyPair(t.TempDir(), func() ([]byte, error) { return nil, noPW }); !errors.Is(err, noPW) {
		t.Errorf("the password's error: %v", err)
	}
}

func TestKeyPairText(t *testing.T) {
	k := KeyPair{Private: "keys/cosign.key", Public: "keys/cosign.pub"}
	var b strings.Builder
	k.WriteText(&b)
	if b.String() != "wrote keys/cosign.key and keys/cosign.pub\n" {
		t.Errorf("text = %q", b.String())
	}
	got, _ := json.Marshal(k)
	if string(got) != `{"private_key":"keys/cosign.key","public_key":"keys/cosign.pub"}` {
		t.Errorf("JSON = %s", got)
	}
}

func TestEnvPassword(t *testing.T) {
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if _, err := EnvPassword(lookup); !fault.IsInput(err) || !strings.Contains(err.Error(), "COSIGN_PASSWORD") {
		t.Errorf("unset: %v, want bad input naming COSIGN_PASSWORD", err)
	}
	env["COSIGN_PASSWORD"] = ""
	if pw, err := EnvPassword(lookup); err != nil || len(pw) != 0 {
		t.Errorf("set empty: %q, %v", pw, err)
	}
	env["COSIGN_PASSWORD"] = "s3cret"
	if pw, err := EnvPassword(lookup); err != nil || string(pw) != "s3cret" {
		t.Errorf("set: %q, %v", pw, err)
	}
}
