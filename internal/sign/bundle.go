package sign

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	cbundle "github.com/sigstore/cosign/v2/pkg/cosign/bundle"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/rekor/pkg/generated/models"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/dorisarm/dorisarm/internal/registry"
)

// The Sigstore bundle format, cosign v3's default (v2.6: --new-bundle-format):
// every signature and attestation is a Sigstore bundle (v0.3: the DSSE
// envelope, the certificate or the key's hint, the Rekor entry with its
// inclusion proof) stored as the one layer of an OCI 1.1 referrer manifest
// whose subject is the signed manifest. A signature is an in-toto statement
// of predicate type https://sigstore.dev/cosign/sign/v1 about the digest.
// Writing is cosign's (cbundle.MakeNewBundle, ociremote.WriteReferrer as
// its WriteAttestationNewBundleFormat calls it), verification is cosign's
// (cosign.VerifyNewBundle over sigstore-go's verifier); what is dorisarm's
// is the bounded read of the referrers.

// Format is which signature formats sign writes.
type Format string

const (
	// FormatBoth writes the bundle and the legacy .sig/.att tags (the
	// default: cosign v2 without --new-bundle-format reads only the tags).
	FormatBoth Format = "both"
	// FormatBundle writes the Sigstore bundle only, as cosign v3 does.
	FormatBundle Format = "bundle"
	// FormatLegacy writes the .sig/.att tags only (cosign v2's default).
	FormatLegacy Format = "legacy"
)

// ParseFormat reads a --signature-format value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatBoth, FormatBundle, FormatLegacy:
		return f, nil
	case "":
		return FormatBoth, nil
	}
	return "", fmt.Errorf("--signature-format %q: give both (the default), bundle (Sigstore bundles as OCI referrers, cosign v3's format) or legacy (the .sig/.att tags, cosign v2's)", s)
}

func (f Format) bundle() bool { return f != FormatLegacy }
func (f Format) legacy() bool { return f != FormatBundle }

// How verification names the form it checked (Check.Format).
const (
	checkedBundle = "Sigstore bundle"
	checkedLegacy = "legacy .sig/.att tag"
)

// signStatement is the statement a bundle-format signature signs, as
// cosign makes it: d's digest, predicate type cosign/sign/v1, no predicate.
func signStatement(d name.Digest) ([]byte, error) {
	h, err := digestHash(d)
	if err != nil {
		return nil, err
	}
	type sub struct {
		Digest map[string]string `json:"digest"`
	}
	return json.Marshal(struct {
		Type          string `json:"_type"`
		Subject       []sub  `json:"subject"`
		PredicateType string `json:"predicateType"`
	}{"https://in-toto.io/Statement/v1", []sub{{map[string]string{h.Algorithm: h.Hex}}}, ctypes.CosignSignPredicateType})
}

// makeBundle is the Sigstore bundle of env (the DSSE envelope of st) signed
// by pub: signer is the Fulcio certificate (PEM) of a keyless signature,
// else the key's PEM (the bundle names it by its hint); entry is the Rekor
// entry of env, or nil when it was not logged.
func makeBundle(pub signature.PublicKeyProvider, st, env, signer []byte, entry *models.LogEntryAnon) ([]byte, error) {
	pk, err := pub.PublicKey()
	if err != nil {
		return nil, err
	}
	if signer == nil {
		if signer, err = cryptoutils.MarshalPublicKeyToPEM(pk); err != nil {
			return nil, err
		}
	}
	return cbundle.MakeNewBundle(pk, entry, st, env, signer, nil)
}

// writeBundle stores b beside d as cosign does
// (ociremote.WriteAttestationNewBundleFormat, whose parts it calls): a
// referrer manifest with the bundle media type as its artifact type, the
// empty config, the bundle as its one layer and the predicate type in its
// annotations; registries without the referrers API get
// go-containerregistry's sha256-<hex> tag fallback. Its creation time is
// not signed: it orders bundles only where no transparency log's time does
// (see chooseStatement).
func writeBundle(ctx context.Context, d name.Digest, b []byte, predicateType string, opts []remote.Option) error {
	mt, err := sgbundle.MediaTypeString("0.3")
	if err != nil {
		return err
	}
	ann := map[string]string{
		annCreated:                    time.Now().UTC().Format(time.RFC3339Nano),
		"dev.sigstore.bundle.content": "dsse-envelope",
		annBundlePredicate:            predicateType,
	}
	return ociremote.WriteReferrer(d, mt, []v1.Layer{static.NewLayer(b, types.MediaType(mt))}, ann, ociRemote(ctx, opts))
}

