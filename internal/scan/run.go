package scan

import (
	"context"
	"strings"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/isa"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

// Request is a scan as dorisarm scan asks for it: inputs, the target whose
// policy applies and reviewed exceptions.
type Request struct {
	Inputs []string
	// Target names the matrix target whose policy applies; "": none, the
	// scan only reports what it finds.
	Target string
	// AllowFile holds reviewed exceptions (LoadAllow); "": none.
	AllowFile string
	// Ships are globs of the paths that ship for deployment (Policy.WithShips):
	// the target's deployment checks judge those files alone. None: every
	// file ships.
	Ships []string
	// Matrix loads the build matrix (only with a Target).
	Matrix  func() (*matrix.Matrix, error)
	Options Options
}

// Run scans req.Inputs against req.Target's policy. An unknown target, a
// bad allow file or an input that cannot be opened is bad input; what the
// scan finds is in the report (see Report.Err).
func Run(ctx context.Context, req Request) (*Report, error) {
	// The instruction table does not depend on the matrix: another CPU
	// builds it meanwhile (the scan waits for it if it is not done).
	go isa.Default()
	var pol *Policy
	if req.Target != "" {
		m, err := req.Matrix()
		if err != nil {
			return nil, err
		}
		if pol, err = PolicyFor(m, req.Target); err != nil {
			return nil, fault.Input(err)
		}
		if pol, err = pol.WithShips(req.Ships); err != nil {
			return nil, fault.Input(err)
		}
	} else if len(req.Ships) > 0 {
		return nil, fault.Inputf("what ships (%s) is a scope for a target's checks: name the target", strings.Join(req.Ships, ", "))
	}
	opts := req.Options
	if req.AllowFile != "" {
		exc, err := LoadAllow(req.AllowFile)
		if err != nil {
			return nil, fault.Input(err)
		}
		opts.Allow = exc
	}
	return Scan(ctx, req.Inputs, pol, opts)
}

// Err is the report's verdict: with a policy, a failed gate when it has
// violations; without one, bad input when inputs could not be read.
func (r *Report) Err() error {
	switch {
	case r.Policy != nil && !r.Summary.Clean:
		return fault.Gatef("%d violation(s) for %s", r.Summary.Violations, r.Target)
	case r.Policy == nil && r.Summary.Unreadable > 0:
		return fault.Inputf("%d input(s) could not be read", r.Summary.Unreadable)
	}
	return nil
}
