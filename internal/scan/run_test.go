package scan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

func repoMatrix() (*matrix.Matrix, error) {
	return matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
}

// TestRunVerdicts: Run applies the target's policy and allow file, and
// Report.Err turns violations into a failed gate and unreadable inputs
// without a target into bad input.
func TestRunVerdicts(t *testing.T) {
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	os.MkdirAll(tree, 0o755)
	write(t, filepath.Join(tree, "tiny.so"), string(tinyELF())) // SVE code and GLIBC_2.34: not for kunpeng920
	ctx := context.Background()

	rep, err := Run(ctx, Request{Inputs: []string{tree}, Target: "kunpeng920", Matrix: repoMatrix})
	if err != nil {
		t.Fatal(err)
	}
	verdict := rep.Err()
	if rep.Target != "kunpeng920" || rep.Summary.Violations == 0 || !errors.Is(verdict, fault.ErrGate) || fault.IsInput(verdict) ||
		verdict.Error() != fmt.Sprintf("%d violation(s) for kunpeng920", rep.Summary.Violations) {
		t.Errorf("kunpeng920: target %q, %d violations, verdict %v", rep.Target, rep.Summary.Violations, verdict)
	}

	allow := filepath.Join(dir, "allow.yaml")
	write(t, allow, "exceptions:\n  - {path: \"*.so\", kind: isa-extension, feature: sve, reason: test}\n  - {path: \"*.so\", kind: glibc-version, reason: test}\n")
	rep, err = Run(ctx, Request{Inputs: []string{tree}, Target: "kunpeng920", AllowFile: allow, Matrix: repoMatrix})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Allowed != 2 || !rep.Summary.Clean || rep.Err() != nil {
		t.Errorf("with the allow file: %+v, verdict %v", rep.Summary, rep.Err())
	}

	rep, err = Run(ctx, Request{Inputs: []string{tree}})
	if err != nil || rep.Policy != nil || rep.Err() != nil {
		t.Errorf("no target, readable input: policy %v, verdict %v, err %v", rep.Policy, rep.Err(), err)
	}
	truncated := filepath.Join(dir, "truncated.so")
	write(t, truncated, string(tinyELF()[:80]))
	rep, err = Run(ctx, Request{Inputs: []string{truncated}})
	if err != nil || rep.Summary.Unreadable == 0 || !fault.IsInput(rep.Err()) || !strings.Contains(rep.Err().Error(), "could not be read") {
		t.Errorf("no target, unreadable input: %+v, verdict %v, err %v", rep.Summary, rep.Err(), err)
	}
}

func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	badAllow := filepath.Join(dir, "allow.yaml")
	write(t, badAllow, "exceptions:\n  - {path: \"*.o\", kind: no-such-kind}\n")
	for name, req := range map[string]Request{
		"unknown target":  {Inputs: []string{dir}, Target: "no-such-cpu", Matrix: repoMatrix},
		"bad allow file":  {Inputs: []string{dir}, AllowFile: badAllow},
		"missing allow":   {Inputs: []string{dir}, AllowFile: filepath.Join(dir, "none.yaml")},
		"missing input":   {Inputs: []string{filepath.Join(dir, "nothing-here")}},
		"target, no file": {Inputs: []string{filepath.Join(dir, "nothing-here")}, Target: "graviton3", Matrix: repoMatrix},
	} {
		if _, err := Run(context.Background(), req); !fault.IsInput(err) {
			t.Errorf("%s: err = %v, want bad input", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "none.yaml")); err == nil {
		t.Fatal("none.yaml exists")
	}
}
