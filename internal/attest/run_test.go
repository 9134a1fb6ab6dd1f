package attest

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// TestRunSigns: a key signs an image in an in-memory registry, the
// signature verifies with its public key, and Done prints a line for it.
func TestRunSigns(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/doris/doris-be:2.1.8"
	img, _ := random.Image(256, 1)
	tag, _ := name.NewTag(ref)
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	priv, pub, err := sign.Keygen(t.TempDir(), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	ctx := context.Background()
	done, err := Run(ctx, Request{Refs: []string{ref}, Key: priv, Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	want := tag.Context().Digest(d.String()).String()
	if len(done) != 1 || done[0].Digest != want || len(done[0].Attestations) != 0 {
		t.Fatalf("done = %+v, want one signature of %s", done, want)
	}
	var b strings.Builder
	done.WriteText(&b)
	if b.String() != "signed "+want+"\n" {
		t.Errorf("text = %q", b.String())
	}
	res, err := sign.VerifyRelease(ctx, tag, sign.Trust{Key: pub}, true)
	var checks []sign.Check
	if err == nil {
		checks = res.Checks()
	}
	if err != nil || len(checks) == 0 || !checks[0].OK {
		t.Errorf("the signature does not verify: %+v %v", checks, err)
	}

	noPW := errors.New("no password")
	for what, req := range map[string]Request{
		"neither key nor keyless": {Refs: []string{ref}},
		"key and keyless":         {Refs: []string{ref}, Key: priv, Keyless: true},
		"a bad reference":         {Refs: []string{"NOT A REF"}, Key: priv, Password: pw},
		"a missing key":           {Refs: []string{ref}, Key: filepath.Join(t.TempDir(), "none.key"), Password: pw},
		"a wrong password":        {Refs: []string{ref}, Key: priv, Password: func() ([]byte, error) { return []byte("nope"), nil }},
	} {
		if _, err := Run(ctx, req); !fault.IsInput(err) {
			t.Errorf("%s: %v, want bad input", what, err)
		}
	}
	if _, err := Run(ctx, Request{Refs: []string{ref}, Key: priv, Password: func() ([]byte, error) { return nil, noPW }}); !errors.Is(err, noPW) {
		t.Errorf("the password's error: %v", err)
	}
}
