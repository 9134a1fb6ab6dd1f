package sign

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	fulcioapi "github.com/sigstore/fulcio/pkg/api"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// The public Sigstore instance, used unless told otherwise.
const (
	DefaultFulcioURL     = "https://fulcio.sigstore.dev"
	DefaultRekorURL      = "https://rekor.sigstore.dev"
	DefaultOIDCIssuerURL = "https://oauth2.sigstore.dev/auth"
)

// Keyless configures keyless signing: a short-lived Fulcio certificate for
// the CI's OIDC identity, every signature logged in Rekor. It needs the
// network and an OIDC token (GitHub Actions with `permissions: id-token:
// write` provides one).
type Keyless struct {
	FulcioURL string
	RekorURL  string
	// OIDCIssuer is checked but not contacted: dorisarm never runs an
	// interactive login, the token comes from IDToken or the CI.
	OIDCIssuer string
	IDToken    string // or $SIGSTORE_ID_TOKEN; on GitHub Actions, fetched from the runner
}

// Resolve checks the configuration and fills in the defaults and the token
// from the environment. With no token given and GitHub Actions' token
// endpoint in the environment, IDToken stays empty: the signer fetches one.
func (k Keyless) Resolve(getenv func(string) string) (Keyless, error) {
	if k.FulcioURL == "" {
		k.FulcioURL = DefaultFulcioURL
	}
	if k.RekorURL == "" {
		k.RekorURL = DefaultRekorURL
	}
	if k.OIDCIssuer == "" {
		k.OIDCIssuer = DefaultOIDCIssuerURL
	}
	for _, f := range []struct{ flag, u string }{{"--fulcio-url", k.FulcioURL}, {"--rekor-url", k.RekorURL}, {"--oidc-issuer", k.OIDCIssuer}} {
		if err := checkServiceURL(f.flag, f.u); err != nil {
			return Keyless{}, err
		}
	}
	if k.IDToken == "" {
		k.IDToken = getenv("SIGSTORE_ID_TOKEN")
	}
	if k.IDToken == "" {
		if getenv(actionsURLEnv) == "" {
			return Keyless{}, fmt.Errorf("keyless signing needs an OIDC token: run in GitHub Actions with `permissions: id-token: write`, or pass --identity-token (or $SIGSTORE_ID_TOKEN)")
		}
		if getenv(actionsTokenEnv) == "" {
			return Keyless{}, fmt.Errorf("$%s is set but $%s is empty: give the job `permissions: id-token: write`", actionsURLEnv, actionsTokenEnv)
		}
	}
	return k, nil
}

// checkServiceURL refuses a Sigstore service URL that is not https (plain
// http only on loopback, for tests).
func checkServiceURL(flag, u string) error {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" || (p.Scheme != "https" && !(p.Scheme == "http" && loopback(p.Hostname()))) {
		return fmt.Errorf("%s %q: want an https:// URL (plain http only on loopback)", flag, u)
	}
	return nil
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// GitHub Actions' OIDC token endpoint and its bearer token.
const (
	actionsURLEnv   = "ACTIONS_ID_TOKEN_REQUEST_URL"
	actionsTokenEnv = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
)

// KeylessSigner signs and attests keylessly, with the same method set as
// Signer. One ephemeral key and its Fulcio certificate serve every
// signature until the certificate is about to expire.
type KeylessSigner struct {
	cfg    Keyless
	getenv func(string) string
	opts   []remote.Option
	client *http.Client // GitHub's token endpoint
	rekor  *rekorLog
	format Format

	key   signature.SignerVerifier
	cert  *x509.Certificate
	certs fulcioapi.CertificateResponse // PEM: the certificate and its chain
}

// NewKeylessSigner checks k (see Keyless.Resolve).
func NewKeylessSigner(k Keyless, getenv func(string) string, opts ...remote.Option) (*KeylessSigner, error) {
	cfg, err := k.Resolve(getenv)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Timeout: time.Minute}
	rl, err := newRekorLog(cfg.RekorURL, rekorRetries)
	if err != nil {
		return nil, err
	}
	return &KeylessSigner{cfg: cfg, getenv: getenv, opts: opts, client: c, rekor: rl}, nil
}

