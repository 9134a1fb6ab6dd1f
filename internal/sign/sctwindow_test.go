package sign

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
)

// An SCT counts only from a CT log that the trusted root trusts at the
// SCT's time (the log's validFor), as cosign checks it.
func TestSCTLogValidity(t *testing.T) {
	f, ref, _, _ := signedIndex(t)
	trust := Trust{Identity: releaseIdentity, Issuer: f.Issuer}
	for what, c := range map[string]struct {
		set func(*root.TransparencyLog)
		ok  bool
	}{
		"the log trusted now":               {func(*root.TransparencyLog) {}, true},
		"the log trusted from an hour on":   {func(l *root.TransparencyLog) { l.ValidityPeriodStart = time.Now().Add(time.Hour) }, false},
		"the log trusted until an hour ago": {func(l *root.TransparencyLog) { l.ValidityPeriodEnd = time.Now().Add(-time.Hour) }, false},
		"the log trusted until an hour on":  {func(l *root.TransparencyLog) { l.ValidityPeriodEnd = time.Now().Add(time.Hour) }, true},
	} {
		trustedRoot = func() (root.TrustedMaterial, error) {
			r, err := f.TrustedRoot()
			if err != nil {
				return nil, err
			}
			if len(r.CTLogs()) != 1 {
				t.Fatalf("%d CT logs in the fake's root", len(r.CTLogs()))
			}
			for _, l := range r.CTLogs() {
				c.set(l)
			}
			return r, nil
		}
		checks, err := signatureChecksOf(context.Background(), ref, trust)
		if err != nil || len(checks) != 3 {
			t.Fatalf("%s: %+v %v", what, checks, err)
		}
		if checks[0].OK != c.ok {
			t.Errorf("%s: %+v", what, checks[0])
		}
		if !c.ok && !strings.Contains(checks[0].Why, "SCT") {
			t.Errorf("%s: %s", what, checks[0].Why)
		}
	}
}
