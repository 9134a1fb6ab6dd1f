// Package sign signs release images the way cosign does (a simple-signing
// payload per manifest digest, stored in the sha256-<digest>.sig tag;
// in-toto attestations in DSSE envelopes in the .att tag), with a key or
// keyless (Fulcio and Rekor), and verifies them with cosign's own
// verification (pkg/cosign) against a key or the Sigstore trusted root
// (sigstore-go). What is dorisarm's here is the policy on top: bounded
// reads of what is stored, the release identity gate, the blob checks and
// the companions copied by digest.
package sign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	cosignremote "github.com/sigstore/cosign/v2/pkg/cosign/remote"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/cryptoutils/goodkey"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// Keygen writes a cosign-format key pair into dir: cosign.key (encrypted
// with password) and cosign.pub. It refuses to overwrite a key.
func Keygen(dir string, password []byte) (priv, pub string, err error) {
	priv, pub = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	for _, p := range []string{priv, pub} {
		if _, err := os.Stat(p); err == nil {
			return "", "", fmt.Errorf("%s exists; remove it or choose another --out", p)
		}
	}
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return "", "", err
	}
	privPEM, pubPEM := kb.PrivateBytes, kb.PublicBytes
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(priv, privPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pub, pubPEM, 0o644); err != nil {
		os.Remove(priv)
		return "", "", err
	}
	return priv, pub, nil
}

// Signer signs with a cosign private key.
type Signer struct {
	sv     signature.SignerVerifier
	opts   []remote.Option
	format Format
	rekor  *rekorLog // nil: signatures are not logged (cosign's --tlog-upload=false)
}

// maxKeyFile bounds a key file: a PEM key is under 1 kB.
const maxKeyFile = 1 << 20

// LoadSigner reads a cosign.key and decrypts it with password.
func LoadSigner(keyPath string, password []byte, opts ...remote.Option) (*Signer, error) {
	data, err := fsutil.ReadFile(keyPath, maxKeyFile)
	if err != nil {
		return nil, err
	}
	sv, err := cosign.LoadPrivateKey(data, password, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (is COSIGN_PASSWORD right?)", keyPath, err)
	}
	return &Signer{sv: sv, opts: opts}, nil
}

// WithFormat makes s write f's signature formats (the default: both).
func (s *Signer) WithFormat(f Format) *Signer {
	s.format = f
	return s
}

// WithRekor logs every signature and attestation s makes in the Rekor log
// at url, as the cosign CLI does by default for key-based signatures, so
// that verifiers can check them against the log (cosign verify without
// --insecure-ignore-tlog).
func (s *Signer) WithRekor(url string) (*Signer, error) {
	if err := checkServiceURL("--rekor-url", url); err != nil {
		return nil, err
	}
	var err error
	if s.rekor, err = newRekorLog(url, rekorRetries); err != nil {
		return nil, err
	}
	return s, nil
}

// Sign signs ref by digest: an image, or an index and every manifest in it.
// It returns the digests it signed; a digest signed before by the same key
// for the same payload is signed again only once (cosign deduplicates).
func (s *Signer) Sign(ctx context.Context, ref name.Reference) ([]name.Digest, error) {
	ds, err := Digests(ctx, ref, s.opts...)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if err := s.signOne(ctx, d); err != nil {
			return nil, fmt.Errorf("signing %s: %w", d, err)
		}
	}
	return ds, nil
}

func (s *Signer) signOne(ctx context.Context, d name.Digest) error {
	if s.format.bundle() {
		if err := s.signBundle(ctx, d); err != nil {
			return err
		}
	}
	if !s.format.legacy() {
		return nil
	}
	pl, err := (&payload.Cosign{Image: d}).MarshalJSON()
	if err != nil {
		return err
	}
	raw, err := s.sv.SignMessage(bytes.NewReader(pl))
	if err != nil {
		return err
	}
	l := signatureLayer(pl, raw, nil)
	if s.rekor != nil {
		pub, err := s.publicPEM()
		if err != nil {
			return err
		}
		e, err := s.rekor.uploadSignature(ctx, pl, raw, pub)
		if err != nil {
			return err
		}
		if l, err = withLogEntry(l, e); err != nil {
			return err
		}
	}
	// Signed before by this key: cosign's duplicate check keeps one.
	return writeSignature(ctx, d, l, s.opts, cosignremote.NewDupeDetector(s.sv))
}

