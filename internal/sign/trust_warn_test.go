package sign

import (
	"strings"
	"testing"
)

// An identity regexp open at either end, or with a bare dot in a host or
// file name, is legal but matches more signers than meant: a warning.
func TestTrustWarnings(t *testing.T) {
	for re, want := range map[string][]string{
		`^https://github\.com/ORG/REPO/\.github/workflows/release\.yml@refs/tags/v[0-9.]+$`: nil,
		`^https://github\.com/ORG/REPO/`:        {"not anchored"},
		`https://github\.com/ORG/REPO/.*$`:      {"not anchored"},
		`^https://github.com/ORG/REPO/release$`: {"unescaped dot"},
		`^https://github.com/ORG/REPO/`:         {"not anchored", "unescaped dot"},
	} {
		got := Trust{IdentityRegexp: re, Issuer: "https://token.actions.githubusercontent.com"}.Warnings()
		if len(got) != len(want) {
			t.Errorf("%s: warnings %q, want %v", re, got, want)
			continue
		}
		for i, w := range want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: warning %q, want %q", re, got[i], w)
			}
		}
	}
	if w := (Trust{Key: "cosign.pub"}).Warnings(); w != nil {
		t.Errorf("a key: %q", w)
	}
}