// rekorRetries is how often a failed Rekor upload is retried (with
// backoff); a variable for tests.
var rekorRetries uint = 3

// Sign signs ref by digest, recursively for an index, each signature
// logged in Rekor: in the bundle format a DSSE statement (a dsse entry),
// in the legacy one a simple-signing payload (a hashedrekord entry). Every
// digest is signed and logged before anything is written to the registry.
func (s *KeylessSigner) Sign(ctx context.Context, ref name.Reference) ([]name.Digest, error) {
	ds, err := Digests(ctx, ref, s.opts...)
	if err != nil {
		return nil, err
	}
	type signed struct {
		legacy *layer
		bundle []byte
	}
	out := make([]signed, len(ds))
	for i, d := range ds {
		if err := s.certify(ctx); err != nil {
			return nil, err
		}
		if s.format.bundle() {
			st, err := signStatement(d)
			if err != nil {
				return nil, err
			}
			if out[i].bundle, err = s.bundle(ctx, st); err != nil {
				return nil, fmt.Errorf("signing %s: %w", d, err)
			}
		}
		if !s.format.legacy() {
			continue
		}
		pl, err := (&payload.Cosign{Image: d}).MarshalJSON()
		if err != nil {
			return nil, err
		}
		sig, err := s.key.SignMessage(bytes.NewReader(pl))
		if err != nil {
			return nil, err
		}
		e, err := s.rekor.uploadSignature(ctx, pl, sig, s.certs.CertPEM)
		if err != nil {
			return nil, fmt.Errorf("signing %s: %w", d, err)
		}
		l, err := s.layer(signatureLayer(pl, sig, nil), e)
		if err != nil {
			return nil, err
		}
		out[i].legacy = &l
	}
	for i, d := range ds {
		if out[i].bundle != nil {
			if err := writeBundle(ctx, d, out[i].bundle, ctypes.CosignSignPredicateType, s.opts); err != nil {
				return nil, fmt.Errorf("storing the bundle signature of %s: %w", d, err)
			}
		}
		if out[i].legacy != nil {
			if err := writeSignature(ctx, d, *out[i].legacy, s.opts, nil); err != nil {
				return nil, fmt.Errorf("storing the signature of %s: %w", d, err)
			}
		}
	}
	return ds, nil
}

// bundle signs st (a DSSE envelope), logs the envelope in Rekor (a dsse
// entry) and returns the Sigstore bundle of the two with the certificate.
func (s *KeylessSigner) bundle(ctx context.Context, st []byte) ([]byte, error) {
	env, err := signDSSE(s.key, st)
	if err != nil {
		return nil, err
	}
	e, err := s.rekor.uploadEnvelope(ctx, env, s.certs.CertPEM)
	if err != nil {
		return nil, err
	}
	return makeBundle(s.key, st, env, s.certs.CertPEM, e)
}

// Attest attaches a keyless-signed attestation about d, logged in Rekor (a
// dsse entry), replacing in the legacy tag those of the same predicate
// type. Both formats store the one envelope and log entry.
func (s *KeylessSigner) Attest(ctx context.Context, d name.Digest, predicateType string, predicate []byte) error {
	st, err := newStatement(d, predicateType, predicate)
	if err != nil {
		return err
	}
	if err := s.certify(ctx); err != nil {
		return err
	}
	env, err := signDSSE(s.key, st)
	if err != nil {
		return err
	}
	// Rekor hashes the envelope as sent: it is stored byte for byte.
	e, err := s.rekor.uploadEnvelope(ctx, env, s.certs.CertPEM)
	if err != nil {
		return fmt.Errorf("attesting %s: %w", d, err)
	}
	return storeAttestation(ctx, d, s.format, s.key, st, env, s.certs.CertPEM, e, predicateType, true,
		func(l layer) (layer, error) { return s.layer(l, e) }, s.opts)
}

// WithFormat makes s write f's signature formats (the default: both).
func (s *KeylessSigner) WithFormat(f Format) *KeylessSigner {
	s.format = f
	return s
}

