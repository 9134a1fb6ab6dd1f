package sign

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	attestcli "github.com/sigstore/cosign/v2/cmd/cosign/cli/attest"
	"github.com/sigstore/cosign/v2/cmd/cosign/cli/options"
	signcli "github.com/sigstore/cosign/v2/cmd/cosign/cli/sign"
)

// Keyless configures keyless signing: a short-lived Fulcio certificate for
// the CI's OIDC identity, every signature logged in Rekor. It runs cosign's
// own signing code; it needs the network and an OIDC token (GitHub Actions
// with `permissions: id-token: write` provides one).
type Keyless struct {
	FulcioURL  string
	RekorURL   string
	OIDCIssuer string
	IDToken    string // or $SIGSTORE_ID_TOKEN; on GitHub Actions cosign fetches one
}

// KeyOpts checks the configuration and turns it into cosign's options.
func (k Keyless) KeyOpts(getenv func(string) string) (options.KeyOpts, error) {
	if k.FulcioURL == "" {
		k.FulcioURL = options.DefaultFulcioURL
	}
	if k.RekorURL == "" {
		k.RekorURL = options.DefaultRekorURL
	}
	if k.OIDCIssuer == "" {
		k.OIDCIssuer = options.DefaultOIDCIssuerURL
	}
	for flag, u := range map[string]string{"--fulcio-url": k.FulcioURL, "--rekor-url": k.RekorURL, "--oidc-issuer": k.OIDCIssuer} {
		p, err := url.Parse(u)
		if err != nil || p.Host == "" || (p.Scheme != "https" && !loopback(p.Hostname())) {
			return options.KeyOpts{}, fmt.Errorf("%s %q: want an https:// URL (plain http only on loopback)", flag, u)
		}
	}
	if k.IDToken == "" {
		k.IDToken = getenv("SIGSTORE_ID_TOKEN")
	}
	if k.IDToken == "" && getenv("ACTIONS_ID_TOKEN_REQUEST_URL") == "" {
		return options.KeyOpts{}, fmt.Errorf("keyless signing needs an OIDC token: run in GitHub Actions with `permissions: id-token: write`, or pass --identity-token (or $SIGSTORE_ID_TOKEN)")
	}
	return options.KeyOpts{
		FulcioURL:        k.FulcioURL,
		RekorURL:         k.RekorURL,
		OIDCIssuer:       k.OIDCIssuer,
		OIDCClientID:     "sigstore",
		IDToken:          k.IDToken,
		SkipConfirmation: true,
	}, nil
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// KeylessSigner signs and attests keylessly, with the same method set as
// Signer.
type KeylessSigner struct {
	ko   options.KeyOpts
	opts []remote.Option
}

// NewKeylessSigner checks k (see Keyless.KeyOpts).
func NewKeylessSigner(k Keyless, getenv func(string) string, opts ...remote.Option) (*KeylessSigner, error) {
	ko, err := k.KeyOpts(getenv)
	if err != nil {
		return nil, err
	}
	return &KeylessSigner{ko: ko, opts: opts}, nil
}

// Sign signs ref by digest, recursively for an index, logging in Rekor.
func (s *KeylessSigner) Sign(ctx context.Context, ref name.Reference) ([]name.Digest, error) {
	ds, err := Digests(ctx, ref, s.opts...)
	if err != nil {
		return nil, err
	}
	so := options.SignOptions{Upload: true, Recursive: true, TlogUpload: true, SkipConfirmation: true}
	if err := signcli.SignCmd(&options.RootOptions{Timeout: 3 * time.Minute}, s.ko, so, []string{ds[0].String()}); err != nil {
		return nil, err
	}
	return ds, nil
}

// Attest attaches a keyless-signed attestation about d.
func (s *KeylessSigner) Attest(ctx context.Context, d name.Digest, predicateType string, predicate []byte) error {
	dir, err := os.MkdirTemp("", "dorisarm-attest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "predicate.json")
	if err := os.WriteFile(p, predicate, 0o600); err != nil {
		return err
	}
	c := &attestcli.AttestCommand{KeyOpts: s.ko, PredicatePath: p, PredicateType: predicateType, Replace: true,
		TlogUpload: true, Timeout: 3 * time.Minute, RekorEntryType: "dsse"}
	if strings.HasPrefix(d.RegistryStr(), "127.0.0.1") || strings.HasPrefix(d.RegistryStr(), "localhost") {
		c.RegistryOptions.AllowHTTPRegistry = true
	}
	return c.Exec(ctx, d.String())
}
