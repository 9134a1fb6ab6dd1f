package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/sample"
)

// TestPlanFormatsSameBytes: for every format plan offers, planning two
// targets (four patches in each of three components) fifty times prints
// the same bytes every time; the table lists each patch step's patches in
// the order they apply.
func TestPlanFormatsSameBytes(t *testing.T) {
	in := sample.Load(t, "../..", sample.ManyPatches(t, "../.."), "")
	plans := func() []*plan.Plan {
		var out []*plan.Plan
		for _, target := range []string{"kunpeng920", "graviton2"} {
			cell, tc := in.NoCompilerToolchain(t, target, "gcc")
			p, err := plan.Make(plan.Inputs{Matrix: in.Matrix, Cell: cell, Recipe: in.Recipe, Tree: in.Tree, Version: sample.Version,
				Series: in.Series, Toolchain: tc, Lock: in.Lock, SysrootWaiver: "format test"})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
		return out
	}
	first := map[string][]byte{}
	for i := 0; i < 50; i++ {
		ps := plans()
		for _, f := range plan.Formats {
			var b bytes.Buffer
			if err := plan.Write(&b, ps, f); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if i == 0 {
				first[f] = b.Bytes()
				continue
			}
			if !bytes.Equal(b.Bytes(), first[f]) {
				t.Fatalf("%s: run %d printed other bytes than the first", f, i+1)
			}
		}
	}
	table := string(first["table"])
	want := "apply bitshuffle/0001-scalar-bitshuffle bitshuffle/0012-zeta bitshuffle/0013-alpha bitshuffle/0020-mid"
	if !strings.Contains(table, want) || !strings.Contains(table, "doris/0013-alpha doris/0020-mid") {
		t.Errorf("the table does not list patches in series order:\n%s", table)
	}
	if err := plan.Write(&bytes.Buffer{}, plans(), "yaml"); err == nil {
		t.Error("an unknown format was accepted")
	}
}
