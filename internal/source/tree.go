package source

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/memo"
	"github.com/dorisarm/dorisarm/internal/recipe"
)

// Facts a Doris tree states in its own scripts, read rather than restated in
// a recipe: which build functions build-thirdparty.sh defines, and which of
// its own patches download-thirdparty.sh applies to each package.

var buildFuncRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\s*(?:function\s+)?build_([A-Za-z0-9_]+)\s*\(\s*\)`)
})

// BuildFunctions returns the <name>s of the build_<name>() functions script defines.
func BuildFunctions(script string) (map[string]bool, error) {
	data, err := fsutil.ReadFile(script, maxScript)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range buildFuncRE().FindAllSubmatch(data, -1) {
		out[string(m[1])] = true
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s defines no build_<package>() function: is it Doris's build-thirdparty.sh?", script)
	}
	return out, nil
}

// ResolveBuilds sets each package's Build to the build function that builds
// it: the first of the recipe's build_names candidates (or the lower-case
// entry) that script defines. A package whose candidates are all missing gets
// Build "" and a NoBuild reason; one the recipe marks "" has no build of its own.
func ResolveBuilds(pkgs []Package, funcs map[string]bool, r *recipe.Recipe, script string) {
	for i := range pkgs {
		p := &pkgs[i]
		cands := []string{strings.ToLower(p.Entry)}
		if c, ok := r.Thirdparty.BuildNames[p.Entry]; ok {
			cands = c
		}
		p.Build = ""
		if len(cands) == 0 || (len(cands) == 1 && cands[0] == "") {
			p.NoBuild = "no build of its own (recipe thirdparty.build_names)"
			continue
		}
		for _, c := range cands {
			if funcs[c] {
				p.Build = c
				break
			}
		}
		if p.Build == "" {
			var names []string
			for _, c := range cands {
				names = append(names, "build_"+c)
			}
			p.NoBuild = fmt.Sprintf("%s defines no %s", filepath.Base(script), strings.Join(names, " or "))
		}
	}
}

// DorisPatch is one of the tree's own patches for a package, as its download
// script applies it.
type DorisPatch struct {
	File   string `json:"file"`             // relative to the tree
	Args   string `json:"args"`             // patch's arguments, e.g. -p1
	SHA256 string `json:"sha256,omitempty"` // of File
}

// TreePatches are the tree's own patches by package source directory, and
// what else the download script would do there.
type TreePatches struct {
	BySource map[string][]DorisPatch
	// Other are commands the script runs in a source directory besides
	// patch and touch (downloads, helper scripts): dorisarm does not run them.
	Other map[string][]string
}

// patchRecorder runs the patch section of the download script with every
// external command replaced by a recorder: nothing is unpacked, downloaded or
// patched; cd only remembers where the script thinks it is.
const patchRecorder = `
uname() { case "$1" in -m|-p|-i) echo "$DORISARM_MACHINE" ;; *) echo Linux ;; esac; }
TP_DIR="$DORISARM_TP_DIR"
DORIS_HOME="$DORISARM_TREE"
. "$DORISARM_VARS" >/dev/null 2>&1
__where=""
cd() { case "$1" in -|"") ;; *) __where="$1" ;; esac; return 0; }
pushd() { cd "$@"; }
popd() { return 0; }
touch() { return 0; }
patch() { printf 'patch\0%s\0%s\0%s\0' "$__where" "$*" "$("$DORISARM_READLINK" -f /proc/self/fd/0)" >>"$DORISARM_OUT"; return 0; }
command_not_found_handle() { printf 'other\0%s\0%s\0\0' "$__where" "$*" >>"$DORISARM_OUT"; return 0; }
PATH="$DORISARM_EMPTY"
`

// ReadTreePatches reads which of its own patches the tree's download script
// applies to each package: it runs the script's patch section (from the
// first line that sets PATCHED_MARK) with vars.sh sourced for machine and
// every command recorded instead of run.
func ReadTreePatches(tree string, r *recipe.Recipe, script, machine string) (*TreePatches, error) {
	return ReadTreePatchesMemo(tree, r, script, machine, "")
}

// ReadTreePatchesMemo is ReadTreePatches with what the recorder printed
// remembered in m (see ReadPackagesMemo).
func ReadTreePatchesMemo(tree string, r *recipe.Recipe, script, machine string, m memo.Dir) (*TreePatches, error) {
	absTree, err := filepath.Abs(tree)
	if err != nil {
		return nil, err
	}
	scriptPath := filepath.Join(absTree, script)
	data, err := fsutil.ReadFile(scriptPath, maxScript)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "PATCHED_MARK=") {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("%s: no patch section found (no line sets PATCHED_MARK); set thirdparty.patches_from in the recipe to the script that patches the packages, or use thirdparty.unpack", scriptPath)
	}
	section := strings.Join(lines[start:], "\n")
	vars := filepath.Join(absTree, r.Thirdparty.Vars)
	readlink, err := exec.LookPath("readlink")
	if err != nil {
		return nil, err
	}
	key, err := scriptKey(m, absTree, r, "patches", patchRecorder+section, machine, absTree, readlink)
	if err != nil {
		return nil, err
	}
	raw, err := m.Output(key, func() ([]byte, error) {
		tmp, err := os.MkdirTemp("", "dorisarm-patches-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		empty := filepath.Join(tmp, "empty")
		work := filepath.Join(tmp, "work")
		os.MkdirAll(empty, 0o755)
		os.MkdirAll(work, 0o755)
		out := filepath.Join(tmp, "out")
		cmd := exec.Command("bash", "-c", patchRecorder+section)
		cmd.Dir = work
		cmd.Env = []string{"LC_ALL=C", "HOME=" + tmp, "PATH=" + os.Getenv("PATH"),
			"DORISARM_MACHINE=" + machine, "DORISARM_TP_DIR=" + filepath.Dir(vars), "DORISARM_TREE=" + absTree,
			"DORISARM_VARS=" + vars, "DORISARM_OUT=" + out, "DORISARM_EMPTY=" + empty, "DORISARM_READLINK=" + readlink}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: reading its patch section failed: %w: %s", scriptPath, err, strings.TrimSpace(stderr.String()))
		}
		raw, err := os.ReadFile(out)
		if os.IsNotExist(err) {
			return []byte{}, nil
		}
		return raw, err
	})
	if err != nil {
		return nil, err
	}
	tp := &TreePatches{BySource: map[string][]DorisPatch{}, Other: map[string][]string{}}
	fields := strings.Split(string(raw), "\x00")
	srcDir := filepath.Join(filepath.Dir(vars), "src") + "/"
	for i := 0; i+3 < len(fields); i += 4 {
		kind, where, args, file := fields[i], fields[i+1], fields[i+2], fields[i+3]
		dir := strings.TrimPrefix(filepath.Clean(where)+"/", srcDir)
		dir = strings.TrimSuffix(dir, "/")
		if where == "" || strings.Contains(dir, "/") {
			dir = where // not under the source directory: reported as is
		}
		switch kind {
		case "patch":
			rel, err := filepath.Rel(absTree, file)
			if err != nil || strings.HasPrefix(rel, "..") {
				return nil, fmt.Errorf("%s: patches %s with %s, which is outside the tree", scriptPath, dir, file)
			}
			sum, err := FileDigest(file)
			if err != nil {
				return nil, err
			}
			tp.BySource[dir] = append(tp.BySource[dir], DorisPatch{File: filepath.ToSlash(rel), Args: args, SHA256: sum})
		case "other":
			tp.Other[dir] = append(tp.Other[dir], args)
		}
	}
	return tp, nil
}
