package sign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	cbundle "github.com/sigstore/cosign/v2/pkg/cosign/bundle"
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
	// Both formats store the one envelope (and log entry).
	if s.format.bundle() {
		b, err := makeBundle(s.sv, st, env, pub, e)
		if err != nil {
			return err
		}
		if err := writeBundle(ctx, d, b, predicateType, s.opts); err != nil {
			return err
		}
	}
	if !s.format.legacy() {
		return nil
	}
	l := attestationLayer(env, predicateType, nil)
	if e != nil {
		js, err := json.Marshal(cbundle.EntryToBundle(e))
		if err != nil {
			return err
		}
		l.Annotations[annBundle] = string(js)
	}
	return writeAttestation(ctx, d, l, predicateType, replace, s.opts)
}

// Statement is a verified attestation's statement.
type Statement struct {
	PredicateType string
	Subject       string // sha256:<hex>
	Predicate     json.RawMessage
	// Format is the form it was stored and verified in: a Sigstore bundle
	// (an OCI referrer) or cosign's legacy .att tag.
	Format string `json:"-"`
}

// verifyAttestations returns the statements attached to d, in either
// format, whose signature verifies with trust and whose subject is d: the
// legacy .att tag's first, then the bundles', oldest first. It also says
// which predicate types are attached to d in which form (checkedBundle,
// checkedLegacy), verified or not (read from the unverified envelopes and
// annotations), so that an altered attestation is told apart from a
// missing one.
func verifyAttestations(ctx context.Context, d name.Digest, trust Trust, opts ...remote.Option) ([]Statement, map[string]map[string]bool, error) {
	v, err := trust.verifier(ctx, opts...)
	if err != nil {
		return nil, nil, err
	}
	attached := map[string]map[string]bool{}
	attach := func(typ, form string) {
		if attached[typ] == nil {
			attached[typ] = map[string]bool{}
		}
		attached[typ][form] = true
	}
	// Nothing attached at all is "missing", not a verification failure.
	list, err := readLayers(ctx, d, attSuffix, opts)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range list {
		if st, err := statementOf(a.Payload); err == nil {
			attach(st.PredicateType, checkedLegacy)
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
		// Unreadable referrers verify nothing; the legacy tag still may.
		errs = append(errs, err)
	}
	bsts, battached, err := v.verifiedBundleAttestations(ctx, d, bs)
	if err != nil {
		errs = append(errs, err)
	}
	for t := range battached {
		attach(t, checkedBundle)
	}
	out = append(out, statements(newestReplaced(bsts), checkedBundle)...)
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
		out = append(out, Statement{PredicateType: st.PredicateType, Subject: sub, Predicate: st.Predicate, Format: format})
	}
	return out
}

// replaced are the predicate types of which an image carries one
// attestation, the newest (dorisarm attests them with Attest, which
// replaces the legacy tag's); others accumulate (AttestAdd: promotion
// records). In the bundle format, where nothing is removed, only the
// newest of a replaced type is read.
var replaced = map[string]bool{PredicateSPDX: true, PredicateSLSA1: true, PredicateScan: true}

// newestReplaced drops from sts (oldest first) each statement of a
// replaced type that a later one of its type follows (a bundle that did not
// say its type in its annotations).
func newestReplaced(sts []statement) []statement {
	var out []statement
	for i, st := range sts {
		later := false
		for _, n := range sts[i+1:] {
			if replaced[st.PredicateType] && n.PredicateType == st.PredicateType {
				later = true
				break
			}
		}
		if !later {
			out = append(out, st)
		}
	}
	return out
}

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
