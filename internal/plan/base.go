package plan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/linkres"
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
// link, a relative link whose path leaves the base (laid down elsewhere it
// would point at something else), a device or pipe. An absolute link into
// the base is counted as the relative link the build lays down in its
// place (Base.Link): the tree never points at the base's machine path.
// Its errors are bad input.
func CheckBase(dir string) (*BaseInputs, error) {
	b, err := checkBase(dir)
	return b, fault.Input(err)
}

func checkBase(dir string) (*BaseInputs, error) {
	base, err := OpenBase(dir)
	if err != nil {
		return nil, err
	}
	root := base.Root
	files := 0
	links := map[string]baseLink{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case t&fs.ModeSymlink != 0:
			l, err := base.readLink(p, filepath.ToSlash(rel))
			links[l.rel] = l
			return err
		case t.IsRegular():
			files++
		default:
			return fmt.Errorf("%s is a %s: a base holds files, directories and links only", rel, t.Type())
		}
		return nil
	})
	if err == nil {
		err = base.checkLaid(links)
	}
	if err != nil {
		return nil, fmt.Errorf("--thirdparty-base %s: %w", dir, err)
	}
	if files == 0 {
		return nil, fmt.Errorf("--thirdparty-base %s: holds no files", dir)
	}
	digest, err := source.TreeDigestLinks(root, nil, func(rel, target string) string {
		if l, ok := links[rel]; ok && l.target == target {
			return l.laid
		}
		return target // changed since it was read: the build's copy will differ
	})
	if err != nil {
		return nil, fmt.Errorf("--thirdparty-base %s: %w", dir, err)
	}
	return &BaseInputs{Digest: digest, Files: files}, nil
}

// Base is a --thirdparty-base directory.
type Base struct {
	Dir  string // as given, made absolute
	Root string // Dir with its links resolved: what is read and copied
}

// OpenBase finds a --thirdparty-base directory.
func OpenBase(dir string) (*Base, error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("--thirdparty-base %s: not a directory (give an unpacked third-party install, the directory holding include/ and lib/)", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("--thirdparty-base %s: %w", dir, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("--thirdparty-base %s: %w", dir, err)
	}
	return &Base{Dir: abs, Root: root}, nil
}

// Link is the target the link at rel (slash-separated, relative to the
// base) with target gets where the base is laid down: a relative target
// stays; an absolute one naming a path in the base (by the directory as
// given or as resolved) becomes that path relative to the link; an
// absolute one elsewhere is refused.
func (b *Base) Link(rel, target string) (string, error) {
	if !filepath.IsAbs(target) {
		return target, nil
	}
	for _, dir := range []string{b.Root, b.Dir} {
		in, err := filepath.Rel(dir, filepath.Clean(target))
		if err != nil || in == ".." || strings.HasPrefix(in, ".."+string(filepath.Separator)) {
			continue
		}
		laid, err := filepath.Rel(filepath.Dir(filepath.FromSlash(rel)), in)
		return filepath.ToSlash(laid), err
	}
	return "", fault.Inputf("%s -> %s is an absolute link outside the base (%s): laid down into the tree it would point at a path of the build machine's; copy what it points to into the base and link to it by a relative path, or remove the link", rel, target, b.Dir)
}

// baseLink is a link of the base: its target and the target laid down.
type baseLink struct {
	rel, target, laid string
}

// readLink reads the link at p (rel in the base): it must resolve, to a
// path in the base, and be one Link can lay down.
func (b *Base) readLink(p, rel string) (baseLink, error) {
	l := baseLink{rel: rel}
	var err error
	if l.target, err = os.Readlink(p); err != nil {
		return l, err
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return l, fmt.Errorf("%s -> %s does not resolve (%v): remove it or make it point at a file in the base", rel, l.target, err)
	}
	if real != b.Root && !strings.HasPrefix(real, b.Root+string(filepath.Separator)) {
		return l, fmt.Errorf("%s -> %s resolves to %s, outside the base: a base must hold its own files (the build machine's programs come from the recipe's build_tools, its libraries never); copy what it points to into the base, or remove the link", rel, l.target, real)
	}
	l.laid, err = b.Link(rel, l.target)
	return l, err
}

// checkLaid checks the base's links as the build lays them down: followed
// through each other, none leaves the base (a relative path that climbs
// out and back in would lead elsewhere in the tree), and a rewritten
// absolute link leads where it did.
func (b *Base) checkLaid(links map[string]baseLink) error {
	root, err := os.OpenRoot(b.Root)
	if err != nil {
		return err
	}
	defer root.Close()
	laid := &linkres.Overlay{Base: linkres.RootTree{Root: root}, Entries: map[string]*string{}}
	for rel, l := range links {
		laid.Entries[rel] = &l.laid
	}
	for _, rel := range slices.Sorted(maps.Keys(links)) {
		l := links[rel]
		if err := linkres.CheckIn(laid, rel, l.laid); err != nil {
			return fault.Inputf("%v: a base's links must lead to its files by paths that stay in it (laid down into the tree, a path through the base's own directory leads elsewhere); make it a relative link that does not leave the base", err)
		}
		if l.laid == l.target {
			continue
		}
		was, err1 := filepath.EvalSymlinks(filepath.Join(b.Root, filepath.FromSlash(rel)))
		now, err2 := filepath.EvalSymlinks(filepath.Join(b.Root, filepath.FromSlash(path.Dir(rel)), filepath.FromSlash(l.laid)))
		if err1 != nil || err2 != nil || was != now {
			return fault.Inputf("%s -> %s: made relative to the base (%s) it would lead elsewhere; make it a relative link to the file in the base", rel, l.target, l.laid)
		}
	}
	return nil
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
