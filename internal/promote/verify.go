package promote

import (
	"context"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// VerifyRef checks t and parses ref (REGISTRY/PATH:TAG or @DIGEST): either
// wrong is bad input. Then it verifies ref as Verify does, counting the
// failed checks.
func VerifyRef(ctx context.Context, ref string, t sign.Trust, signaturesOnly bool, ro registry.Options) (*sign.Verified, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	r, err := ro.Reference(ref)
	if err != nil {
		return nil, fault.Input(err)
	}
	checks, err := Verify(ctx, r, t, signaturesOnly, ro)
	if err != nil {
		return nil, err
	}
	return sign.NewVerified(r.String(), checks), nil
}
