package sign

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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
func signDSSE(k *privKey, st []byte) ([]byte, error) {
	sv, err := signature.LoadSigner(k.priv, crypto.SHA256)
	if err != nil {
		return nil, err
	}
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

// writeSignature adds l to d's signatures, unless dup says one of those
// there already is the same.
func writeSignature(ctx context.Context, d name.Digest, l layer, opts []remote.Option, dup func(layer) bool) error {
	ls, err := readLayers(ctx, d, sigSuffix, opts)
	if err != nil {
		return err
	}
	for _, old := range ls {
		if dup != nil && dup(old) {
			return nil
		}
	}
	return writeLayers(ctx, d, sigSuffix, append(ls, l), opts)
}

// writeAttestation adds l to d's attestations; with replace, those of the
// same predicate type go.
func writeAttestation(ctx context.Context, d name.Digest, l layer, predicateType string, replace bool, opts []remote.Option) error {
	ls, err := readLayers(ctx, d, attSuffix, opts)
	if err != nil {
		return err
	}
	var keep []layer
	for _, old := range ls {
		if st, _ := statementOf(old.Payload); replace && st.PredicateType == predicateType {
			continue
		}
		keep = append(keep, old)
	}
	return writeLayers(ctx, d, attSuffix, append(keep, l), opts)
}
