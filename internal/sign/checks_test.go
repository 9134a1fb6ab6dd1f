package sign

import (
	"encoding/json"
	"errors"
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
