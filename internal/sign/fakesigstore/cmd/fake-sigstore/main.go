// Command fake-sigstore runs a FAKE Sigstore (package fakesigstore: a fake
// Fulcio, Rekor and OIDC issuer with throw-away keys) on loopback for the
// end-to-end script, until it is killed. Into --dir it writes
// trusted_root.json (trusting only this fake), signing_config.json (its
// services, for cosign v3), token (an OIDC token for
// --identity) and env (FULCIO_URL, REKOR_URL, OIDC_ISSUER, IDENTITY as
// shell assignments). Never use what it signs for anything but tests.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	prototrustroot "github.com/sigstore/protobuf-specs/gen/pb-go/trustroot/v1"
	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/dorisarm/dorisarm/internal/sign/fakesigstore"
)

func main() {
	dir := flag.String("dir", "", "directory for trusted_root.json, token and env")
	identity := flag.String("identity", "https://github.com/dorisarm/dorisarm/.github/workflows/release.yml@refs/tags/v1", "the identity the token is for")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "fake-sigstore: give --dir")
		os.Exit(2)
	}
	if err := run(*dir, *identity); err != nil {
		fmt.Fprintln(os.Stderr, "fake-sigstore:", err)
		os.Exit(1)
	}
}

func run(dir, identity string) error {
	f, err := fakesigstore.New()
	if err != nil {
		return err
	}
	defer f.Close()
	tr, err := f.TrustedRoot()
	if err != nil {
		return err
	}
	js, err := tr.MarshalJSON()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	env := fmt.Sprintf("FULCIO_URL=%s\nREKOR_URL=%s\nOIDC_ISSUER=%s\nIDENTITY=%s\n", f.Fulcio.URL, f.Rekor.URL, f.Issuer, identity)
	// Where cosign v3 signs: the fake's Fulcio, OIDC issuer and Rekor (a
	// Rekor v1 API), no timestamp authority.
	since := time.Now().Add(-time.Hour)
	svc := func(u string) []root.Service {
		return []root.Service{{URL: u, MajorAPIVersion: 1, ValidityPeriodStart: since, Operator: "fake-sigstore"}}
	}
	sc, err := root.NewSigningConfig(root.SigningConfigMediaType02, svc(f.Fulcio.URL), svc(f.Issuer), svc(f.Rekor.URL),
		root.ServiceConfiguration{Selector: prototrustroot.ServiceSelector_ANY}, nil, root.ServiceConfiguration{Selector: prototrustroot.ServiceSelector_ANY})
	if err != nil {
		return err
	}
	scJSON, err := sc.MarshalJSON()
	if err != nil {
		return err
	}
	roots, rekorKey, ctKey := f.PEM()
	files := map[string][]byte{"trusted_root.json": js, "signing_config.json": scJSON, "fulcio_roots.pem": roots, "rekor.pub": rekorKey, "ctlog.pub": ctKey,
		"token": []byte(f.Token(identity)), "env": []byte(env)}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return nil
}