// signBundle adds a bundle-format signature of d, unless one by this key
// is there already (re-signing is idempotent, as cosign's duplicate check
// makes it for the tags).
func (s *Signer) signBundle(ctx context.Context, d name.Digest) error {
	if bs, err := readBundles(ctx, d, s.opts); err == nil && len(bs) > 0 {
		v := &verifier{co: &cosign.CheckOpts{SigVerifier: s.sv, IgnoreTlog: true, Offline: true}}
		// With a log, only a signature that was logged is the same one.
		if b, err := v.verifiedBundleSignature(ctx, d, bs); err == nil && (s.rekor == nil || b.Bundle.HasInclusionProof()) {
			return nil
		}
	}
	st, err := signStatement(d)
	if err != nil {
		return err
	}
	env, e, pub, err := s.envelope(ctx, st)
	if err != nil {
		return err
	}
	b, err := makeBundle(s.sv, st, env, pub, e)
	if err != nil {
		return err
	}
	return writeBundle(ctx, d, b, ctypes.CosignSignPredicateType, s.opts)
}

// envelope signs st (a DSSE envelope) and logs the envelope when s has a
// Rekor log (a dsse entry; nil otherwise); pub is the key's PEM.
func (s *Signer) envelope(ctx context.Context, st []byte) (env []byte, e *models.LogEntryAnon, pub []byte, err error) {
	if env, err = signDSSE(s.sv, st); err != nil {
		return nil, nil, nil, err
	}
	if pub, err = s.publicPEM(); err != nil {
		return nil, nil, nil, err
	}
	if s.rekor != nil {
		if e, err = s.rekor.uploadEnvelope(ctx, env, pub); err != nil {
			return nil, nil, nil, err
		}
	}
	return env, e, pub, nil
}

func (s *Signer) publicPEM() ([]byte, error) {
	pk, err := s.sv.PublicKey()
	if err != nil {
		return nil, err
	}
	return cryptoutils.MarshalPublicKeyToPEM(pk)
}

// Digests resolves ref to the digests a recursive signature covers: the
// manifest it names and, for an index, every manifest in it.
func Digests(ctx context.Context, ref name.Reference, opts ...remote.Option) ([]name.Digest, error) {
	desc, err := remote.Get(ref, append([]remote.Option{remote.WithContext(ctx)}, opts...)...)
	if err != nil {
		return nil, err
	}
	top := ref.Context().Digest(desc.Digest.String())
	out := []name.Digest{top}
	if !desc.MediaType.IsIndex() {
		return out, nil
	}
	_, im, err := registry.IndexOf(desc)
	if err != nil {
		return nil, err
	}
	for _, m := range im.Manifests {
		out = append(out, ref.Context().Digest(m.Digest.String()))
	}
	return out, nil
}

// Check is one thing verify checked.
type Check struct {
	What string `json:"what"`
	OK   bool   `json:"ok"`
	Why  string `json:"why,omitempty"`
	// Formats are the forms of signature or attestation checked: a
	// Sigstore bundle (an OCI referrer) and/or cosign's legacy tag.
	Formats []string `json:"formats,omitempty"`
}

// Result is what VerifyRelease checked.
type Result struct {
	Digests      []name.Digest // ref's digest and, for an index, its manifests'
	Signatures   []Check
	Attestations []Check
	// Statements are the verified attestation statements of each
	// build-made manifest and attested index, by its digest (sha256:…).
	Statements map[string][]Statement
	// Blobs are the checks that each image's config and layers in the
	// registry are the bytes their manifest names; Bytes is what they hold.
	Blobs []Check
	Bytes int64
}

// Checks are the signature checks, then the attestation and blob checks.
func (r *Result) Checks() []Check {
	return append(append(append([]Check{}, r.Signatures...), r.Attestations...), r.Blobs...)
}

