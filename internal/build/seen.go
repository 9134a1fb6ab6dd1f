package build

import (
	"path/filepath"
	"strings"
)

// stepRoot is where a step's namespace shows what it is given of the
// cell's work directory: the tree at /dorisarm/src, the compiler homes at
// /dorisarm/toolchain, the sysroot at /dorisarm/sysroot (and its uncapped
// twin at /dorisarm/sysroot-run), the PGO and ThinLTO directories. The
// same on every machine, whatever the cache directory, so that what
// compilers record (-frecord-command-line, DW_AT_comp_dir, __FILE__) and
// so every object and image is the same wherever it is built.
const stepRoot = "/dorisarm"

// The fixed paths of the sysroots and the runtime step's inputs in a
// step's namespace.
var (
	seenSysroot        = stepRoot + "/sysroot"
	seenSysrootRun     = stepRoot + "/sysroot-run"
	seenRuntimeSource  = stepRoot + "/runtime-source"
	seenRuntimeSysroot = stepRoot + "/runtime-sysroot"
)

// seenSource is where a runtime step sees its source archive: under
// seenRuntimeSource by the archive's own name, which says how it unpacks
// (a Debian .orig.tar.gz holds its upstream .tar.xz; a .tar.xz is one).
func seenSource(archive string) string {
	if archive == "" {
		return ""
	}
	return seenRuntimeSource + "/" + filepath.Base(archive)
}

// seen is where a step's programs see p, a path of this machine: under
// stepRoot for the cell's work directory, the sysroots and the runtime
// step's inputs; p itself for the rest (the build machine's system, the
// compilers, the recipe's host_env directories).
func (r *runner) seen(p string) string {
	if p == "" {
		return p
	}
	for _, m := range r.seenMap() {
		if m[0] == "" {
			continue
		}
		if p == m[0] {
			return m[1]
		}
		if rest, ok := strings.CutPrefix(p, m[0]+string(filepath.Separator)); ok {
			return m[1] + "/" + filepath.ToSlash(rest)
		}
	}
	return p
}

// seenMap pairs this machine's paths with where a step sees them, the
// most specific first.
func (r *runner) seenMap() [][2]string {
	sysroot, run := r.sysrootPath(), r.sysrootRunPath()
	if run == sysroot {
		run = ""
	}
	return [][2]string{
		{sysroot, seenSysroot}, {run, seenSysrootRun},
		{r.runtimeSource, seenSource(r.runtimeSource)}, {r.runtimeSysroot, seenRuntimeSysroot},
		{r.work, stepRoot},
	}
}
