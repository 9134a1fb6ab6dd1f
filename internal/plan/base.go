package plan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/memo"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/source"
)

// BaseInputs name a prebuilt third-party install a build starts from
// (--thirdparty-base): Doris's own prebuilt tarballs unpacked, or an
// install an earlier build published. It is copied into the recipe's
// install directory before any package builds; the packages the plan builds
// go over it. Its digest is part of the key of every step that needs it.
type BaseInputs struct {
	Digest string `json:"digest"` // source.TreeDigest of the directory
	Files  int    `json:"files"`
	Into   string `json:"into"` // the recipe's install directory, relative to the tree
}

// BaseStep is the ID of the step that lays the base down.
const BaseStep = "thirdparty-base"

// CheckBase reads a --thirdparty-base directory: its digest and file count.
// It refuses what a base must not hold: a link that resolves outside it
// (the build would read the build machine's files through it), a dangling
// link, a device or pipe.
func CheckBase(dir string) (*BaseInputs, error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("--thirdparty-base %s: not a directory (give an unpacked third-party install, the directory holding include/ and lib/)", dir)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("--thirdparty-base %s: %w", dir, err)
	}
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case t&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return fmt.Errorf("%s -> %s does not resolve (%v): remove it or make it point at a file in the base", rel, target, err)
			}
			if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
				return fmt.Errorf("%s -> %s resolves to %s, outside the base: a base must hold its own files (the build machine's programs come from the recipe's build_tools, its libraries never)", rel, target, real)
			}
		case t.IsRegular():
			files++
		default:
			return fmt.Errorf("%s is a %s: a base holds files, directories and links only", rel, t.Type())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--thirdparty-base %s: %w", dir, err)
	}
	if files == 0 {
		return nil, fmt.Errorf("--thirdparty-base %s: holds no files", dir)
	}
	digest, err := source.TreeDigest(root, nil)
	if err != nil {
		return nil, fmt.Errorf("--thirdparty-base %s: %w", dir, err)
	}
	return &BaseInputs{Digest: digest, Files: files}, nil
}

// BuildToolInfo is a build-machine program a cross build's BE steps run
// (the recipe's build_tools), identified by content, not by path.
type BuildToolInfo struct {
	Name    string `json:"name"`
	Path    string `json:"path"`              // where the tree runs it, relative to the tree
	Version string `json:"version,omitempty"` // the version it reports (Match's group)
	Digest  string `json:"digest,omitempty"`  // the program's bytes; empty when Missing
	// Missing says why the build machine has no usable program (the build
	// then fails before its BE step starts, saying how to install it).
	Missing string `json:"missing,omitempty"`
}

// ResolveBuildTools finds each of the recipe's build tools on this machine's
// PATH: its content digest and the version it reports. A missing tool is
// recorded, not an error: only a build that reaches a BE step needs it.
//
// What a tool answers to its version argument is remembered in m by the
// digest of its binary.
func ResolveBuildTools(ctx context.Context, r *recipe.Recipe, m memo.Dir) []BuildToolInfo {
	var out []BuildToolInfo
	for _, name := range slices.Sorted(maps.Keys(r.BuildTools)) {
		bt := r.BuildTools[name]
		info := BuildToolInfo{Name: name, Path: bt.Path}
		path, err := exec.LookPath(name)
		if err != nil {
			info.Missing = fmt.Sprintf("%s is not on this machine's PATH", name)
			if bt.Install != "" {
				info.Missing += " (" + bt.Install + ")"
			}
			out = append(out, info)
			continue
		}
		if info.Digest, err = source.FileDigest(path); err != nil {
			info.Missing = fmt.Sprintf("reading %s: %v", path, err)
		}
		if bt.Version != "" && bt.Match != "" && info.Missing == "" {
			info.Version, err = toolVersion(ctx, m, path, info.Digest, bt.Version, bt.Match)
			if err != nil {
				info.Missing = err.Error()
			}
		}
		out = append(out, info)
	}
	return out
}

// FindBuildTool is the build machine's program for a resolved tool: it must
// still be on PATH with the bytes the plan recorded.
func FindBuildTool(t BuildToolInfo) (string, error) {
	if t.Missing != "" {
		return "", errors.New(t.Missing)
	}
	path, err := exec.LookPath(t.Name)
	if err != nil {
		return "", fmt.Errorf("%s is not on this machine's PATH", t.Name)
	}
	sum, err := source.FileDigest(path)
	if err != nil {
		return "", err
	}
	if sum != t.Digest {
		return "", fmt.Errorf("%s (%s) changed since the plan was made (%s, planned %s): plan again", t.Name, path, ShortDigest(sum), ShortDigest(t.Digest))
	}
	return path, nil
}