// VerifyRelease is sign's one verification of a release: it resolves ref
// once and checks the signature of every digest it covers, that every
// image's blobs are the bytes its manifest names, and, unless
// signaturesOnly, the attestations of every manifest made from a build and
// of every index with platforms made from builds (see attestationChecks).
// It returns the checks and the attestation statements that verified.
func VerifyRelease(ctx context.Context, ref name.Reference, trust Trust, signaturesOnly bool, opts ...remote.Option) (*Result, error) {
	// The key (or trusted root) first: a bad key is bad input whatever the registry says.
	v, err := trust.verifier(ctx, opts...)
	if err != nil {
		return nil, err
	}
	ds, err := Digests(ctx, ref, opts...)
	if err != nil {
		return nil, err
	}
	sigs, err := signatureChecks(ctx, ds, v)
	if err != nil {
		return nil, err
	}
	r := &Result{Digests: ds, Signatures: sigs}
	// A signature vouches for a manifest, and the manifest for its blobs by
	// digest: read them all, or a layer altered in storage goes unnoticed.
	// A manifest without a valid signature vouches for nothing: its blob
	// sizes could be anything (a terabyte, an endless stream), so they are
	// not read.
	for i, d := range ds {
		c := Check{What: "blobs of " + d.String()}
		if !r.Signatures[i].OK {
			c.Why = "not read: the manifest's signature did not verify, so nothing vouches for the blobs it names"
			r.Blobs = append(r.Blobs, c)
			continue
		}
		n, bytes, err := image.CheckBlobs(ctx, d, opts...)
		r.Bytes += bytes
		var be *image.BlobError
		switch {
		case errors.As(err, &be):
			c.Why = be.Error()
		case err != nil:
			return nil, err
		case n == 0:
			continue // an index: its manifests are fetched by digest
		default:
			c.OK = true
			c.What = fmt.Sprintf("blobs of %s (%d, %d bytes, each matches its digest)", d, n, bytes)
		}
		r.Blobs = append(r.Blobs, c)
	}
	if signaturesOnly {
		return r, nil
	}
	r.Attestations, r.Statements, err = attestationChecks(ctx, ds, trust, opts...)
	return r, err
}

// signatureChecks checks the signatures of ds. A signature that could not
// be read because the machine or the network failed (fault.IsEnv) is not a
// failed check: that is the error.
func signatureChecks(ctx context.Context, ds []name.Digest, v *verifier) ([]Check, error) {
	var checks []Check
	for _, d := range ds {
		c := Check{What: "signature of " + d.String()}
		formats, err := v.verifySignatures(ctx, d)
		switch {
		case err != nil && fault.IsEnv(err):
			return nil, fmt.Errorf("checking the signature of %s: %w", d, err)
		case err != nil:
			c.Why = explain(err)
		default:
			c.OK, c.Formats = true, formats
		}
		checks = append(checks, c)
	}
	return checks, nil
}

// Trust is what signatures must verify against: a cosign public key, or
// (keyless) the identity and OIDC issuer in a Fulcio certificate, checked
// against the Sigstore trusted root with the Rekor log entry.
type Trust struct {
	Key      string // cosign.pub
	Identity string // certificate identity, e.g. https://github.com/ORG/REPO/.github/workflows/release.yml@refs/tags/v1
	// IdentityRegexp matches the identity instead (e.g. any release tag).
	IdentityRegexp string
	Issuer         string // OIDC issuer, e.g. https://token.actions.githubusercontent.com
	// TrustedRoot is a trusted_root.json to trust instead of the Sigstore
	// trusted root from TUF (a private Sigstore instance).
	TrustedRoot string
}

// Validate says what is missing or contradictory (bad input).
// Warnings are what is legal but probably not meant in t: an identity
// regexp that is not anchored at both ends matches any identity that merely
// contains it (^https://github\.com/ORG/REPO/ also matches ORG/REPO-evil's
// workflows when the dots and the end are left open).
func (t Trust) Warnings() []string {
	re := t.IdentityRegexp
	if re == "" {
		return nil
	}
	var w []string
	if !strings.HasPrefix(re, "^") || !strings.HasSuffix(re, "$") {
		w = append(w, fmt.Sprintf("--certificate-identity-regexp %q is not anchored at both ends (^...$): it accepts any signer identity that contains a match, e.g. another repository's workflow", re))
	}
	if regexp.MustCompile(`[A-Za-z0-9]\.(com|io|org|yml|yaml|net)\b`).MatchString(re) {
		w = append(w, fmt.Sprintf("--certificate-identity-regexp %q has an unescaped dot, which matches any character: write \\. for a literal dot", re))
	}
	return w
}

