package promote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/dorisarm/dorisarm/internal/fault"
	dregistry "github.com/dorisarm/dorisarm/internal/registry"
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

func TestPromotionsAndWriteChecks(t *testing.T) {
	var ro dregistry.Options
	ps, err := Promotions("", []string{"127.0.0.1:5000/staging/doris-be:rc1", "127.0.0.1:5000/release/doris-be:2.1.8"}, ro)
	if err != nil || len(ps) != 1 || ps[0].Dst[0].String() != "127.0.0.1:5000/release/doris-be:2.1.8" {
		t.Fatalf("SRC DST: %+v %v", ps, err)
	}
	for _, args := range [][]string{nil, {"a"}, {"127.0.0.1:5000/x:1", "127.0.0.1:5000/y"}, {"NOT A REF", "127.0.0.1:5000/y:1"}} {
		if _, err := Promotions("", args, ro); !fault.IsInput(err) {
			t.Errorf("%v: %v, want bad input", args, err)
		}
	}
	if _, err := Promotions("promotions.yaml", []string{"a", "b"}, ro); !fault.IsInput(err) {
		t.Errorf("file and args: %v", err)
	}
	p := &Plan{Checks: []sign.Check{{What: "signed", OK: true}, {What: "scanned", Why: "dirty"}}, Version: "2.1.8"}
	p.Src, _ = name.NewDigest("127.0.0.1:5000/s@sha256:" + strings.Repeat("a", 64))
	p.Dst, _ = name.NewTag("127.0.0.1:5000/r:2.1.8")
	var b strings.Builder
	p.WriteChecks(&b, func(ok bool, s string) string { return fmt.Sprintf("<%v>%s", ok, s) }, true)
	want := "<true>ok    signed\n<false>FAIL  scanned\nplan  127.0.0.1:5000/s@sha256:" + strings.Repeat("a", 64) + " -> 127.0.0.1:5000/r:2.1.8 (2.1.8, 0 manifests, 0 bytes, 0 signature/attestation tags, 0 Sigstore bundles, new tag)\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}