func toolVersion(ctx context.Context, m memo.Dir, path, digest, arg, match string) (string, error) {
	out, err := m.Output(memo.Key("version", digest, arg), func() ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return exec.CommandContext(ctx, path, arg).CombinedOutput()
	})
	if err != nil {
		return "", fmt.Errorf("%s %s: %v", path, arg, err)
	}
	got := regexp.MustCompile(match).FindSubmatch(out)
	if got == nil {
		first, _, _ := strings.Cut(string(out), "\n")
		return "", fmt.Errorf("%s %s printed %q, which does not match %q", path, arg, first, match)
	}
	return string(got[1]), nil
}

// buildToolWarnings says where a cross build's BE would run a code
// generator of another version than the tree pins.
func buildToolWarnings(tools []BuildToolInfo, r *recipe.Recipe, pkgs []source.Package) []string {
	var out []string
	for _, t := range tools {
		bt := r.BuildTools[t.Name]
		if bt == nil {
			continue
		}
		if t.Missing != "" {
			out = append(out, fmt.Sprintf("build tool %s: %s; the BE step runs it from %s", t.Name, t.Missing, t.Path))
			continue
		}
		pk, ok := findPackage(pkgs, bt.Package)
		if ok && t.Version != "" && pk.Version != "" && t.Version != pk.Version {
			out = append(out, fmt.Sprintf("build tool %s: this machine's is %s, %s pins %s %s; its generated code is compiled against %s's headers in the install directory",
				t.Name, t.Version, r.Thirdparty.Vars, bt.Package, pk.Version, bt.Package))
		}
	}
	return out
}

// HostEnvInfo is an environment variable the tree's steps take from the
// build machine (the recipe's host_env), identified by the digest of what
// they read of it, not by its value (a machine path).
type HostEnvInfo struct {
	Name    string `json:"name"`
	Digest  string `json:"digest,omitempty"`
	Missing string `json:"missing,omitempty"`
}

// ResolveHostEnv reads each of the recipe's host_env variables from this
// machine's environment. An unset one is recorded, not an error: only a
// build that reaches the tree's steps needs it.
func ResolveHostEnv(r *recipe.Recipe) []HostEnvInfo {
	var out []HostEnvInfo
	for _, name := range slices.Sorted(maps.Keys(r.HostEnv)) {
		info := HostEnvInfo{Name: name}
		info.Digest, info.Missing = hostEnvDigest(name, r.HostEnv[name])
		out = append(out, info)
	}
	return out
}

// CheckHostEnv is the build machine's variable for a resolved one: still
// set, and what the build reads of it unchanged since planning.
func CheckHostEnv(h HostEnvInfo, r *recipe.Recipe) error {
	if h.Missing != "" {
		return errors.New(h.Missing)
	}
	he := r.HostEnv[h.Name]
	if he == nil {
		return fmt.Errorf("the plan reads $%s, which recipe %s does not name: plan again", h.Name, r.Name)
	}
	d, missing := hostEnvDigest(h.Name, he)
	switch {
	case missing != "":
		return errors.New(missing)
	case d != h.Digest:
		return fmt.Errorf("what the build reads of $%s changed since the plan was made (%s, planned %s): plan again", h.Name, ShortDigest(d), ShortDigest(h.Digest))
	}
	return nil
}

func hostEnvDigest(name string, he *recipe.HostEnv) (digest, missing string) {
	hint := ""
	if he.Install != "" {
		hint = " (" + he.Install + ")"
	}
	dir := os.Getenv(name)
	if dir == "" {
		return "", fmt.Sprintf("%s is not set%s", name, hint)
	}
	var lines []string
	for _, rel := range he.Read {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Sprintf("$%s/%s: %v%s", name, rel, err, hint)
		}
		var d string
		if st.IsDir() {
			d, err = source.TreeDigest(p, nil)
		} else {
			d, err = source.FileDigest(p)
		}
		if err != nil {
			return "", fmt.Sprintf("$%s/%s: %v", name, rel, err)
		}
		lines = append(lines, rel+" "+d)
	}
	return source.StringDigest(strings.Join(lines, "\n")), ""
}