func (t Trust) Validate() error { return fault.Input(t.validate()) }

func (t Trust) validate() error {
	switch {
	case t.Key != "" && (t.Identity != "" || t.IdentityRegexp != "" || t.Issuer != ""):
		return fmt.Errorf("give a key or a certificate identity and issuer, not both")
	case t.Key == "" && ((t.Identity == "") == (t.IdentityRegexp == "") || t.Issuer == ""):
		return fmt.Errorf("give --key cosign.pub, or --certificate-identity (or --certificate-identity-regexp) and --certificate-oidc-issuer for keyless signatures")
	}
	if t.IdentityRegexp != "" {
		if _, err := regexp.Compile(t.IdentityRegexp); err != nil {
			return fmt.Errorf("--certificate-identity-regexp: %w", err)
		}
	}
	return nil
}

// trustedRoot fetches the Sigstore trusted root from Sigstore's TUF
// repository with sigstore-go's TUF client (go-tuf's updater; its cache is
// $TUF_ROOT, else ~/.sigstore/root, shared with cosign); a variable for
// tests.
var trustedRoot = func() (root.TrustedMaterial, error) {
	o := tuf.DefaultOptions()
	if d := os.Getenv("TUF_ROOT"); d != "" {
		o.CachePath = d
	}
	tr, err := root.FetchTrustedRootWithOptions(o)
	if err != nil {
		return nil, fmt.Errorf("the Sigstore TUF repository (%s): %w (or pass --trusted-root FILE)", o.RepositoryBaseURL, err)
	}
	return tr, nil
}

// verifier is how signatures are checked: cosign's CheckOpts, all
// checked offline from what is stored beside the image. Keyless signatures
// need the trusted root, the SCT and the Rekor entry. With a key alone
// there is no transparency log to check (as cosign's
// --insecure-ignore-tlog); a key with --trusted-root requires each
// signature's Rekor entry too, checked against that root's logs.
func (t Trust) verifier(ctx context.Context, opts ...remote.Option) (*verifier, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	v := &verifier{opts: opts}
	var tm root.TrustedMaterial
	if t.TrustedRoot != "" {
		data, err := fsutil.ReadFile(t.TrustedRoot, maxTrustedRoot)
		if err != nil {
			return nil, fmt.Errorf("--trusted-root: %w", err)
		}
		if tm, err = root.NewTrustedRootFromJSON(data); err != nil {
			return nil, fmt.Errorf("--trusted-root %s: not a Sigstore trusted root: %w", t.TrustedRoot, err)
		}
	}
	if t.Key == "" {
		if tm == nil {
			var err error
			if tm, err = trustedRoot(); err != nil {
				return nil, fmt.Errorf("keyless verification needs the Sigstore trusted root: %w", err)
			}
		}
		id := cosign.Identity{Issuer: t.Issuer, Subject: t.Identity, SubjectRegExp: t.IdentityRegexp}
		v.co = &cosign.CheckOpts{TrustedMaterial: tm, Identities: []cosign.Identity{id}, Offline: true}
		return v, nil
	}
	data, err := fsutil.ReadFile(t.Key, maxKeyFile)
	if err != nil {
		return nil, err
	}
	pk, err := cryptoutils.UnmarshalPEMToPublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not a public key: %w", t.Key, err)
	}
	if err := goodkey.ValidatePubKey(pk); err != nil {
		return nil, fmt.Errorf("%s: %w", t.Key, err)
	}
	sv, err := signature.LoadDefaultVerifier(pk)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Key, err)
	}
	v.co = &cosign.CheckOpts{SigVerifier: sv, IgnoreTlog: tm == nil, TrustedMaterial: tm, Offline: true}
	return v, nil
}

// maxTrustedRoot bounds a trusted_root.json (Sigstore's is under 10 kB).
const maxTrustedRoot = 4 << 20

func explain(err error) string {
	var none *errNoMatch
	if errors.As(err, &none) {
		return "no signature by this key: " + registry.Text(err)
	}
	return registry.Text(err)
}
