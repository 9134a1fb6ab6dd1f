package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	cbundle "github.com/sigstore/cosign/v2/pkg/cosign/bundle"
	cosignremote "github.com/sigstore/cosign/v2/pkg/cosign/remote"
	"github.com/sigstore/cosign/v2/pkg/oci"
	ocimutate "github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	ocistatic "github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
)

// This file is what key-based and keyless signing share: the payloads
// they sign and storing a signature or attestation the way cosign does.

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

// signDSSE wraps st in a DSSE envelope signed by k, with sigstore's DSSE
// signer (the one cosign attests with).
func signDSSE(sv signature.Signer, st []byte) ([]byte, error) {
	return dsse.WrapSigner(sv, payloadInToto).SignMessage(bytes.NewReader(st))
}

// signatureLayer is a signature of payload as cosign stores it; a keyless
// one carries its certificate, chain and Rekor bundle (keyless, if not nil).
func signatureLayer(payload, sig []byte, keyless map[string]string) layer {
	ann := map[string]string{annSignature: base64.StdEncoding.EncodeToString(sig)}
	for k, v := range keyless {
		ann[k] = v
	}
	return layer{Payload: payload, MediaType: mediaSimpleSigning, Annotations: ann}
}

// attestationLayer is a DSSE envelope as cosign stores it.
func attestationLayer(envelope []byte, predicateType string, keyless map[string]string) layer {
	ann := map[string]string{annSignature: "", annPredicate: predicateType}
	for k, v := range keyless {
		ann[k] = v
	}
	return layer{Payload: envelope, MediaType: mediaDSSE, Annotations: ann}
}

// withLogEntry adds e, the Rekor entry of l's signature, to l as cosign
// stores it (its Rekor bundle); l as it is when e is nil (not logged).
func withLogEntry(l layer, e *models.LogEntryAnon) (layer, error) {
	if e == nil {
		return l, nil
	}
	js, err := json.Marshal(cbundle.EntryToBundle(e))
	if err != nil {
		return l, err
	}
	l.Annotations[annBundle] = string(js)
	return l, nil
}

// storeAttestation stores env, the DSSE envelope of the statement st
// signed by sv (signerPEM: its certificate, or its key) and logged as e (nil:
// not logged), in the formats f asks for: a Sigstore bundle, and the legacy
// .att layer legacy makes of it (with replace, replacing those of its
// predicate type). Both forms store the one envelope and log entry.
func storeAttestation(ctx context.Context, d name.Digest, f Format, sv signature.PublicKeyProvider, st, env, signerPEM []byte, e *models.LogEntryAnon,
	predicateType string, replace bool, legacy func(layer) (layer, error), opts []remote.Option) error {
	if f.bundle() {
		b, err := makeBundle(sv, st, env, signerPEM, e)
		if err != nil {
			return err
		}
		if err := writeBundle(ctx, d, b, predicateType, opts); err != nil {
			return err
		}
	}
	if !f.legacy() {
		return nil
	}
	l, err := legacy(attestationLayer(env, predicateType, nil))
	if err != nil {
		return err
	}
	return writeAttestation(ctx, d, l, predicateType, replace, opts)
}

// staticOf is l as a cosign signature to attach: its payload, its
// base64 signature (empty for an attestation) and its other annotations.
func staticOf(l layer) (oci.Signature, error) {
	ann := maps.Clone(l.Annotations)
	delete(ann, annSignature)
	if ann == nil {
		ann = map[string]string{}
	}
	return ocistatic.NewSignature(l.Payload, l.Annotations[annSignature], ocistatic.WithLayerMediaType(l.MediaType), ocistatic.WithAnnotations(ann))
}

// ociRemote are cosign's registry options over dorisarm's.
func ociRemote(ctx context.Context, opts []remote.Option) ociremote.Option {
	return ociremote.WithRemoteOptions(append([]remote.Option{remote.WithContext(ctx)}, opts...)...)
}

// writeSignature adds l to d's signatures with cosign's storage
// (pkg/oci/{static,mutate,remote}), unless dd finds one of those there
// already the same (cosign's duplicate check: same payload, verified by
// the signer's key).
func writeSignature(ctx context.Context, d name.Digest, l layer, opts []remote.Option, dd ocimutate.DupeDetector) error {
	var so []ocimutate.SignOption
	if dd != nil {
		so = append(so, ocimutate.WithDupeDetector(dd))
	}
	return attach(ctx, d, l, opts, ocimutate.AttachSignatureToEntity, ociremote.WriteSignatures, so)
}

// writeAttestation adds l to d's attestations with cosign's storage; with
// replace, those of the same predicate type go (cosign's replace
// operation, as cosign attest --replace).
func writeAttestation(ctx context.Context, d name.Digest, l layer, predicateType string, replace bool, opts []remote.Option) error {
	var so []ocimutate.SignOption
	if replace {
		so = append(so, ocimutate.WithReplaceOp(cosignremote.NewReplaceOp(predicateType)))
	}
	return attach(ctx, d, l, opts, ocimutate.AttachAttestationToEntity, ociremote.WriteAttestations, so)
}

// attach adds l beside d with cosign's attach and write functions for its
// kind (signatures or attestations).
func attach(ctx context.Context, d name.Digest, l layer, opts []remote.Option,
	add func(oci.SignedEntity, oci.Signature, ...ocimutate.SignOption) (oci.SignedEntity, error),
	write func(name.Repository, oci.SignedEntity, ...ociremote.Option) error,
	so []ocimutate.SignOption) error {
	sig, err := staticOf(l)
	if err != nil {
		return err
	}
	ro := ociRemote(ctx, opts)
	se, err := ociremote.SignedEntity(d, ro)
	if err != nil {
		return err
	}
	if se, err = add(se, sig, so...); err != nil {
		return err
	}
	return write(d.Repository, se, ro)
}
