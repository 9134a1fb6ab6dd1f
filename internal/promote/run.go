package promote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// PredicatePromotion is the predicate type of promotion records.
const PredicatePromotion = "https://dorisarm.dev/attestations/promotion/v1"

// CheckAll checks every promotion to every destination before anything is
// written. It returns the plans checked; when a gate refuses one, that plan
// (with its failed checks) is the last, and the error says which
// promotion was refused and that nothing was promoted.
func CheckAll(ctx context.Context, todo []*Promotion, o Options) ([]*Plan, error) {
	var plans []*Plan
	for _, p := range todo {
		src, err := o.Registry.Reference(p.Source)
		if err != nil {
			return plans, fault.Input(err)
		}
		for _, dst := range p.Dst {
			plan, err := Check(ctx, src, dst, o)
			if plan != nil {
				plans = append(plans, plan)
			}
			var ge *GateError
			switch {
			case errors.As(err, &ge):
				return plans, fmt.Errorf("%s -> %s: %w; nothing was promoted", p.Source, dst, err)
			case err != nil:
				return plans, err
			}
		}
	}
	return plans, nil
}

// Recorder attaches a signed promotion record to the promoted digest
// (sign.Signer's AttestAdd).
type Recorder interface {
	AttestAdd(ctx context.Context, d name.Digest, predicateType string, predicate []byte) error
}

// ExecuteAll carries out checked plans in order; with rec, each promotion
// is recorded (who, when, source, destination, digest) as an attestation.
// done is called after each promotion.
func ExecuteAll(ctx context.Context, plans []*Plan, o Options, rec Recorder, who string, done func(*Plan)) error {
	for _, plan := range plans {
		if err := Execute(ctx, plan, o); err != nil {
			return fault.Gatef("%s -> %s: %w", plan.Src, plan.Dst, err)
		}
		if done != nil {
			done(plan)
		}
		if rec == nil {
			continue
		}
		r, err := Record(plan, who, time.Now())
		if err != nil {
			return err
		}
		d := plan.Dst.Context().Digest(plan.Src.DigestStr())
		if err := rec.AttestAdd(ctx, d, PredicatePromotion, r); err != nil {
			return fault.Gatef("recording the promotion of %s: %w", d, err)
		}
	}
	return nil
}

// Record is the promotion record of plan: the predicate of
// PredicatePromotion.
func Record(plan *Plan, who string, at time.Time) ([]byte, error) {
	return json.Marshal(map[string]string{
		"promoter": who, "time": at.UTC().Format(time.RFC3339),
		"source": plan.Src.String(), "destination": plan.Dst.String(), "digest": plan.Src.DigestStr(),
		"replaces": plan.Replaces, "rolls_back_from": plan.RollsBack,
	})
}

// Promoter names who promotes: the CI actor, else the local user and host.
func Promoter(getenv func(string) string) string {
	if a := getenv("GITHUB_ACTOR"); a != "" {
		return "github:" + a
	}
	if u, err := user.Current(); err == nil {
		h, _ := os.Hostname()
		return u.Username + "@" + h
	}
	return "unknown"
}

// Move describes what a plan does to its tag.
func (p *Plan) Move() string {
	switch {
	case p.RollsBack != "":
		return fmt.Sprintf("rolls back from %s (%s)", p.RollsBack, p.Replaces)
	case p.Replaces != "":
		return "moves from " + p.Replaces
	}
	return "new tag"
}

