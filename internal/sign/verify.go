package sign

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/empty"
	ocimutate "github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ocisig "github.com/sigstore/cosign/v2/pkg/oci/signature"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
)

// verifier checks signatures and attestations with cosign's own
// verification (pkg/cosign): with a public key, or keyless, where cosign
// checks each Fulcio certificate against the trusted root's CAs at the time
// Rekor logged it, its embedded SCT against the trusted CT logs, the Rekor
// bundle's signed entry timestamp and entry against the trusted Rekor keys,
// and the identity and issuer against the expected ones. dorisarm reads the
// stored layers itself (readLayers: bounded, each checked against its
// digest, read once) and hands cosign exactly those bytes.
type verifier struct {
	co   *cosign.CheckOpts
	opts []remote.Option
}

// errNoMatch says that nothing attached to a digest verified, and why.
type errNoMatch struct {
	what    string // signatures, attestations
	reasons []string
}

func (e *errNoMatch) Error() string {
	if len(e.reasons) == 0 {
		return "no " + e.what + " found"
	}
	return "no matching " + e.what + ": " + strings.Join(e.reasons, "; ")
}

func (e *errNoMatch) add(err error) {
	for _, r := range e.reasons {
		if r == err.Error() {
			return
		}
	}
	e.reasons = append(e.reasons, err.Error())
}

// ociSignature is l as cosign's oci.Signature: the bytes readLayers read
// (checked against the descriptor's digest) and the descriptor's
// annotations, so cosign verifies what dorisarm read, not a second fetch.
func ociSignature(l layer) (oci.Signature, error) {
	sl := static.NewLayer(l.Payload, l.MediaType)
	dg, err := sl.Digest()
	if err != nil {
		return nil, err
	}
	return ocisig.New(sl, v1.Descriptor{MediaType: l.MediaType, Size: int64(len(l.Payload)), Digest: dg, Annotations: l.Annotations}), nil
}

func digestHash(d name.Digest) (v1.Hash, error) { return v1.NewHash(d.DigestStr()) }

// verifySignatures checks that at least one signature stored beside d
// verifies and signs d, and says in which forms one did (Check.Formats).
func (v *verifier) verifySignatures(ctx context.Context, d name.Digest) ([]string, error) {
	_, formats, err := v.verifiedSignature(ctx, d)
	return formats, err
}

// verifiedSignature is who made a signature of d that verifies and signs
// d (see signer; the bundle's when both forms verify: the format cosign v3
// writes), and the forms in which one did: a Sigstore bundle and the legacy
// .sig tag are both read, so that a promotion copies each form it verified.
func (v *verifier) verifiedSignature(ctx context.Context, d name.Digest) (who string, formats []string, err error) {
	nm := &errNoMatch{what: "signatures"}
	bs, err := readBundles(ctx, d, v.opts)
	if err != nil {
		nm.add(err) // unreadable referrers verify nothing; the legacy tag still may
	}
	if len(bs) > 0 {
		b, err := v.verifiedBundleSignature(ctx, d, bs)
		switch {
		case err == nil:
			if who, err = v.bundleSigner(b.Bundle); err != nil {
				return "", nil, err
			}
			formats = append(formats, checkedBundle)
		default:
			var none *errNoMatch
			if !errors.As(err, &none) || len(none.reasons) > 0 {
				nm.add(err)
			}
		}
	}
	// Any one signature that verifies is enough (cosign's rule): an
	// unreadable form beside a verified one is no reason to refuse.
	ls, err := readLayers(ctx, d, sigSuffix, v.opts)
	if err != nil {
		if len(formats) > 0 {
			return who, formats, nil
		}
		return "", nil, err
	}
	for _, l := range ls {
		sig, err := v.verifySignature(ctx, d, l)
		if err != nil {
			nm.add(err)
			continue
		}
		if who == "" {
			if who, err = v.signer(sig); err != nil {
				return "", nil, err
			}
		}
		formats = append(formats, checkedLegacy)
		break
	}
	if len(formats) == 0 {
		return "", nil, nm
	}
	return who, formats, nil
}

// verifySignature checks one stored signature with cosign: the signature
// (and, keyless, its certificate, SCT, Rekor bundle and identity), then
// that its simple-signing payload names d. It returns the signature
// cosign verified.
func (v *verifier) verifySignature(ctx context.Context, d name.Digest, l layer) (oci.Signature, error) {
	h, err := digestHash(d)
	if err != nil {
		return nil, err
	}
	sig, err := ociSignature(l)
	if err != nil {
		return nil, err
	}
	co := *v.co
	co.ClaimVerifier = cosign.SimpleClaimVerifier
	if _, err = cosign.VerifyImageSignature(ctx, sig, h, &co); err != nil {
		return nil, err
	}
	return sig, nil
}