// storedBundle is one Sigstore bundle read from a referrer of a manifest.
type storedBundle struct {
	Manifest      v1.Hash   // the referrer manifest's digest
	PredicateType string    // as its annotation says (unsigned: only for "attached but does not verify")
	Created       time.Time // its creation time annotation (unsigned: see chooseStatement)
	Bundle        *sgbundle.Bundle
	Err           error // not a bundle sigstore-go reads
}

// Bounds of what is read of a manifest's referrers: their count (one per
// signature or attestation; re-signing adds one), each referrer manifest
// (a config, a layer, a subject and three annotations: well under 4 KiB)
// and, as for the legacy tags, each bundle's and all bundles' bytes.
const (
	maxReferrers        = maxLayerCount
	maxReferrerManifest = 64 << 10
)

const (
	annBundlePredicate = "dev.sigstore.bundle.predicateType"
	annCreated         = "org.opencontainers.image.created"
)

// emptyConfig is the OCI empty descriptor a referrer's config must be: the
// two bytes {} (a promotion copies the config too, and nothing verifies it).
var emptyConfig = v1.Hash{Algorithm: "sha256", Hex: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}

// readBundles reads the Sigstore bundles stored as referrers of d; none if
// there are none. Each referrer manifest is read by digest, bounded, and
// must name d as its subject, have the empty config and hold one layer of a
// bundle media type within the size bounds, read whole and checked against
// its size and digest.
func readBundles(ctx context.Context, d name.Digest, opts []remote.Option) ([]storedBundle, error) {
	ro := append([]remote.Option{remote.WithContext(ctx)}, opts...)
	idx, err := remote.Referrers(d, ro...)
	if registry.NotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the referrers of %s: %w", d, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("the referrers of %s: %w", d, err)
	}
	want, err := digestHash(d)
	if err != nil {
		return nil, err
	}
	var out []storedBundle
	var total int64
	read := 0
	for _, m := range im.Manifests {
		// The listed artifact type is the manifest's; registries and the
		// tag fallback written by older go-containerregistry (cosign v2.6's)
		// list the config's media type instead, the empty one. Anything
		// else is another tool's referrer (an SBOM, a notation signature).
		if !isBundleType(m.ArtifactType) && m.ArtifactType != "" && m.ArtifactType != mediaEmpty {
			continue
		}
		if read++; read > maxReferrers {
			return nil, fmt.Errorf("%s: more than %d Sigstore bundles refer to it, more than the signatures of one image are", d, maxReferrers)
		}
		if m.Size > maxReferrerManifest || m.Size < 0 {
			return nil, fmt.Errorf("the referrer %s of %s: a %d-byte manifest, more than a Sigstore bundle's referrer is", m.Digest, d, m.Size)
		}
		img, err := remote.Image(d.Context().Digest(m.Digest.String()), ro...)
		if err != nil {
			return nil, fmt.Errorf("the referrer %s of %s: %w", m.Digest, d, err)
		}
		raw, err := img.RawManifest()
		if err != nil {
			return nil, fmt.Errorf("the referrer %s of %s: %w", m.Digest, d, err)
		}
		if len(raw) > maxReferrerManifest {
			return nil, fmt.Errorf("the referrer %s of %s: a %d-byte manifest, more than a Sigstore bundle's referrer is", m.Digest, d, len(raw))
		}
		mf, err := img.Manifest()
		if err != nil {
			return nil, fmt.Errorf("the referrer %s of %s: %w", m.Digest, d, err)
		}
		if !holdsBundle(raw, mf) {
			continue
		}
		// The referrers list is not signed: a manifest listed there must
		// itself say it is about d.
		if mf.Subject == nil || mf.Subject.Digest != want {
			return nil, fmt.Errorf("the referrer %s of %s names another subject: the registry's referrers list is wrong", m.Digest, d)
		}
		if mf.Config.Digest != emptyConfig || mf.Config.Size != 2 {
			return nil, fmt.Errorf("the referrer %s of %s: its config is %s (%d bytes), not the empty descriptor a Sigstore bundle's referrer has", m.Digest, d, mf.Config.Digest, mf.Config.Size)
		}
		if len(mf.Layers) != 1 {
			return nil, fmt.Errorf("the referrer %s of %s: %d layers, a Sigstore bundle referrer has one", m.Digest, d, len(mf.Layers))
		}
		desc := mf.Layers[0]
		if desc.Size > maxLayer || desc.Size < 0 {
			return nil, fmt.Errorf("the referrer %s of %s: a %d-byte bundle, more than a signature holds", m.Digest, d, desc.Size)
		}
		if total += desc.Size; total > maxLayers {
			return nil, fmt.Errorf("%s: Sigstore bundles of more than %d MiB in all, more than the signatures of one image hold", d, maxLayers>>20)
		}
		b, err := readBlob(img, desc)
		if err != nil {
			return nil, fmt.Errorf("the referrer %s of %s: %w", m.Digest, d, err)
		}
		sb := storedBundle{Manifest: m.Digest, PredicateType: mf.Annotations[annBundlePredicate]}
		sb.Created, _ = time.Parse(time.RFC3339Nano, mf.Annotations[annCreated])
		bundle := &sgbundle.Bundle{}
		if err := bundle.UnmarshalJSON(b); err != nil {
			sb.Err = fmt.Errorf("the referrer %s is not a Sigstore bundle: %w", m.Digest, err)
		} else {
			sb.Bundle = bundle
		}
		out = append(out, sb)
	}
	return out, nil
}

