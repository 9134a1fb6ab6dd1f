package sign

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/dorisarm/dorisarm/internal/sct"
	"github.com/dorisarm/dorisarm/internal/trustroot"
)

// verifier checks signatures and attestations stored the way cosign
// stores them: with a public key, or keyless, where each carries a Fulcio
// certificate (checked against the trusted root's CAs at the time Rekor
// logged it, with its embedded SCT checked against the trusted CT logs), a
// Rekor bundle (its signed entry timestamp checked with the trusted Rekor
// key, its entry matched against the signature) and an identity and issuer
// that must be the expected ones. These are the checks cosign's own
// verification makes for this storage format.
type verifier struct {
	key        *pubKey // with a key
	tm         *trustroot.Root
	identity   string
	identityRE *regexp.Regexp
	issuer     string
	opts       []remote.Option
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

// verifySignatures checks that at least one signature stored beside d
// verifies and signs d.
func (v *verifier) verifySignatures(ctx context.Context, d name.Digest) error {
	ls, err := readLayers(ctx, d, sigSuffix, v.opts)
	if err != nil {
		return err
	}
	nm := &errNoMatch{what: "signatures"}
	for _, l := range ls {
		if err := v.verifySignature(d, l); err != nil {
			nm.add(err)
			continue
		}
		return nil
	}
	return nm
}

func (v *verifier) verifySignature(d name.Digest, l layer) error {
	sig, err := base64.StdEncoding.DecodeString(l.Annotations[annSignature])
	if err != nil || len(sig) == 0 {
		return errors.New("a signature layer without a signature")
	}
	pv, err := v.signer(l, func(e rekorEntry, certDER []byte) error { return e.matchesSignature(l.Payload, sig, certDER) })
	if err != nil {
		return err
	}
	if err := pv.verify(sig, l.Payload); err != nil {
		return errors.New("invalid signature when validating ASN.1 encoded signature")
	}
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(l.Payload, &p); err != nil {
		return fmt.Errorf("the signed payload is not a cosign signature payload: %w", err)
	}
	if p.Critical.Type != payload.CosignSignatureType || p.Critical.Image.DockerManifestDigest != d.DigestStr() {
		return fmt.Errorf("the signature is for %s, not %s", p.Critical.Image.DockerManifestDigest, d.DigestStr())
	}
	return nil
}

// verifyAttestations returns the statements of the attestations stored
// beside d that verify and are about d; an error if none does.
func (v *verifier) verifyAttestations(d name.Digest, ls []layer) ([]statement, error) {
	nm := &errNoMatch{what: "attestations"}
	var out []statement
	for _, l := range ls {
		st, err := v.verifyAttestation(d, l)
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

type envelope struct {
	PayloadType string        `json:"payloadType"`
	Payload     string        `json:"payload"`
	Signatures  []envelopeSig `json:"signatures"`
}

type envelopeSig struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// pae is DSSE's pre-authentication encoding: what an envelope's signature signs.
func pae(payloadType string, body []byte) []byte {
	return []byte(fmt.Sprintf("DSSEv1 %d %s %d %s", len(payloadType), payloadType, len(body), body))
}

func (v *verifier) verifyAttestation(d name.Digest, l layer) (statement, error) {
	var st statement
	var env envelope
	if err := json.Unmarshal(l.Payload, &env); err != nil || len(env.Signatures) == 0 {
		return st, errors.New("an attestation that is not a signed DSSE envelope")
	}
	// The signature covers the payload type: one of another type is
	// another kind of document, whatever its body parses as.
	if env.PayloadType != payloadInToto {
		return st, fmt.Errorf("a DSSE envelope of payloadType %q, not an in-toto attestation (%s)", env.PayloadType, payloadInToto)
	}
	body, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return st, fmt.Errorf("the envelope's payload: %w", err)
	}
	pv, err := v.signer(l, func(e rekorEntry, certDER []byte) error { return e.matchesEnvelope(l.Payload, body, env, certDER) })
	if err != nil {
		return st, err
	}
	ok := false
	for _, s := range env.Signatures {
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err == nil && pv.verify(sig, pae(env.PayloadType, body)) == nil {
			ok = true
			break
		}
	}
	if !ok {
		return st, errors.New("the envelope's signature does not verify")
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("the envelope's payload is not an in-toto statement: %w", err)
	}
	hex := strings.TrimPrefix(d.DigestStr(), "sha256:")
	for _, s := range st.Subject {
		if s.Digest["sha256"] == hex {
			return st, nil
		}
	}
	return st, fmt.Errorf("the %s attestation is not about %s", st.PredicateType, d.DigestStr())
}

// signer is what verifies l's signature: the key, or (keyless) the key of
// l's certificate once the certificate, its SCT, the Rekor bundle and the
// identity check out; matches says whether the Rekor entry is about l.
func (v *verifier) signer(l layer, matches func(rekorEntry, []byte) error) (*pubKey, error) {
	if v.key != nil {
		return v.key, nil
	}
	blk, _ := pem.Decode([]byte(l.Annotations[annCertificate]))
	if blk == nil {
		return nil, errors.New("no certificate: not a keyless signature")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the certificate: %w", err)
	}
	logged, entry, err := v.checkBundle(l.Annotations[annBundle])
	if err != nil {
		return nil, err
	}
	if logged.Before(cert.NotBefore) || logged.After(cert.NotAfter) {
		return nil, fmt.Errorf("logged in Rekor at %s, outside the certificate's validity (%s to %s)", logged.UTC(), cert.NotBefore.UTC(), cert.NotAfter.UTC())
	}
	var chain []*x509.Certificate
	var caErrs []string
	for _, ca := range v.tm.CAs {
		chains, err := ca.Verify(cert, logged)
		if err == nil && len(chains) > 0 && len(chains[0]) > 1 {
			chain = chains[0]
			break
		}
		if err != nil {
			caErrs = append(caErrs, err.Error())
		}
	}
	if chain == nil {
		return nil, fmt.Errorf("the certificate is not from a trusted Fulcio CA: %s", strings.Join(caErrs, "; "))
	}
	if err := v.checkSCT(cert, chain[1]); err != nil {
		return nil, err
	}
	if err := v.checkIdentity(cert); err != nil {
		return nil, err
	}
	if err := matches(entry, cert.Raw); err != nil {
		return nil, fmt.Errorf("the Rekor entry is not this signature's: %w", err)
	}
	return newPubKey(cert.PublicKey)
}

// checkBundle verifies the Rekor bundle's signed entry timestamp with the
// trusted Rekor key and returns when the entry was logged and the entry.
func (v *verifier) checkBundle(raw string) (time.Time, rekorEntry, error) {
	var e rekorEntry
	if raw == "" {
		return time.Time{}, e, errors.New("no Rekor bundle: the signature was not logged")
	}
	var b rekorBundle
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		return time.Time{}, e, fmt.Errorf("the Rekor bundle: %w", err)
	}
	log := v.tm.Tlogs[b.Payload.LogID]
	if log == nil {
		return time.Time{}, e, fmt.Errorf("logged in Rekor log %s, which the trusted root does not list", b.Payload.LogID)
	}
	pub, ok := log.Key.(*ecdsa.PublicKey)
	if !ok {
		return time.Time{}, e, fmt.Errorf("Rekor log %s: not an ECDSA key", b.Payload.LogID)
	}
	canon, err := json.Marshal(b.Payload) // canonical: fields in key order, no escapes in base64 or hex
	if err != nil {
		return time.Time{}, e, err
	}
	h := sha256.Sum256(canon)
	if !ecdsa.VerifyASN1(pub, h[:], b.SignedEntryTimestamp) {
		return time.Time{}, e, errors.New("the Rekor bundle's signed entry timestamp does not verify with the trusted Rekor key")
	}
	logged := time.Unix(b.Payload.IntegratedTime, 0)
	if !log.ValidAt(logged) {
		return time.Time{}, e, fmt.Errorf("logged at %s, outside Rekor log %s's validity", logged.UTC(), b.Payload.LogID)
	}
	body, err := base64.StdEncoding.DecodeString(b.Payload.Body)
	if err == nil {
		err = json.Unmarshal(body, &e)
	}
	if err != nil {
		return time.Time{}, e, fmt.Errorf("the Rekor entry: %w", err)
	}
	return logged, e, nil
}

// checkSCT checks that cert embeds an SCT from a CT log of the trusted
// root, made while the root trusts that log's key.
func (v *verifier) checkSCT(cert, issuer *x509.Certificate) error {
	scts, err := sct.Embedded(cert)
	if err != nil || len(scts) == 0 {
		return errors.New("the certificate has no embedded SCT (certificate transparency)")
	}
	for _, s := range scts {
		log := v.tm.CTLogs[hex.EncodeToString(s.LogID[:])]
		if log == nil || !log.ValidAt(s.Time()) {
			continue
		}
		if sct.Verify(s, cert, issuer, log.Key) == nil {
			return nil
		}
	}
	return errors.New("no SCT of the certificate verifies with a trusted CT log")
}

// checkIdentity matches the certificate's identity and OIDC issuer.
func (v *verifier) checkIdentity(cert *x509.Certificate) error {
	sum, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		return fmt.Errorf("the certificate: %w", err)
	}
	id := sum.SubjectAlternativeName
	switch {
	case v.identityRE != nil && !v.identityRE.MatchString(id):
		return fmt.Errorf("signed by %s, which does not match %s", id, v.identityRE)
	case v.identityRE == nil && id != v.identity:
		return fmt.Errorf("signed by %s, not %s", id, v.identity)
	case sum.Extensions.Issuer != v.issuer:
		return fmt.Errorf("the OIDC issuer is %s, not %s", sum.Extensions.Issuer, v.issuer)
	}
	return nil
}

