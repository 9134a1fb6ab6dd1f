package attest

import (
	"context"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// Request is a signing as dorisarm sign asks for it.
type Request struct {
	// Refs are the images and indexes to sign (REGISTRY/PATH:TAG or @DIGEST).
	Refs []string
	// Key is a cosign private key, its password from Password; or Keyless
	// signs with a Fulcio certificate (Sigstore says where).
	Key      string
	Password func() ([]byte, error)
	Keyless  bool
	Sigstore sign.Keyless
	// Format is which signature formats are written (--signature-format).
	Format string
	// KeyRekor logs key-based signatures in the Rekor log at this URL
	// (--key with --rekor-url); keyless ones always are.
	KeyRekor string
	Getenv   func(string) string
	// BuildDir, when set, is the dorisarm build --out directory whose
	// builds the images were made from: each is attested too.
	BuildDir string
	Matrix   func() (*matrix.Matrix, error)
	// RecipeFile finds a build's recipe by name.
	RecipeFile func(name string) string
	Registry   registry.Options
}

// Run checks req, then signs every ref and attests what was made from
// req.BuildDir's builds (SignAll).
func Run(ctx context.Context, req Request) (Done, error) {
	if (req.Key == "") == !req.Keyless {
		return nil, fault.Inputf("give --key cosign.key (dorisarm keygen writes one), or --keyless")
	}
	var refs []name.Reference
	for _, a := range req.Refs {
		ref, err := req.Registry.Reference(a)
		if err != nil {
			return nil, fault.Input(err)
		}
		refs = append(refs, ref)
	}
	s, err := req.signer(ctx)
	if err != nil {
		return nil, err
	}
	var builds *Builds
	if req.BuildDir != "" {
		m, err := req.Matrix()
		if err != nil {
			return nil, err
		}
		if builds, err = Open(m, req.BuildDir, req.RecipeFile, req.Registry); err != nil {
			return nil, err
		}
	}
	return SignAll(ctx, s, refs, builds)
}

func (req Request) signer(ctx context.Context) (Signer, error) {
	f, err := sign.ParseFormat(req.Format)
	if err != nil {
		return nil, fault.Input(err)
	}
	if req.Keyless {
		s, err := sign.NewKeylessSigner(req.Sigstore, req.Getenv, req.Registry.Remote(ctx)...)
		if err != nil {
			return nil, fault.Input(err)
		}
		return s.WithFormat(f), nil
	}
	pw, err := req.Password()
	if err != nil {
		return nil, err
	}
	s, err := sign.LoadSigner(req.Key, pw, req.Registry.Remote(ctx)...)
	if err != nil {
		return nil, fault.Input(err)
	}
	if req.KeyRekor != "" {
		if s, err = s.WithRekor(req.KeyRekor); err != nil {
			return nil, fault.Input(err)
		}
	}
	return s.WithFormat(f), nil
}

// Done is what SignAll did, a digest at a time.
type Done []Signed

// WriteText prints a line for each signature and each attestation.
func (d Done) WriteText(w io.Writer) error {
	for _, s := range d {
		if _, err := fmt.Fprintf(w, "signed %s\n", s.Digest); err != nil {
			return err
		}
		for _, k := range s.Attestations {
			fmt.Fprintf(w, "attested %s %s\n", s.Digest, k)
		}
	}
	return nil
}
