package fault

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestKinds(t *testing.T) {
	base := fmt.Errorf("reading x: %w", context.Canceled)
	in := Input(base)
	if in.Error() != base.Error() {
		t.Errorf("message changed: %q", in.Error())
	}
	if !IsInput(in) || !errors.Is(in, context.Canceled) || errors.Is(in, ErrGate) {
		t.Errorf("Input lost its kind or its cause: %v", in)
	}
	wrapped := fmt.Errorf("plan: %w", in)
	if !IsInput(wrapped) {
		t.Error("wrapping lost the kind")
	}
	if Input(nil) != nil || Gate(nil) != nil {
		t.Error("nil became an error")
	}
	if Input(in) != in {
		t.Error("marked twice")
	}
	g := Gatef("scan: %d findings", 3)
	if IsInput(g) || !errors.Is(g, ErrGate) || g.Error() != "scan: 3 findings" {
		t.Errorf("Gatef: %v", g)
	}
	if IsInput(errors.New("plain")) {
		t.Error("a plain error counted as input")
	}
}
