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
// (host_env) and copies the build machine's programs where a cross
// build's BE step runs its code generators, moving whatever stood there
// (a target protoc a package installed) aside. Everything goes through an
// os.Root of the tree, so no link the tree holds (installed/bin made a
// link to a directory of this machine) leads a write or a removal out of
// it. restore puts the tree back as it was, so the step's result holds
// neither the host program nor a gap; its error fails the step.
func (r *runner) placeBuildTools(s plan.Step, log io.Writer) (restore func() error, err error) {
	var undo []func(*os.Root) error
	var root *os.Root
	restore = func() error {
		if root == nil {
			return nil
		}
		defer root.Close()
		var first error
		for i := len(undo) - 1; i >= 0; i-- {
			if err := undo[i](root); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	if s.Inputs.Build == nil {
		return restore, nil
	}
	defer func() {
		if err != nil {
			if rerr := restore(); rerr != nil {
				fmt.Fprintf(log, "restoring the tree after the build tools: %v\n", rerr)
			}
		}
	}()
	for _, h := range s.Inputs.Build.HostEnv {
		if err := plan.CheckHostEnv(h, r.in.Recipe); err != nil {
			return restore, fmt.Errorf("%w: step %s reads $%s (recipe host_env): %v", ErrGate, s.ID, h.Name, err)
		}
	}
	if len(s.Inputs.Build.Tools) == 0 {
		return restore, nil
	}
	if root, err = os.OpenRoot(r.src); err != nil {
		return restore, err
	}
	for _, t := range s.Inputs.Build.Tools {
		host, err := plan.FindBuildTool(t)
		if err != nil {
			return restore, fmt.Errorf("%w: step %s runs the build machine's %s (recipe build_tools): %v", ErrGate, s.ID, t.Name, err)
		}
		u, err := placeTool(root, host, t)
		if u != nil {
			undo = append(undo, u)
		}
		if err != nil {
			return restore, fmt.Errorf("step %s: placing the build machine's %s at %s: %w", s.ID, t.Name, t.Path, err)
		}
		fmt.Fprintf(log, "build tool %s: %s, a copy of the build machine's %s (version %s, %s)\n", t.Name, t.Path, host, t.Version, plan.ShortDigest(t.Digest))
	}
	return restore, nil
}

// placeTool copies the program host to t.Path in the tree under root,
// moving what stands there aside; undo (nil when nothing changed) puts
// the tree back.
func placeTool(root *os.Root, host string, t plan.BuildToolInfo) (undo func(*os.Root) error, err error) {
	at := filepath.FromSlash(t.Path)
	if err := root.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		return nil, err
	}
	aside := at + ".dorisarm-target"
	switch _, err := root.Lstat(at); {
	case err == nil:
		if err := root.Rename(at, aside); err != nil {
			return nil, err
		}
		undo = func(root *os.Root) error {
			if err := root.RemoveAll(at); err != nil {
				return err
			}
			return root.Rename(aside, at)
		}
	case errors.Is(err, os.ErrNotExist):
		undo = func(root *os.Root) error { return root.RemoveAll(at) }
	default:
		return nil, err
	}
	in, err := os.Open(host)
	if err != nil {
		return undo, err
	}
	defer in.Close()
	out, err := root.OpenFile(at, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return undo, err
	}
	sum, err := source.Sum(io.TeeReader(in, out))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && "sha256:"+sum.SHA256 != t.Digest {
		err = fmt.Errorf("%s changed while it was copied (%s, planned %s): plan again", host, plan.ShortDigest("sha256:"+sum.SHA256), plan.ShortDigest(t.Digest))
	}
	return undo, err
}

// hostToolCopies are the files of the step's result that are copies of
// the build machine's build tools: none may be published.
func (r *runner) hostToolCopies(s plan.Step) []string {
	if s.Inputs.Build == nil || len(s.Inputs.Build.Tools) == 0 {
		return nil
	}
	sizes := map[int64]bool{}
	digests := map[string]string{}
	for _, t := range s.Inputs.Build.Tools {
		host, err := plan.FindBuildTool(t)
		if err != nil {
			continue
		}
		if st, err := os.Stat(host); err == nil {
			sizes[st.Size()] = true
			digests[t.Digest] = t.Name
		}
	}
	var out []string
	for _, rel := range r.changed {
		p := filepath.Join(r.root(), filepath.FromSlash(rel))
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() || !sizes[st.Size()] {
			continue
		}
		if d, err := source.FileDigest(p); err == nil && digests[d] != "" {
			out = append(out, fmt.Sprintf("%s (the build machine's %s)", rel, digests[d]))
		}
	}
	return out
}