func isBundleType(t string) bool {
	return strings.HasPrefix(t, "application/vnd.dev.sigstore.bundle")
}

// mediaEmpty is the OCI empty descriptor's media type (a referrer's config).
const mediaEmpty = "application/vnd.oci.empty.v1+json"

// holdsBundle says whether the referrer manifest (raw, parsed mf) is a
// Sigstore bundle's: its artifact type, or its layers' media type, says so.
func holdsBundle(raw []byte, mf *v1.Manifest) bool {
	var at struct {
		ArtifactType string `json:"artifactType"`
	}
	if json.Unmarshal(raw, &at) == nil && isBundleType(at.ArtifactType) {
		return true
	}
	for _, l := range mf.Layers {
		if isBundleType(string(l.MediaType)) {
			return true
		}
	}
	return false
}

// readBlob reads the blob desc names from img's repository: exactly
// desc.Size bytes, whose SHA-256 must be desc.Digest, both checked here:
// img.LayerByDigest takes the first descriptor with the digest (a config's
// perhaps, of another size), and its reader checks the digest only at the
// end of what that descriptor says.
func readBlob(img v1.Image, desc v1.Descriptor) ([]byte, error) {
	if desc.Digest.Algorithm != "sha256" {
		return nil, fmt.Errorf("a blob digest of algorithm %q, not sha256", desc.Digest.Algorithm)
	}
	l, err := img.LayerByDigest(desc.Digest)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, desc.Size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != desc.Size {
		return nil, fmt.Errorf("the blob %s holds more or fewer bytes than the %d its descriptor says", desc.Digest, desc.Size)
	}
	if h := sha256Hex(b); h != desc.Digest.Hex {
		return nil, fmt.Errorf("the blob %s has digest sha256:%s", desc.Digest, h)
	}
	return b, nil
}

// referrerKey is the context key of a ReferrerFunc.
type referrerKey struct{}

// ReferrerFunc is told each Sigstore bundle referrer that verified: the
// manifest it is about and the referrer manifest's digest.
type ReferrerFunc func(subject name.Digest, digest v1.Hash)

// WithReferrers returns ctx carrying f (see ReferrerFunc): a promotion
// copies exactly the referrers that verified, by digest.
func WithReferrers(ctx context.Context, f ReferrerFunc) context.Context {
	return context.WithValue(ctx, referrerKey{}, f)
}

func reportReferrer(ctx context.Context, d name.Digest, h v1.Hash) {
	if f, ok := ctx.Value(referrerKey{}).(ReferrerFunc); ok {
		f(d, h)
	}
}

// bundleOpts are v's CheckOpts for cosign's bundle verification, which
// takes its keys from trusted material: with a key, an empty root beside it.
func (v *verifier) bundleOpts() *cosign.CheckOpts {
	co := *v.co
	if co.TrustedMaterial == nil {
		co.TrustedMaterial = &root.BaseTrustedMaterial{}
	}
	return &co
}