// layer adds what cosign stores beside a keyless signature: the
// certificate, its chain and the Rekor bundle of e.
func (s *KeylessSigner) layer(l layer, e *models.LogEntryAnon) (layer, error) {
	l.Annotations[annCertificate] = string(s.certs.CertPEM)
	l.Annotations[annChain] = string(s.certs.ChainPEM)
	return withLogEntry(l, e)
}

// tokenSubject is the identity Fulcio certifies for an OIDC token's claims
// (the token's middle part, decoded): the e-mail address when there is one,
// which the provider must have verified (email_verified true, as a boolean
// or a string, either case), else the subject.
func tokenSubject(claims []byte) (string, error) {
	var c struct {
		Email    string          `json:"email"`
		Verified json.RawMessage `json:"email_verified"`
		Subject  string          `json:"sub"`
	}
	if err := json.Unmarshal(claims, &c); err != nil {
		return "", err
	}
	if c.Email != "" {
		switch string(c.Verified) {
		case "true", `"true"`, "True", `"True"`:
			return c.Email, nil
		}
		return "", fmt.Errorf("the e-mail address %s is not verified by the identity provider (email_verified is %s)", c.Email, cmp.Or(string(c.Verified), "missing"))
	}
	if c.Subject == "" {
		return "", errors.New("the token names no subject (no sub claim)")
	}
	return c.Subject, nil
}

// certify gets a Fulcio certificate for a new ephemeral key, unless the
// one it has is good for two more minutes (Rekor's time must fall inside
// it).
func (s *KeylessSigner) certify(ctx context.Context) error {
	if s.cert != nil && time.Until(s.cert.NotAfter) > 2*time.Minute {
		return nil
	}
	tok, err := s.token(ctx)
	if err != nil {
		return err
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errors.New("the OIDC token is not a JWT (want header.claims.signature)")
	}
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return fmt.Errorf("the OIDC token's claims: %w", err)
	}
	subject, err := tokenSubject(claims)
	if err != nil {
		return fmt.Errorf("the OIDC token's subject: %w", err)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	key, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		return err
	}
	// Fulcio wants the token's subject signed with the key: proof that we hold it.
	proof, err := key.SignMessage(strings.NewReader(subject))
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return err
	}
	u, _ := url.Parse(s.cfg.FulcioURL) // checked by Resolve
	resp, err := fulcioapi.NewClient(u, fulcioapi.WithUserAgent("dorisarm"), fulcioapi.WithTimeout(time.Minute)).
		SigningCert(fulcioapi.CertificateRequest{PublicKey: fulcioapi.Key{Content: der, Algorithm: "ecdsa"}, SignedEmailAddress: proof}, tok)
	if err != nil {
		return fmt.Errorf("certificate refused by Fulcio (is the OIDC token valid and for audience \"sigstore\"?): %w", err)
	}
	blk, _ := pem.Decode(resp.CertPEM)
	if blk == nil {
		return fmt.Errorf("no certificate from Fulcio %s", s.cfg.FulcioURL)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return fmt.Errorf("a bad certificate from Fulcio %s: %w", s.cfg.FulcioURL, err)
	}
	if got, _ := x509.MarshalPKIXPublicKey(cert.PublicKey); !bytes.Equal(got, der) {
		return fmt.Errorf("the certificate from Fulcio %s is for another key than the one sent", s.cfg.FulcioURL)
	}
	s.key, s.cert, s.certs = key, cert, *resp
	return nil
}

// token is the OIDC token: given, or GitHub Actions' for audience sigstore.
func (s *KeylessSigner) token(ctx context.Context) (string, error) {
	if s.cfg.IDToken != "" {
		return s.cfg.IDToken, nil
	}
	u := s.getenv(actionsURLEnv)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+sep+"audience=sigstore", nil)
	if err != nil {
		return "", fmt.Errorf("$%s: %w", actionsURLEnv, err)
	}
	req.Header.Set("Authorization", "bearer "+s.getenv(actionsTokenEnv))
	resp, err := s.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetching GitHub Actions' OIDC token: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetching GitHub Actions' OIDC token: %s: %s (does the job have `permissions: id-token: write`?)", resp.Status, bytes.TrimSpace(body))
	}
	var v struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Value == "" {
		return "", fmt.Errorf("fetching GitHub Actions' OIDC token: no token in the answer")
	}
	return v.Value, nil
}
