package sign

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/oci"
	ocimutate "github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/cosign/v2/pkg/types"
)

// This file is what key-based and keyless signing share: the in-toto
// statement an attestation signs, and storing a signature or attestation
// the way cosign does (the sha256-<digest>.sig and .att tags).

// newStatement is the in-toto statement that predicate (of predicateType)
// is about d.
func newStatement(d name.Digest, predicateType string, predicate []byte) ([]byte, error) {
	if !json.Valid(predicate) {
		return nil, fmt.Errorf("%s predicate for %s is not JSON", predicateType, d)
	}
	hex := strings.TrimPrefix(d.DigestStr(), "sha256:")
	return json.Marshal(statement{Type: statementType, PredicateType: predicateType,
		Subject: []subject{{Name: d.Context().Name(), Digest: map[string]string{"sha256": hex}}}, Predicate: predicate})
}

// newAttestation is the layer cosign stores a DSSE envelope in: the
// envelope as its payload, the predicate type as an annotation; a keyless
// one also carries its certificate and Rekor bundle (more).
func newAttestation(envelope []byte, predicateType string, more ...static.Option) (oci.Signature, error) {
	opts := append([]static.Option{static.WithLayerMediaType(types.DssePayloadType),
		static.WithAnnotations(map[string]string{"predicateType": predicateType})}, more...)
	return static.NewAttestation(envelope, opts...)
}

// writeSignature adds sig to d's signatures in the registry.
func writeSignature(ctx context.Context, d name.Digest, sig oci.Signature, opts []remote.Option, mopts ...ocimutate.SignOption) error {
	ro := ociOpts(ctx, opts)
	se, err := ociremote.SignedEntity(d, ro...)
	if err != nil {
		return err
	}
	if se, err = ocimutate.AttachSignatureToEntity(se, sig, mopts...); err != nil {
		return err
	}
	return ociremote.WriteSignatures(d.Repository, se, ro...)
}

// writeAttestation adds att to d's attestations in the registry; with
// replace, those of the same predicate type go.
func writeAttestation(ctx context.Context, d name.Digest, att oci.Signature, predicateType string, replace bool, opts []remote.Option) error {
	ro := ociOpts(ctx, opts)
	se, err := ociremote.SignedEntity(d, ro...)
	if err != nil {
		return err
	}
	var mopts []ocimutate.SignOption
	if replace {
		mopts = append(mopts, ocimutate.WithReplaceOp(replaceType(predicateType)))
	}
	if se, err = ocimutate.AttachAttestationToEntity(se, att, mopts...); err != nil {
		return err
	}
	return ociremote.WriteAttestations(d.Repository, se, ro...)
}
