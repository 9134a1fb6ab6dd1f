package main

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// TestVerifyRefusesAFailingScan: an image whose scan attestation has
// violations fails verify, though every signature and attestation is good.
func TestVerifyRefusesAFailingScan(t *testing.T) {
	slow(t, "builds and signs against a real docker-registry")
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, _ := random.Image(100, 1)
	img = mutate.Annotations(img, map[string]string{image.AnnBuild: "sha256:abc"}).(v1.Image)
	ref := mustRef(t, host+"/doris/doris-be:2.1.8-kunpeng920")
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	dg, _ := img.Digest()
	d := ref.Context().Digest(dg.String())
	priv, pub, _ := sign.Keygen(t.TempDir(), []byte("pw"))
	s, err := sign.LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Sign(ctx, ref); err != nil {
		t.Fatal(err)
	}
	for typ, pred := range map[string]string{sign.PredicateSPDX: `{}`, sign.PredicateSLSA1: `{}`, sign.PredicateScan: `{"summary":{"clean":false,"violations":2}}`} {
		if err := s.Attest(ctx, d, typ, []byte(pred)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := sign.VerifyRelease(ctx, ref, sign.Trust{Key: pub}, false)
	if err != nil {
		t.Fatal(err)
	}
	checks := res.Attestations
	var failed []string
	for _, c := range checks {
		if !c.OK {
			failed = append(failed, c.Why)
		}
	}
	if len(checks) != 3 || len(failed) != 1 || !strings.Contains(failed[0], "2 violation(s)") {
		t.Errorf("checks: %+v", checks)
	}
}