// rekorEntry is the part of a Rekor entry (hashedrekord or dsse, v0.0.1)
// that ties it to a signature.
type rekorEntry struct {
	Kind string `json:"kind"`
	Spec struct {
		Data struct { // hashedrekord
			Hash struct {
				Algorithm string `json:"algorithm"`
				Value     string `json:"value"`
			} `json:"hash"`
		} `json:"data"`
		Signature struct { // hashedrekord
			Content   []byte `json:"content"`
			PublicKey struct {
				Content []byte `json:"content"` // a PEM certificate
			} `json:"publicKey"`
		} `json:"signature"`
		EnvelopeHash struct { // dsse
			Value string `json:"value"`
		} `json:"envelopeHash"`
		PayloadHash struct { // dsse
			Value string `json:"value"`
		} `json:"payloadHash"`
		Signatures []struct { // dsse
			Signature string `json:"signature"`
			Verifier  []byte `json:"verifier"` // a PEM certificate
		} `json:"signatures"`
	} `json:"spec"`
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func samePEMCert(p, der []byte) bool {
	blk, _ := pem.Decode(p)
	return blk != nil && bytes.Equal(blk.Bytes, der)
}

func (e rekorEntry) matchesSignature(pl, sig, certDER []byte) error {
	switch {
	case e.Kind != "hashedrekord":
		return fmt.Errorf("a %q entry, want hashedrekord", e.Kind)
	case e.Spec.Data.Hash.Value != sha256Hex(pl):
		return errors.New("another payload hash")
	case !bytes.Equal(e.Spec.Signature.Content, sig):
		return errors.New("another signature")
	case !samePEMCert(e.Spec.Signature.PublicKey.Content, certDER):
		return errors.New("another certificate")
	}
	return nil
}

func (e rekorEntry) matchesEnvelope(raw, body []byte, env envelope, certDER []byte) error {
	switch {
	case e.Kind != "dsse":
		return fmt.Errorf("a %q entry, want dsse", e.Kind)
	case e.Spec.EnvelopeHash.Value != sha256Hex(raw):
		return errors.New("another envelope hash")
	case e.Spec.PayloadHash.Value != sha256Hex(body):
		return errors.New("another payload hash")
	case len(e.Spec.Signatures) != 1 || len(env.Signatures) != 1 || e.Spec.Signatures[0].Signature != env.Signatures[0].Sig:
		return errors.New("another signature")
	case !samePEMCert(e.Spec.Signatures[0].Verifier, certDER):
		return errors.New("another certificate")
	}
	return nil
}