// verifyBundle checks b with cosign (the DSSE signature, and keyless the
// certificate, its SCT, the Rekor entry and the identity) and that its
// statement is about d; it returns the statement.
func (v *verifier) verifyBundle(ctx context.Context, d name.Digest, b *sgbundle.Bundle) (statement, error) {
	var st statement
	h, err := digestHash(d)
	if err != nil {
		return st, err
	}
	digest, err := hex.DecodeString(h.Hex)
	if err != nil {
		return st, err
	}
	res, err := cosign.VerifyNewBundle(ctx, v.bundleOpts(), verify.WithArtifactDigest(h.Algorithm, digest), b)
	if err != nil {
		return st, err
	}
	env := b.GetDsseEnvelope()
	if env == nil {
		return st, errors.New("a Sigstore bundle without a DSSE envelope (a message signature is not an image signature)")
	}
	if env.PayloadType != payloadInToto {
		return st, fmt.Errorf("a Sigstore bundle of payload type %q, not an in-toto statement", env.PayloadType)
	}
	if err := json.Unmarshal(env.Payload, &st); err != nil {
		return st, fmt.Errorf("the bundle's payload is not an in-toto statement: %w", err)
	}
	// The latest time a trusted log or timestamp authority vouches for.
	for _, t := range res.VerifiedTimestamps {
		if t.Timestamp.After(st.Time) {
			st.Time = t.Timestamp
		}
	}
	return st, nil
}

// verifiedBundles verifies, of bs, the bundles that may be signatures
// (sigs: predicate type cosign/sign/v1) or else attestations, and keeps
// those whose verified statement is of that kind and, where the referrer is
// annotated, of the annotated type. The annotation is unsigned: it can only
// make a bundle be skipped, never accepted. With first it stops at the
// first kept. Each kept one is reported for promotion (see WithReferrers);
// nm says why the others did not verify.
func (v *verifier) verifiedBundles(ctx context.Context, d name.Digest, bs []storedBundle, sigs, first bool) (kept []int, sts []statement, nm *errNoMatch) {
	nm = &errNoMatch{what: "bundle attestations"}
	if sigs {
		nm.what = "bundle signatures"
	}
	for i, b := range bs {
		if b.PredicateType != "" && (b.PredicateType == ctypes.CosignSignPredicateType) != sigs {
			continue
		}
		if b.Err != nil {
			nm.add(b.Err)
			continue
		}
		st, err := v.verifyBundle(ctx, d, b.Bundle)
		if err != nil {
			nm.add(err)
			continue
		}
		if (st.PredicateType == ctypes.CosignSignPredicateType) != sigs {
			continue // the other kind
		}
		if b.PredicateType != "" && st.PredicateType != b.PredicateType {
			nm.add(fmt.Errorf("the referrer %s is annotated as a %s attestation but signs a %s statement", b.Manifest, b.PredicateType, st.PredicateType))
			continue
		}
		reportReferrer(ctx, d, b.Manifest)
		st.created = b.Created
		kept, sts = append(kept, i), append(sts, st)
		if first {
			break
		}
	}
	return kept, sts, nm
}

// verifiedBundleSignature is the first bundle signature (predicate type
// cosign/sign/v1) of d that verifies; errNoMatch when none does.
func (v *verifier) verifiedBundleSignature(ctx context.Context, d name.Digest, bs []storedBundle) (*storedBundle, error) {
	kept, _, nm := v.verifiedBundles(ctx, d, bs, true, true)
	if len(kept) == 0 {
		return nil, nm
	}
	return &bs[kept[0]], nil
}

// verifiedBundleAttestations are the statements of d's bundles that verify
// and are not signatures, with the predicate types attached at all (from
// the unsigned annotations: only to tell "altered" from "missing"). Every
// bundle is verified; which of several of one type counts is
// attestationChecks' to say, from what verified, never from the registry's
// order or annotations.
func (v *verifier) verifiedBundleAttestations(ctx context.Context, d name.Digest, bs []storedBundle) ([]statement, map[string]bool, error) {
	attached := map[string]bool{}
	for _, b := range bs {
		if b.PredicateType != "" && b.PredicateType != ctypes.CosignSignPredicateType {
			attached[b.PredicateType] = true
		}
	}
	_, out, nm := v.verifiedBundles(ctx, d, bs, false, false)
	if len(out) == 0 && len(attached) > 0 {
		return nil, attached, nm
	}
	return out, attached, nil
}
