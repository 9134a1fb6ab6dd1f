package build

import (
	"testing"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/sample"
	"github.com/dorisarm/dorisarm/internal/scan"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// planned plans the sample in for cell with tc and returns it as a build
// Input with the target's scan policy. rest carries what differs between
// tests (Packages, SysrootWaiver); the sample fills everything else.
func planned(t *testing.T, in *sample.Inputs, cell matrix.Cell, tc *toolchain.Toolchain, rest plan.Inputs) Input {
	t.Helper()
	rest.Matrix, rest.Cell, rest.Recipe, rest.Tree, rest.Version = in.Matrix, cell, in.Recipe, in.Tree, sample.Version
	rest.Series, rest.Toolchain, rest.Lock = in.Series, tc, in.Lock
	p, err := plan.Make(rest)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := scan.PolicyFor(in.Matrix, cell.Target.Name)
	if err != nil {
		t.Fatal(err)
	}
	return Input{Plan: p, Recipe: in.Recipe, Tree: in.Tree, Series: in.Series, TC: tc, Lock: in.Lock, Policy: pol}
}
