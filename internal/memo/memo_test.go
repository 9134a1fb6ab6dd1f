package memo

import (
	"errors"
	"os"
	"testing"
)

func TestOutputRemembersSuccessOnly(t *testing.T) {
	d := Dir(t.TempDir())
	runs := 0
	ok := func() ([]byte, error) { runs++; return []byte("v1"), nil }
	fail := func() ([]byte, error) { runs++; return nil, errors.New("no") }
	k := Key("version", "sha256:aa", "--version")
	for range 2 {
		if b, err := d.Output(k, ok); err != nil || string(b) != "v1" {
			t.Fatalf("%q %v", b, err)
		}
	}
	if runs != 1 {
		t.Errorf("ran %d times, want once", runs)
	}
	k2 := Key("version", "sha256:bb", "--version")
	for range 2 {
		if _, err := d.Output(k2, fail); err == nil {
			t.Fatal("a failure was not returned")
		}
	}
	if runs != 3 {
		t.Errorf("a failure was remembered (%d runs)", runs)
	}
	if Key("a", "bc") == Key("ab", "c") {
		t.Error("parts are not length-prefixed")
	}
	// The empty Dir remembers nothing; an oversized entry is not read back.
	if _, err := Dir("").Output(k, ok); err != nil || runs != 4 {
		t.Errorf("the empty Dir: runs %d, %v", runs, err)
	}
	os.WriteFile(d.path(k), make([]byte, MaxOutput+1), 0o644)
	if _, hit := d.Get(k); hit {
		t.Error("an entry over MaxOutput was read back")
	}
}
