// Package source reads what a Doris-style source tree says about itself — its
// version and its third-party packages (thirdparty/vars.sh) — and fetches,
// verifies and pins (recipes/*.lock) the archives those packages come from.
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

// Package is one third-party package as the tree's vars.sh declares it.
type Package struct {
	Entry   string `json:"entry"`            // the TP_ARCHIVES entry, e.g. BITSHUFFLE
	Name    string `json:"archive"`          // archive file name (<PKG>_NAME)
	Source  string `json:"source,omitempty"` // unpacked directory (<PKG>_SOURCE)
	File    string `json:"file,omitempty"`   // single-file packages (<PKG>_FILE)
	URL     string `json:"url"`
	MD5     string `json:"md5"`
	Version string `json:"version"`
	Build   string `json:"build,omitempty"` // build-thirdparty.sh name; "" for no build of its own
	// NoBuild says why a package has no build step (Build is "").
	NoBuild string `json:"no_build,omitempty"`
	// Patches are the tree's own patches for it, as its download script applies them.
	Patches []DorisPatch `json:"doris_patches,omitempty"`
	// Unsupported are other commands the download script runs for it
	// (downloads, helper scripts), which dorisarm does not run.
	Unsupported []string `json:"unsupported,omitempty"`
}

// scriptKey is the memo key of running bash with script over a tree's
// third-party scripts: bash's bytes, the script, its arguments, vars.sh's
// content (through a link) and every file of the directory vars.sh is in
// (its scripts and patches; not the source and install directories), by
// content and name. With no memo, or when something cannot be read, there
// is no key ("") and bash runs.
func scriptKey(m memo.Dir, tree string, r *recipe.Recipe, what, script string, args ...string) (string, error) {
	if m == "" {
		return "", nil
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return "", nil
	}
	bashSum, err := FileDigest(bash)
	if err != nil {
		return "", nil
	}
	varsSum, err := FileDigest(filepath.Join(tree, r.Thirdparty.Vars))
	if err != nil {
		return "", nil
	}
	tpDir := filepath.Join(tree, filepath.Dir(r.Thirdparty.Vars))
	var ignore []string
	for _, d := range []string{r.Thirdparty.SrcDir, r.Thirdparty.Install} {
		if rel, err := filepath.Rel(filepath.Dir(r.Thirdparty.Vars), d); err == nil && !strings.HasPrefix(rel, "..") {
			ignore = append(ignore, rel)
		}
	}
	scripts, err := TreeDigest(tpDir, ignore)
	if err != nil {
		return "", nil
	}
	return memo.Key(append([]string{what, bashSum, os.Getenv("PATH"), script, varsSum, scripts}, args...)...), nil
}

// varsScript sources vars.sh with uname answering for the target machine, so
// the tree's own arch switches (vectorscan for hyperscan on aarch64) decide,
// then prints each package's variables NUL-separated.
const varsScript = `set -e
uname() { case "$1" in -m|-p|-i) echo "$DORISARM_MACHINE" ;; *) echo Linux ;; esac; }
cd "$DORISARM_TP_DIR"
TP_DIR="$DORISARM_TP_DIR"
. "$DORISARM_VARS" >/dev/null
eval "list=(\"\${${DORISARM_LIST}[@]}\")"
for p in "${list[@]}"; do
  n="${p}_NAME" s="${p}_SOURCE" f="${p}_FILE" u="${p}_DOWNLOAD" m="${p}_MD5SUM"
  printf '%s\0%s\0%s\0%s\0%s\0%s\0' "$p" "${!n}" "${!s}" "${!f}" "${!u}" "${!m}" >>"$DORISARM_OUT"
done
`

// ReadPackages evaluates the tree's vars.sh for a target machine (uname -m
// value such as aarch64 or x86_64) and returns its packages in list order.
func ReadPackages(tree string, r *recipe.Recipe, machine string) ([]Package, error) {
	return ReadPackagesMemo(tree, r, machine, "")
}