// signer names who made sig, which cosign verified: the key's
// fingerprint (the SHA-256 of its DER encoding), or the certificate's
// identity and OIDC issuer.
func (v *verifier) signer(sig oci.Signature) (string, error) {
	if v.co.SigVerifier != nil {
		return v.keyName()
	}
	cert, err := sig.Cert()
	if err != nil || cert == nil {
		return "", fmt.Errorf("the verified signature has no certificate: %v", err)
	}
	return certName(cert)
}

// bundleSigner is signer for a bundle cosign verified.
func (v *verifier) bundleSigner(b *sgbundle.Bundle) (string, error) {
	if v.co.SigVerifier != nil {
		return v.keyName()
	}
	vc, err := b.VerificationContent()
	if err != nil {
		return "", err
	}
	cert := vc.Certificate()
	if cert == nil {
		return "", errors.New("the verified bundle has no certificate")
	}
	return certName(cert)
}

func (v *verifier) keyName() (string, error) {
	pk, err := v.co.SigVerifier.PublicKey()
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKIXPublicKey(pk)
	if err != nil {
		return "", err
	}
	return "key sha256:" + sha256Hex(der), nil
}

func certName(cert *x509.Certificate) (string, error) {
	sum, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (issuer %s)", sum.SubjectAlternativeName, sum.Extensions.Issuer), nil
}

// SignatureChecker checks the signatures of artifacts (step-cache
// entries and other non-release artifacts, which carry no attestations)
// against one Trust, its key or trusted root loaded once.
type SignatureChecker struct{ v *verifier }

// NewSignatureChecker loads trust's key or trusted root.
func NewSignatureChecker(ctx context.Context, trust Trust) (*SignatureChecker, error) {
	v, err := trust.verifier(ctx)
	if err != nil {
		return nil, err
	}
	return &SignatureChecker{v: v}, nil
}

// Check verifies, with cosign, that d carries a signature the trust
// accepts, in either format, reading it through opts, and returns who
// made it (see signer).
func (c *SignatureChecker) Check(ctx context.Context, d name.Digest, opts ...remote.Option) (string, error) {
	v := *c.v
	v.opts = opts
	who, _, err := v.verifiedSignature(ctx, d)
	return who, err
}

// verifyAttestations returns the statements of the attestations stored
// beside d that cosign verifies and whose subject is d; an error if none
// does. Each attestation is verified on its own: one bad one does not hide
// the good ones.
func (v *verifier) verifyAttestations(ctx context.Context, d name.Digest, ls []layer) ([]statement, error) {
	h, err := digestHash(d)
	if err != nil {
		return nil, err
	}
	co := *v.co
	co.ClaimVerifier = cosign.IntotoSubjectClaimVerifier
	nm := &errNoMatch{what: "attestations"}
	var out []statement
	for _, l := range ls {
		st, err := v.verifyAttestation(ctx, h, l, &co)
		if err != nil {
			nm.add(err)
			continue
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		return nil, nm
	}
	return out, nil
}

func (v *verifier) verifyAttestation(ctx context.Context, h v1.Hash, l layer, co *cosign.CheckOpts) (statement, error) {
	var st statement
	sig, err := ociSignature(l)
	if err != nil {
		return st, err
	}
	one, err := ocimutate.AppendSignatures(empty.Signatures(), false, sig)
	if err != nil {
		return st, err
	}
	checked, logged, err := cosign.VerifyImageAttestation(ctx, one, h, co)
	if err != nil {
		// cosign says "no matching attestations: WHY" of its one; the
		// caller says that of them all.
		return st, errors.New(strings.TrimPrefix(err.Error(), "no matching attestations: "))
	}
	if len(checked) != 1 {
		return st, fmt.Errorf("cosign verified %d attestations of one", len(checked))
	}
	// The statement of the envelope cosign verified (its DSSE signature, its
	// in-toto payload type and its subject): the predicate is dorisarm's
	// policy to judge.
	pl, err := checked[0].Payload()
	if err != nil {
		return st, err
	}
	if st, err = statementOf(pl); err != nil {
		return st, err
	}
	// The log's time, when cosign checked the Rekor bundle.
	if logged {
		if rb, err := checked[0].Bundle(); err == nil && rb != nil {
			st.Time = time.Unix(rb.Payload.IntegratedTime, 0)
		}
	}
	return st, nil
}

// statementOf reads the in-toto statement inside an attestation (a DSSE
// envelope).
func statementOf(pl []byte) (statement, error) {
	var st statement
	var env struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(pl, &env); err != nil {
		return st, fmt.Errorf("an attestation that is not a DSSE envelope: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return st, fmt.Errorf("the envelope's payload: %w", err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("the envelope's payload is not an in-toto statement: %w", err)
	}
	return st, nil
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
