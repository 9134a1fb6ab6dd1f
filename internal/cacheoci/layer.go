package cacheoci

import (
	"fmt"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// fileLayer is files.tar as a layer, streamed from disk (it can be
// gigabytes) under the digest and size meta.json records; the registry
// checks them when the upload completes.
type fileLayer struct {
	path   string
	digest v1.Hash
	size   int64
}

func newFileLayer(path, digest string, size int64) (*fileLayer, error) {
	h, err := v1.NewHash(digest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() != size {
		return nil, fmt.Errorf("%s is %d bytes, its meta.json says %d; prune the cache entry", path, st.Size(), size)
	}
	return &fileLayer{path: path, digest: h, size: size}, nil
}

func (l *fileLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) Size() (int64, error)                 { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error)  { return FilesType, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.path) }
