package build

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/source"
)

// layBase copies the prebuilt third-party install into the tree and checks
// that what landed is what the plan vouched for: a base changed between
// planning and building is refused, not built from. Its absolute links
// into the base land as relative links (plan.Base.Link, as the plan's
// digest counts them): the tree never points at the base's machine path.
func (r *runner) layBase(s plan.Step, log io.Writer) error {
	b := s.Inputs.Base
	if r.opts.ThirdpartyBase == "" {
		return fmt.Errorf("the plan starts from a prebuilt third-party install (%s) and none was given: pass --thirdparty-base", plan.ShortDigest(b.Digest))
	}
	dst := filepath.Join(r.src, filepath.FromSlash(b.Into))
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := r.copyBase(b, dst); err != nil {
		os.RemoveAll(dst) // a refused base leaves nothing of itself in the tree
		return err
	}
	fmt.Fprintf(log, "laid down a prebuilt third-party install: %d files, %s, in %s\n", b.Files, b.Digest, b.Into)
	return nil
}

// copyBase copies --thirdparty-base to dst and checks the copy's digest.
func (r *runner) copyBase(b *plan.BaseInputs, dst string) error {
	base, err := plan.OpenBase(r.opts.ThirdpartyBase)
	if err != nil {
		return err
	}
	if err := copyTreeLinks(base.Root, dst, nil, base.Link); err != nil {
		return fmt.Errorf("copying --thirdparty-base %s: %w", r.opts.ThirdpartyBase, err)
	}
	got, err := source.TreeDigest(dst, nil)
	if err != nil {
		return err
	}
	if got != b.Digest {
		return fmt.Errorf("--thirdparty-base %s changed since it was planned (%s, planned %s): plan and build again", r.opts.ThirdpartyBase, plan.ShortDigest(got), plan.ShortDigest(b.Digest))
	}
	return nil
}

// placeBuildTools checks the build machine's environment the step reads
// (host_env) and puts the build machine's programs where a cross build's
// BE step runs its code generators, moving whatever stood there (a target
// protoc a package installed) aside; restore puts the tree back as it was,
// so the step's result holds neither the host program nor a gap.
func (r *runner) placeBuildTools(s plan.Step, log io.Writer) (restore func(), err error) {
	var undo []func() error
	restore = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			if err := undo[i](); err != nil {
				fmt.Fprintf(log, "restoring the tree after the build tools: %v\n", err)
			}
		}
	}
	if s.Inputs.Build == nil {
		return restore, nil
	}
	defer func() {
		if err != nil {
			restore()
		}
	}()
	for _, h := range s.Inputs.Build.HostEnv {
		if err := plan.CheckHostEnv(h, r.in.Recipe); err != nil {
			return restore, fmt.Errorf("%w: step %s reads $%s (recipe host_env): %v", ErrGate, s.ID, h.Name, err)
		}
	}
	for _, t := range s.Inputs.Build.Tools {
		host, err := plan.FindBuildTool(t)
		if err != nil {
			return restore, fmt.Errorf("%w: step %s runs the build machine's %s (recipe build_tools): %v", ErrGate, s.ID, t.Name, err)
		}
		at := filepath.Join(r.src, filepath.FromSlash(t.Path))
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			return restore, err
		}
		aside := at + ".dorisarm-target"
		switch _, err := os.Lstat(at); {
		case err == nil:
			if err := os.Rename(at, aside); err != nil {
				return restore, err
			}
			undo = append(undo, func() error { os.Remove(at); return os.Rename(aside, at) })
		case errors.Is(err, os.ErrNotExist):
			undo = append(undo, func() error { return os.Remove(at) })
		default:
			return restore, err
		}
		if err := os.Symlink(host, at); err != nil {
			return restore, err
		}
		fmt.Fprintf(log, "build tool %s: %s -> the build machine's %s (version %s, %s)\n", t.Name, t.Path, host, t.Version, plan.ShortDigest(t.Digest))
	}
	return restore, nil
}
