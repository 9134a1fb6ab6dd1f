package sign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Predicate types dorisarm attests with: the first two are the ones the
// cosign CLI names spdxjson and slsaprovenance1; the scan result is ours.
const (
	PredicateSPDX  = "https://spdx.dev/Document"
	PredicateSLSA1 = "https://slsa.dev/provenance/v1"
	PredicateScan  = "https://dorisarm.dev/attestations/scan/v1"
	statementType  = "https://in-toto.io/Statement/v0.1"
)

type statement struct {
	Type          string          `json:"_type"`
	PredicateType string          `json:"predicateType"`
	Subject       []subject       `json:"subject"`
	Predicate     json.RawMessage `json:"predicate"`
	// Time is when a transparency log (or timestamp authority) the
	// verification trusted says the signature existed; zero without one.
	Time time.Time `json:"-"`
	// created is a bundle's referrer creation time: unsigned, it orders
	// bundles only where nothing signed does.
	created time.Time
}

type subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Attest attaches an in-toto statement about d (predicate of predicateType)
// as a cosign attestation, DSSE-signed with the signer's key. An earlier
// attestation of the same predicate type is replaced.
func (s *Signer) Attest(ctx context.Context, d name.Digest, predicateType string, predicate []byte) error {
	return s.attest(ctx, d, predicateType, predicate, true)
}

// AttestAdd attaches an attestation beside those of the same type (records
// that accumulate, such as promotions).
func (s *Signer) AttestAdd(ctx context.Context, d name.Digest, predicateType string, predicate []byte) error {
	return s.attest(ctx, d, predicateType, predicate, false)
}

func (s *Signer) attest(ctx context.Context, d name.Digest, predicateType string, predicate []byte, replace bool) error {
	st, err := newStatement(d, predicateType, predicate)
	if err != nil {
		return err
	}
	env, e, pub, err := s.envelope(ctx, st)
	if err != nil {
		return err
	}
	return storeAttestation(ctx, d, s.format, s.sv, st, env, pub, e, predicateType, replace,
		func(l layer) (layer, error) { return withLogEntry(l, e) }, s.opts)
}

// Statement is a verified attestation's statement.
type Statement struct {
	PredicateType string
	Subject       string // sha256:<hex>
	Predicate     json.RawMessage
	// Format is the form it was stored and verified in: a Sigstore bundle
	// (an OCI referrer) or cosign's legacy .att tag.
	Format string `json:"-"`
	// Time is its verified time from a transparency log (zero without one).
	Time    time.Time `json:"-"`
	created time.Time
}

// verifyAttestations returns the statements attached to d, in either
// format, whose signature verifies with trust and whose subject is d: the
// legacy .att tag's first, then the bundles'. It also says which
// predicate types are attached to d in either form, verified or not (read
// from the unverified envelopes and annotations), so that an altered
// attestation is told apart from a missing one.
func verifyAttestations(ctx context.Context, d name.Digest, trust Trust, opts ...remote.Option) ([]Statement, map[string]bool, error) {
	v, err := trust.verifier(ctx, opts...)
	if err != nil {
		return nil, nil, err
	}
	attached := map[string]bool{}
	// Nothing attached at all is "missing", not a verification failure.
	list, err := readLayers(ctx, d, attSuffix, opts)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range list {
		if st, err := statementOf(a.Payload); err == nil {
			attached[st.PredicateType] = true
		}
	}
	var out []Statement
	var errs []error
	if len(list) > 0 {
		sts, err := v.verifyAttestations(ctx, d, list)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, statements(sts, checkedLegacy)...)
	}
	bs, err := readBundles(ctx, d, opts)
	if err != nil {
		// A bundle referrer that cannot be read could be the one that
		// counts: nothing is judged without it.
		return nil, attached, err
	}
	bsts, battached, err := v.verifiedBundleAttestations(ctx, d, bs)
	if err != nil {
		errs = append(errs, err)
	}
	for t := range battached {
		attached[t] = true
	}
	out = append(out, statements(bsts, checkedBundle)...)
	if len(out) == 0 && len(errs) > 0 {
		return nil, attached, errors.Join(errs...)
	}
	return out, attached, nil
}

func statements(sts []statement, format string) []Statement {
	var out []Statement
	for _, st := range sts {
		sub := ""
		if len(st.Subject) > 0 {
			sub = "sha256:" + st.Subject[0].Digest["sha256"]
		}
		out = append(out, Statement{PredicateType: st.PredicateType, Subject: sub, Predicate: st.Predicate, Format: format, Time: st.Time, created: st.created})
	}
	return out
}

// replaced are the predicate types of which an image carries one
// attestation (dorisarm attests them with Attest, which replaces the legacy
// tag's); others accumulate (AttestAdd: promotion records). Bundles are
// never removed, so an image can carry several of a replaced type: see
// attestationChecks for which one counts.
var replaced = map[string]bool{PredicateSPDX: true, PredicateSLSA1: true, PredicateScan: true}

// dedupe drops a statement that a later one repeats (the same statement
// signed in both formats), keeping the later.
func dedupe(sts []Statement) []Statement {
	var out []Statement
	for i, st := range sts {
		repeated := false
		for _, later := range sts[i+1:] {
			if later.PredicateType == st.PredicateType && later.Subject == st.Subject && bytes.Equal(later.Predicate, st.Predicate) {
				repeated = true
				break
			}
		}
		if !repeated {
			out = append(out, st)
		}
	}
	return out
}