// Verify checks ref as dorisarm verify does: every signature, every
// attestation (unless signaturesOnly), every blob, and for a tag, that the
// tag names what the signed image is. A malformed trust or reference is bad
// input; failed checks are in the list, not the error.
func Verify(ctx context.Context, ref name.Reference, t sign.Trust, signaturesOnly bool, ro registry.Options) ([]sign.Check, error) {
	res, err := sign.VerifyRelease(ctx, ref, t, signaturesOnly, ro.Remote(ctx)...)
	if err != nil {
		return nil, fault.Input(err)
	}
	checks := res.Checks()
	tag, ok := ref.(name.Tag)
	if !ok {
		return checks, nil
	}
	// A tag means something (image, version, target): it must name what
	// the signed image is.
	c := sign.Check{What: fmt.Sprintf("%s names what the image is", tag)}
	id, err := Identify(ctx, res.Digests[0], res.Statements, ro.Remote(ctx)...)
	if err == nil {
		c.What = fmt.Sprintf("%s names the image (%s)", tag, id)
		err = CheckTag(tag, id)
	}
	var ge *GateError
	switch {
	case errors.As(err, &ge):
		c.Why = ge.Reason
	case err != nil:
		return nil, err
	default:
		c.OK = true
	}
	return append(checks, c), nil
}

// Outcome is what Run did.
type Outcome struct {
	Plans    []*Plan `json:"plans"`
	Promoted bool    `json:"promoted"`
	Refused  string  `json:"refused,omitempty"`
}

// Hooks let a caller show progress: Checked after each plan is checked
// (passed: it cleared every gate), Promoted after each promotion.
type Hooks struct {
	Checked  func(p *Plan, passed bool)
	Promoted func(p *Plan)
}

// Run checks every promotion before anything is written and then, with
// yes, carries them out, recording each with rec when it is set (who is
// the promoter).
func Run(ctx context.Context, todo []*Promotion, o Options, yes bool, rec Recorder, who string, h Hooks) (Outcome, error) {
	out := Outcome{Plans: []*Plan{}}
	plans, err := CheckAll(ctx, todo, o)
	out.Plans = append(out.Plans, plans...)
	for i, p := range plans {
		if h.Checked != nil {
			h.Checked(p, err == nil || i < len(plans)-1)
		}
	}
	if errors.Is(err, fault.ErrGate) {
		out.Refused = err.Error()
	}
	if err != nil || !yes {
		return out, err
	}
	if err := ExecuteAll(ctx, plans, o, rec, who, h.Promoted); err != nil {
		return out, err
	}
	out.Promoted = true
	return out, nil
}

// Promotions are what to promote: a promotions file, or a source and a
// destination tag (args).
func Promotions(file string, args []string, ro registry.Options) ([]*Promotion, error) {
	switch {
	case file != "" && len(args) == 0:
		return LoadFile(file, ro)
	case file == "" && len(args) == 2:
		src, err := ro.Reference(args[0])
		if err != nil {
			return nil, fault.Input(err)
		}
		dst, err := ro.Tag(args[1])
		if err != nil {
			return nil, fault.Input(err)
		}
		return []*Promotion{{Source: src.String(), Dst: []name.Tag{dst}}}, nil
	}
	return nil, fault.Inputf("give SRC and DST, or --file promotions.yaml")
}

// WriteChecks prints the plan's checks (paint colours ok and FAIL) and,
// when it passed them, what promoting it does.
func (p *Plan) WriteChecks(w io.Writer, paint func(ok bool, s string) string, passed bool) {
	for _, c := range p.Checks {
		word := "ok  "
		if !c.OK {
			word = "FAIL"
		}
		what := c.What
		if c.OK && len(c.Formats) > 0 {
			what += " [" + strings.Join(c.Formats, " and ") + "]"
		}
		fmt.Fprintf(w, "%s  %s\n", paint(c.OK, word), what)
	}
	if passed {
		tags := 0
		for _, c := range p.Companions {
			if c.Tag != "" {
				tags++
			}
		}
		fmt.Fprintf(w, "plan  %s -> %s (%s, %d manifests, %d bytes, %d signature/attestation tags, %d Sigstore bundles, %s)\n", p.Src, p.Dst, p.Version, len(p.Digests), p.Bytes, tags, len(p.Companions)-tags, p.Move())
	}
}
