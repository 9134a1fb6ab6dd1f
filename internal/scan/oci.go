package scan

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/registry"
)

// Images are walked from their manifests' bytes, not through a library's
// view of them: every descriptor is followed whatever its media type says
// (or does not say), every blob read is checked against its digest and read
// to its end, and an index that lists itself is a finding, not a loop.

// maxManifest bounds one manifest or index (registries accept 4 MiB).
const maxManifest = 4 << 20

// blobStore opens the blobs of one image source.
type blobStore interface {
	open(d v1.Hash) (io.ReadCloser, error)
}

// layoutStore is an OCI layout directory.
type layoutStore struct{ dir string }

func (s layoutStore) open(d v1.Hash) (io.ReadCloser, error) {
	if d.Algorithm != "sha256" || len(d.Hex) != 64 {
		return nil, fmt.Errorf("unsupported digest %q", d)
	}
	if _, err := hex.DecodeString(d.Hex); err != nil {
		return nil, fmt.Errorf("bad digest %q", d)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, "blobs", d.Algorithm, d.Hex), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("blob %s is not a regular file", d)
	}
	return f, nil
}

// remoteStore is a repository in a registry.
type remoteStore struct {
	repo name.Repository
	opts []remote.Option
}

func (s remoteStore) open(d v1.Hash) (io.ReadCloser, error) {
	l, err := remote.Layer(s.repo.Digest(d.String()), s.opts...)
	if err != nil {
		return nil, err
	}
	return l.Compressed()
}

// manifest fetches a manifest or index by digest (registries serve them
// from the manifests endpoint, layouts from blobs).
func (s remoteStore) manifest(d v1.Hash) ([]byte, error) {
	desc, err := remote.Get(s.repo.Digest(d.String()), s.opts...)
	if err != nil {
		return nil, err
	}
	return desc.Manifest, nil
}

// verifier hashes what is read through it; at EOF it checks the digest and
// size the descriptor promised.
type verifier struct {
	r        io.Reader
	h        hash.Hash
	n        int64
	want     v1.Hash
	size     int64 // -1: unknown
	done     bool
	mismatch string
}

func newVerifier(r io.Reader, want v1.Hash, size int64) *verifier {
	return &verifier{r: r, h: sha256.New(), want: want, size: size}
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if err == io.EOF && !v.done {
		v.done = true
		got := hex.EncodeToString(v.h.Sum(nil))
		switch {
		case v.want.Algorithm != "sha256":
			v.mismatch = fmt.Sprintf("digest algorithm %q cannot be checked", v.want.Algorithm)
		case got != v.want.Hex:
			v.mismatch = fmt.Sprintf("content is sha256:%s, not %s", got, v.want)
		case v.size >= 0 && v.n != v.size:
			v.mismatch = fmt.Sprintf("%d bytes, the descriptor says %d", v.n, v.size)
		}
		if v.mismatch != "" {
			return n, fmt.Errorf("blob %s: %s", v.want, v.mismatch)
		}
	}
	return n, err
}

// ociLayout scans every image of an OCI layout directory (oci:DIR).
func (w *walker) ociLayout(arg, dir string) error {
	st, err := os.Stat(filepath.Join(dir, "oci-layout"))
	if err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%w %s: not an OCI layout (no oci-layout file)", ErrInput, arg)
	}
	f, err := os.OpenFile(filepath.Join(dir, "index.json"), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%w %s: not an OCI layout: %w", ErrInput, arg, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%w %s: index.json is not a regular file", ErrInput, arg)
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil || len(raw) > maxManifest {
		return fmt.Errorf("%w %s: index.json unreadable or larger than %d bytes", ErrInput, arg, maxManifest)
	}
	w.seen = map[string]bool{}
	w.node(layoutStore{dir}, raw, "", arg, 0, map[string]bool{})
	return nil
}

// remote scans an image or index in a registry.
func (w *walker) remote(arg, ref string) error {
	var opts []name.Option
	if w.opts.Insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return fmt.Errorf("%w %s: not an image reference: %w", ErrInput, arg, err)
	}
	// The docker config's credentials, and the registry guard: schema 1
	// refused, stalls bounded (every manifest is hashed here as well).
	ropts := registry.Options{Insecure: w.opts.Insecure, Stall: w.opts.RegistryStall, MinRate: w.opts.RegistryMinRate}.Remote(w.ctx)
	desc, err := remote.Get(r, ropts...)
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrInput, arg, err)
	}
	raw := desc.Manifest
	if got := sha256.Sum256(raw); desc.Digest.Algorithm == "sha256" && hex.EncodeToString(got[:]) != desc.Digest.Hex {
		return fmt.Errorf("%w %s: the registry's manifest does not match its digest %s", ErrInput, arg, desc.Digest)
	}
	w.seen = map[string]bool{}
	w.node(remoteStore{r.Context(), ropts}, raw, string(desc.MediaType), arg, 0, map[string]bool{desc.Digest.String(): true})
	return nil
}

