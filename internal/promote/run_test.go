package promote

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/sign"
)

type records struct{ got []map[string]string }

func (r *records) AttestAdd(_ context.Context, d name.Digest, typ string, pred []byte) error {
	var m map[string]string
	if err := json.Unmarshal(pred, &m); err != nil || typ != PredicatePromotion {
		return errors.New("bad record")
	}
	m["attached_to"] = d.String()
	r.got = append(r.got, m)
	return nil
}

// TestRun: everything is checked before anything is written; a refusal
// anywhere writes nothing; with yes, every plan is promoted and recorded.
func TestRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.push("staging/doris-be:2.1.8-rc1", "2.1.8", e.signer, clean)
	e.push("staging/unsigned:2.1.8", "2.1.8", nil, "")
	o := Options{Trust: sign.Trust{Key: e.pub}}
	src := e.ref("staging/doris-be:2.1.8-rc1").Context().Digest(d.String())
	good := &Promotion{Source: src.String(), Dst: []name.Tag{e.tag("release/doris-be:2.1.8"), e.tag("release/doris-be:2.1")}}
	bad := &Promotion{Source: e.ref("staging/unsigned:2.1.8").String(), Dst: []name.Tag{e.tag("release/unsigned:2.1.8")}}

	var checked []bool
	h := Hooks{Checked: func(_ *Plan, passed bool) { checked = append(checked, passed) }}
	out, err := Run(ctx, []*Promotion{good, bad}, o, true, nil, "tester", h)
	if !errors.Is(err, fault.ErrGate) || !strings.Contains(out.Refused, "nothing was promoted") || out.Promoted {
		t.Fatalf("a refused promotion: %+v, %v", out, err)
	}
	if len(checked) != 3 || !checked[0] || !checked[1] || checked[2] {
		t.Errorf("checked hooks: %v", checked)
	}
	if e.digestOf(e.tag("release/doris-be:2.1.8")) != "" {
		t.Error("a tag was written although another promotion was refused")
	}

	rec := &records{}
	var promoted int
	out, err = Run(ctx, []*Promotion{good}, o, false, rec, "tester", Hooks{Promoted: func(*Plan) { promoted++ }})
	if err != nil || out.Promoted || promoted != 0 || e.digestOf(e.tag("release/doris-be:2.1.8")) != "" {
		t.Fatalf("dry run wrote: %+v %v", out, err)
	}
	out, err = Run(ctx, []*Promotion{good}, o, true, rec, "tester", Hooks{Promoted: func(*Plan) { promoted++ }})
	if err != nil || !out.Promoted || promoted != 2 || len(out.Plans) != 2 {
		t.Fatalf("promotion: %+v %v (%d promoted)", out, err, promoted)
	}
	for _, tag := range good.Dst {
		if got := e.digestOf(tag); got != d.String() {
			t.Errorf("%s: %s, want %s", tag, got, d.String())
		}
	}
	if len(rec.got) != 2 || rec.got[0]["promoter"] != "tester" || rec.got[0]["digest"] != d.String() {
		t.Errorf("records: %v", rec.got)
	}
}
