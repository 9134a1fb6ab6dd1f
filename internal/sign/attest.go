package sign

import (
	"context"
	"encoding/json"

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
	env, err := signDSSE(s.sv, st)
	if err != nil {
		return err
	}
	return writeAttestation(ctx, d, attestationLayer(env, predicateType, nil), predicateType, replace, s.opts)
}

// Statement is a verified attestation's statement.
type Statement struct {
	PredicateType string
	Subject       string // sha256:<hex>
	Predicate     json.RawMessage
}

// verifyAttestations returns the statements attached to d whose DSSE
// signature verifies with trust and whose subject is d. It also says which
// predicate types are attached to d at all, verified or not (read from the
// unverified envelopes), so that an altered attestation is told apart from
// a missing one.
func verifyAttestations(ctx context.Context, d name.Digest, trust Trust, opts ...remote.Option) ([]Statement, map[string]bool, error) {
	v, err := trust.verifier(ctx, opts...)
	if err != nil {
		return nil, nil, err
	}
	// Nothing attached at all is "missing", not a verification failure.
	list, err := readLayers(ctx, d, attSuffix, opts)
	if err != nil {
		return nil, nil, err
	}
	if len(list) == 0 {
		return nil, nil, nil
	}
	types := map[string]bool{}
	for _, a := range list {
		if st, err := statementOf(a.Payload); err == nil {
			types[st.PredicateType] = true
		}
	}
	sts, err := v.verifyAttestations(ctx, d, list)
	if err != nil {
		return nil, types, err
	}
	var out []Statement
	for _, st := range sts {
		sub := ""
		if len(st.Subject) > 0 {
			sub = "sha256:" + st.Subject[0].Digest["sha256"]
		}
		out = append(out, Statement{PredicateType: st.PredicateType, Subject: sub, Predicate: st.Predicate})
	}
	return out, types, nil
}