// ociDoc is any of an OCI index, OCI manifest, Docker manifest list or
// Docker manifest: the fields that matter, whatever the media type.
type ociDoc struct {
	MediaType string          `json:"mediaType"`
	Manifests []v1.Descriptor `json:"manifests"`
	Layers    []v1.Descriptor `json:"layers"`
	FSLayers  []struct {
		BlobSum v1.Hash `json:"blobSum"`
	} `json:"fsLayers"`
}

// node scans one index or manifest (raw bytes already checked against
// their digest). stack holds the digests on the path from the root.
func (w *walker) node(store blobStore, raw []byte, mediaType, label string, depth int, stack map[string]bool) {
	if depth > w.opts.MaxDepth {
		w.add(unreadable(label, fmt.Sprintf("image indexes nested deeper than %d; not scanned (raise --max-depth)", w.opts.MaxDepth)))
		return
	}
	var doc ociDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		w.add(unreadable(label, "malformed manifest or index: "+err.Error()))
		return
	}
	switch {
	case len(doc.FSLayers) > 0:
		w.add(unreadable(label, "Docker schema 1 manifest: not supported, not scanned (push the image again with a current client)"))
		return
	case len(doc.Manifests) == 0 && len(doc.Layers) == 0:
		if doc.MediaType == "" && mediaType == "" && !json.Valid(raw) {
			w.add(unreadable(label, "neither an index nor a manifest"))
		}
		return // an empty index or an artifact without layers: nothing to run
	}
	for _, d := range doc.Manifests {
		child := label + "@" + d.Digest.String()
		if d.Platform != nil {
			child = label + "[" + d.Platform.String() + "]"
		}
		if !w.budget(child, 0) {
			return
		}
		key := d.Digest.String()
		if stack[key] {
			w.add(unreadable(child, fmt.Sprintf("index cycle: %s lists itself (directly or through its children); not followed", d.Digest)))
			continue
		}
		if w.seen[key] {
			continue // scanned already through another path
		}
		w.seen[key] = true
		if d.Size > maxManifest {
			w.add(unreadable(child, fmt.Sprintf("manifest of %d bytes is larger than %d; not read", d.Size, maxManifest)))
			continue
		}
		b, err := w.readManifest(store, d)
		if err != nil {
			w.add(unreadable(child, err.Error()))
			continue
		}
		stack[key] = true
		w.node(store, b, string(d.MediaType), child, depth+1, stack)
		delete(stack, key)
	}
	for i, d := range doc.Layers {
		w.layer(store, d, fmt.Sprintf("%s!/layer%d", label, i), depth)
	}
}

func (w *walker) readManifest(store blobStore, d v1.Descriptor) ([]byte, error) {
	var raw []byte
	if rs, ok := store.(remoteStore); ok {
		b, err := rs.manifest(d.Digest)
		if err != nil {
			return nil, err
		}
		raw = b
	} else {
		rc, err := store.open(d.Digest)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		if raw, err = io.ReadAll(io.LimitReader(rc, maxManifest+1)); err != nil {
			return nil, err
		}
	}
	if len(raw) > maxManifest {
		return nil, fmt.Errorf("manifest larger than %d bytes; not read", maxManifest)
	}
	v := newVerifier(nil, d.Digest, d.Size)
	v.h.Write(raw)
	v.n = int64(len(raw))
	v.r = eofReader{}
	if _, err := v.Read(nil); err != nil && err != io.EOF {
		return nil, fmt.Errorf("manifest does not match its descriptor (altered in storage?): %w", err)
	}
	return raw, nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// layer scans one layer blob by its content, whatever its media type: a
// tar (compressed or not), or a bare ELF. It is read to its end so its
// digest, and a gzip CRC, are checked.
func (w *walker) layer(store blobStore, d v1.Descriptor, label string, depth int) {
	rc, err := store.open(d.Digest)
	if err != nil {
		w.add(unreadable(label, "layer: "+err.Error()))
		return
	}
	defer rc.Close()
	v := newVerifier(rc, d.Digest, d.Size)
	br := bufio.NewReaderSize(&limited{r: v, w: w, name: label}, 1<<20)
	head, _ := br.Peek(sniffLen)
	switch k := sniff(head); k {
	case kTar, kGzip, kZstd, kBzip2:
		if n := w.stream(br, label, depth+1, k, nil); n > 0 {
			w.tooLong(label+"(trailing)", n)
		}
	case kELF, kExe, kAr, kZip:
		if data, unmap, ok := w.slurp(br, label); ok {
			w.owned(data, unmap, label, depth+1, nil)
		}
	}
	if _, err := io.Copy(io.Discard, br); err != nil && v.mismatch == "" {
		w.add(unreadable(label, "layer: "+err.Error()))
	}
	if v.mismatch != "" {
		w.add(unreadable(label, fmt.Sprintf("layer blob %s does not match its digest (%s): altered in storage or in transit; its content cannot be trusted", d.Digest, v.mismatch)))
	}
}