// ReadPackagesMemo is ReadPackages with what bash printed remembered in m,
// by the digests of bash and of the files next to vars.sh (what it can
// source), so reading a tree seen before starts no process.
func ReadPackagesMemo(tree string, r *recipe.Recipe, machine string, m memo.Dir) ([]Package, error) {
	vars := filepath.Join(tree, r.Thirdparty.Vars)
	if st, err := os.Stat(vars); err != nil {
		return nil, fmt.Errorf("%s: %w (is --source a Doris-style tree?)", vars, err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (is --source a Doris-style tree?)", vars)
	}
	absVars, _ := filepath.Abs(vars)
	key, err := scriptKey(m, tree, r, "vars", varsScript, machine, absVars, r.Thirdparty.List)
	if err != nil {
		return nil, err
	}
	raw, err := m.Output(key, func() ([]byte, error) {
		out, err := os.CreateTemp("", "dorisarm-vars-*")
		if err != nil {
			return nil, err
		}
		out.Close()
		defer os.Remove(out.Name())
		cmd := exec.Command("bash", "-c", varsScript)
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "HOME=" + os.TempDir(),
			"DORISARM_MACHINE=" + machine, "DORISARM_TP_DIR=" + filepath.Dir(absVars),
			"DORISARM_VARS=" + absVars, "DORISARM_LIST=" + r.Thirdparty.List, "DORISARM_OUT=" + out.Name(),
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: sourcing it failed: %w: %s", vars, err, strings.TrimSpace(stderr.String()))
		}
		return os.ReadFile(out.Name())
	})
	if err != nil {
		return nil, err
	}
	fields := strings.Split(string(raw), "\x00")
	if len(fields) > 0 && fields[len(fields)-1] == "" {
		fields = fields[:len(fields)-1]
	}
	if len(fields)%6 != 0 || len(fields) == 0 {
		return nil, fmt.Errorf("%s: %s lists no packages", vars, r.Thirdparty.List)
	}
	var pkgs []Package
	for i := 0; i < len(fields); i += 6 {
		p := Package{Entry: fields[i], Name: fields[i+1], Source: fields[i+2], File: fields[i+3], URL: fields[i+4], MD5: strings.ToLower(fields[i+5])}
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("%s: package %s has no %s_NAME", vars, p.Entry, p.Entry)
		case p.URL == "":
			return nil, fmt.Errorf("%s: package %s has no %s_DOWNLOAD", vars, p.Entry, p.Entry)
		case !md5RE().MatchString(p.MD5):
			return nil, fmt.Errorf("%s: package %s: %s_MD5SUM %q is not an MD5 sum", vars, p.Entry, p.Entry, p.MD5)
		}
		p.Version = packageVersion(p, r.Thirdparty.Versions)
		p.Build = strings.ToLower(p.Entry)
		if b, ok := r.Thirdparty.BuildNames[p.Entry]; ok {
			p.Build = ""
			if len(b) > 0 {
				p.Build = b[0]
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

var (
	md5RE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{32}$`) })
	dottedRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\d+(?:\.\d+)+[a-z]?`) })
	underRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\d+(?:_\d+)+`) })
	integerRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\d+`) })
)

// packageVersion derives a version from the source directory or archive name
// ("bitshuffle-0.5.1" → 0.5.1, "boost_1_81_0" → 1.81.0), unless the recipe pins one.
func packageVersion(p Package, overrides map[string]string) string {
	if v, ok := overrides[p.Entry]; ok {
		return v
	}
	for _, s := range []string{p.Source, p.Name, p.File} {
		if v := dottedRE().FindString(s); v != "" {
			return v
		}
		if v := underRE().FindString(s); v != "" {
			return strings.ReplaceAll(v, "_", ".")
		}
	}
	for _, s := range []string{p.Source, p.Name} {
		if v := integerRE().FindString(s); v != "" {
			return v
		}
	}
	return "0"
}

// maxScript bounds a script of the source tree dorisarm reads (vars.sh,
// build-thirdparty.sh, the version file): Doris's are under 100 kB.
const maxScript = 16 << 20

// ReadVersion returns the version the tree declares ("2.1.8", "2.0.4-rc06").
func ReadVersion(tree string, r *recipe.Recipe) (string, error) {
	path := filepath.Join(tree, r.Version.File)
	data, err := fsutil.ReadFile(path, maxScript)
	if err != nil {
		return "", fmt.Errorf("cannot read the tree's version: %w (pass --doris VERSION)", err)
	}
	get := func(expr string) string {
		if expr == "" {
			return ""
		}
		m := regexp.MustCompile("(?m)" + expr).FindSubmatch(data)
		if m == nil {
			return ""
		}
		return string(m[1])
	}
	major, minor, patch := get(r.Version.Major), get(r.Version.Minor), get(r.Version.Patch)
	if major == "" || minor == "" || patch == "" {
		return "", fmt.Errorf("%s: no version found (looked for %s, %s, %s); pass --doris VERSION", path, r.Version.Major, r.Version.Minor, r.Version.Patch)
	}
	v := major + "." + minor + "." + patch
	if rc := get(r.Version.RC); rc != "" {
		v += "-" + rc
	}
	return v, nil
}
