package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// BlobError is a blob whose bytes in the registry are not the ones its
// manifest names.
type BlobError struct {
	Manifest name.Digest
	Blob     v1.Descriptor
	Got      string // the digest of what the registry served
	Size     int64  // how many bytes it served
}

func (e *BlobError) Error() string {
	return fmt.Sprintf("%s of %s: the registry serves %d bytes with digest %s, not the %d bytes with digest %s the manifest names (altered in storage or in transit)",
		e.Blob.MediaType, e.Manifest, e.Size, e.Got, e.Blob.Size, e.Blob.Digest)
}

// CheckBlobs reads the config and every layer of the image manifest at d
// from the registry to the end and checks each against the digest and
// size its manifest gives; it returns the blobs and bytes read. An index
// has no blobs of its own (its manifests are checked by digest when they
// are fetched). A blob of other bytes is a *BlobError.
func CheckBlobs(ctx context.Context, d name.Digest, opts ...remote.Option) (blobs int, bytes int64, err error) {
	ro := append([]remote.Option{remote.WithContext(ctx)}, opts...)
	desc, err := remote.Get(d, ro...)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", d, err)
	}
	if desc.MediaType.IsIndex() {
		return 0, 0, nil
	}
	var m v1.Manifest
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		return 0, 0, fmt.Errorf("%s: the manifest does not parse: %w", d, err)
	}
	for _, b := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		n, err := checkBlob(ctx, d, b, ro)
		bytes += n
		if err != nil {
			return blobs, bytes, err
		}
		blobs++
	}
	return blobs, bytes, nil
}

func checkBlob(ctx context.Context, d name.Digest, b v1.Descriptor, ro []remote.Option) (int64, error) {
	if b.Digest.Algorithm != "sha256" {
		return 0, fmt.Errorf("%s of %s: digest algorithm %q; only sha256 is checked", b.MediaType, d, b.Digest.Algorithm)
	}
	l, err := remote.Layer(d.Context().Digest(b.Digest.String()), ro...)
	if err != nil {
		return 0, fmt.Errorf("%s %s of %s: %w", b.MediaType, b.Digest, d, err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return 0, fmt.Errorf("%s %s of %s: %w", b.MediaType, b.Digest, d, err)
	}
	defer rc.Close()
	h := sha256.New()
	// One byte past the size the manifest gives is enough to know it lies.
	n, err := io.Copy(h, io.LimitReader(rc, b.Size+1))
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if err != nil || n != b.Size || got != b.Digest.String() {
		// go-containerregistry's own check may fail first, mid-read.
		return n, &BlobError{Manifest: d, Blob: b, Got: got, Size: n}
	}
	return n, nil
}
