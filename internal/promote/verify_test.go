package promote

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// TestVerifyRef: a signed, attested image whose tag names it passes every
// check; trusting another key fails the signature checks (a failed gate);
// a reference that does not parse is bad input.
func TestVerifyRef(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pushSpec("staging/doris-be:2.1.8-kunpeng920", spec{name: "doris-be", version: "2.1.8", target: "kunpeng920"}, e.signer,
		`{"target":"kunpeng920","summary":{"clean":true,"violations":0}}`)
	ref := e.host + "/staging/doris-be:2.1.8-kunpeng920"

	v, err := VerifyRef(ctx, ref, sign.Trust{Key: e.pub}, false, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	last := v.Checks[len(v.Checks)-1]
	if v.Ref != ref || v.Failed != 0 || v.Err() != nil || len(v.Checks) < 4 || !last.OK || !strings.Contains(last.What, "names the image") {
		t.Errorf("trusted key: %+v", v)
	}
	v, err = VerifyRef(ctx, ref, sign.Trust{Key: e.otherPub}, true, registry.Options{})
	if err != nil || v.Failed == 0 || v.Failed != countFailed(v.Checks) || !errors.Is(v.Err(), fault.ErrGate) {
		t.Errorf("another key: %+v, %v", v, err)
	}
	if _, err := VerifyRef(ctx, "NOT A REF", sign.Trust{Key: e.pub}, false, registry.Options{}); !fault.IsInput(err) {
		t.Errorf("a bad reference: %v, want bad input", err)
	}
	if _, err := VerifyRef(ctx, "NOT A REF", sign.Trust{}, false, registry.Options{}); !fault.IsInput(err) || !strings.Contains(err.Error(), "--key") {
		t.Errorf("no trust: %v, want bad input naming --key, before the reference is read", err)
	}
}

func countFailed(cs []sign.Check) int {
	n := 0
	for _, c := range cs {
		if !c.OK {
			n++
		}
	}
	return n
}
