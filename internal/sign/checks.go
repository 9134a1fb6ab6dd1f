package sign

import (
	"fmt"
	"io"
	"strings"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// Verified is what verifying a reference found: every check, in order,
// and how many failed.
type Verified struct {
	Checks []Check `json:"checks"`
	Failed int     `json:"failed"`
	Ref    string  `json:"ref"`
	// Paint colours WriteText's status words (ok: the check passed); nil
	// leaves them plain.
	Paint func(ok bool, word string) string `json:"-"`
}

// NewVerified counts the failed checks of ref.
func NewVerified(ref string, checks []Check) *Verified {
	v := &Verified{Ref: ref, Checks: checks}
	for _, c := range checks {
		if !c.OK {
			v.Failed++
		}
	}
	return v
}

// WriteText prints a line a check: "ok" and what passed, or "FAIL", what
// failed and why.
func (v *Verified) WriteText(w io.Writer) error {
	paint := v.Paint
	if paint == nil {
		paint = func(_ bool, word string) string { return word }
	}
	for _, c := range v.Checks {
		var err error
		if c.OK {
			what := c.What
			if len(c.Formats) > 0 {
				what += " [" + strings.Join(c.Formats, " and ") + "]"
			}
			_, err = fmt.Fprintf(w, "%s    %s\n", paint(true, "ok"), what)
		} else {
			_, err = fmt.Fprintf(w, "%s  %s: %s\n", paint(false, "FAIL"), c.What, c.Why)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Err is a failed gate when a check failed.
func (v *Verified) Err() error {
	if v.Failed == 0 {
		return nil
	}
	return fault.Gatef("%d of %d checks failed for %s", v.Failed, len(v.Checks), v.Ref)
}
