package sign

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/registry"
)

// How cosign stores signatures and attestations in a registry: an image
// tagged sha256-<hex>.sig (or .att) in the signed manifest's repository,
// one layer per signature, the payload as the layer's blob and the rest in
// the layer descriptor's annotations.
const (
	annSignature   = "dev.cosignproject.cosign/signature" // base64; empty for an attestation (signed inside its envelope)
	annCertificate = "dev.sigstore.cosign/certificate"    // keyless: the Fulcio certificate (PEM)
	annChain       = "dev.sigstore.cosign/chain"          // keyless: its chain (PEM)
	annBundle      = "dev.sigstore.cosign/bundle"         // keyless: the Rekor entry and its signed entry timestamp (JSON)
	annPredicate   = "predicateType"                      // attestations

	mediaSimpleSigning types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	mediaDSSE          types.MediaType = "application/vnd.dsse.envelope.v1+json"
	payloadInToto                      = "application/vnd.in-toto+json"

	sigSuffix = ".sig"
	attSuffix = ".att"
)

// layer is one stored signature or attestation.
type layer struct {
	Payload     []byte
	MediaType   types.MediaType
	Annotations map[string]string
}

// maxLayer bounds what is read of one signature layer (SBOMs are large,
// but not this large), and maxLayers what is read of all the layers under
// one tag: they are held in memory together.
const (
	maxLayer  = 64 << 20
	maxLayers = 256 << 20
	// maxLayerCount bounds the layers under one tag (one a signature or
	// attestation; re-signing adds one).
	maxLayerCount = 1000
)

func sigTag(d name.Digest, suffix string) name.Tag {
	return d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + suffix)
}

// companionKey is the context key of a CompanionFunc.
type companionKey struct{}

// CompanionFunc is told the tag and manifest digest of each signature or
// attestation manifest read (see WithCompanions).
type CompanionFunc func(tag name.Tag, digest v1.Hash)

// WithCompanions returns ctx carrying f: each signature or attestation
// manifest read under it, as VerifyRelease reads them, is reported to f
// with the digest of the bytes read, so that a caller can copy exactly the
// manifests that were verified (by digest, not by their movable tags).
func WithCompanions(ctx context.Context, f CompanionFunc) context.Context {
	return context.WithValue(ctx, companionKey{}, f)
}

// readLayers reads the layers stored beside d under suffix; none if the
// tag does not exist.
func readLayers(ctx context.Context, d name.Digest, suffix string, opts []remote.Option) ([]layer, error) {
	ro := append([]remote.Option{remote.WithContext(ctx)}, opts...)
	img, err := remote.Image(sigTag(d, suffix), ro...)
	if registry.NotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if len(m.Layers) > maxLayerCount {
		return nil, fmt.Errorf("%s: %d layers, more than the %d signatures or attestations one image is given", sigTag(d, suffix), len(m.Layers), maxLayerCount)
	}
	// The sizes are checked before anything is read: a layer larger than
	// its size fails its digest check as it is read.
	var total int64
	for _, desc := range m.Layers {
		if desc.Size > maxLayer || desc.Size < 0 {
			return nil, fmt.Errorf("%s: a %d-byte layer, more than a signature holds", sigTag(d, suffix), desc.Size)
		}
		if total += desc.Size; total > maxLayers {
			return nil, fmt.Errorf("%s: %d layers of more than %d MiB in all, more than the signatures of one image hold", sigTag(d, suffix), len(m.Layers), maxLayers>>20)
		}
	}
	var out []layer
	for _, desc := range m.Layers {
		b, err := readBlob(img, desc) // its size and digest checked
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sigTag(d, suffix), err)
		}
		out = append(out, layer{Payload: b, MediaType: desc.MediaType, Annotations: desc.Annotations})
	}
	// Reported once read whole within the bounds: a promotion copies it.
	if f, ok := ctx.Value(companionKey{}).(CompanionFunc); ok {
		h, err := img.Digest()
		if err != nil {
			return nil, err
		}
		f(sigTag(d, suffix), h)
	}
	return out, nil
}
