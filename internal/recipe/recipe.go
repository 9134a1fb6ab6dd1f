// Package recipe loads recipes/*.yaml: how to build one source tree with
// Doris's build interface. A recipe does not list third-party packages; those
// come from the tree's own thirdparty/vars.sh (see package source). It adds
// what Doris lacks: dependencies between packages, per-target settings for
// packages that would otherwise tune themselves to the build host, the build
// steps and the outputs.
package recipe

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/template"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

// Recipe is a decoded recipe file.
type Recipe struct {
	Name        string          `yaml:"name"`
	Description string          `yaml:"description"`
	Version     VersionSpec     `yaml:"version"`
	Thirdparty  Thirdparty      `yaml:"thirdparty"`
	Patches     string          `yaml:"patches"`
	Lock        string          `yaml:"lock"`
	Steps       map[string]Step `yaml:"steps" shape:"is keyed by step name: be: {command: [./build.sh, --be], env: {VAR: value}, needs: [thirdparty], outputs: [output/be]}"`
	PGO         PGO             `yaml:"pgo"`
	// Slice says how the BE is built part way (dorisarm build
	// --be-configure-only, --be-targets).
	Slice Slice `yaml:"slice"`
	// BuildTools are programs a cross build's BE steps run on the build
	// machine (code generators), by the name they are found under on PATH.
	BuildTools map[string]*BuildTool `yaml:"build_tools" shape:"is keyed by program name: protoc: {path: thirdparty/installed/bin/protoc, package: PROTOBUF, version: --version, match: 'libprotoc (\\S+)'}"`
	// HostEnv are environment variables the tree's steps (BE, FE) take from
	// the build machine, each naming a directory they read.
	HostEnv map[string]*HostEnv `yaml:"host_env" shape:"is keyed by variable name: JAVA_HOME: {read: [include], install: how to get it}"`
	// FixedMarch are the tree's build files (globs relative to it) where a
	// literal -march (or -mcpu) sets the instruction set of everything
	// they compile: Doris 2.1 and 3.0's be/CMakeLists.txt adds
	// -march=armv8-a+crc after the caller's flags. A plan that builds the
	// BE refuses such a line that no selected patch replaces.
	FixedMarch []string `yaml:"fixed_march"`
	// LibstdcxxMin is the oldest GCC release whose C++ library the tree's
	// own code compiles against (checked against the sysroot's libstdcxx).
	LibstdcxxMin string `yaml:"libstdcxx_min"`
	// CMakeCache are cache entries pinned for every CMake configure of the
	// build (through the generated toolchain file), for packages that would
	// otherwise tune themselves to the build host. Values are templates.
	CMakeCache map[string]string `yaml:"cmake_cache" shape:"is keyed by CMake cache variable, each a value template: BUILD_SVE: 'OFF'"`
	// Collect copies more files into the output, when their condition (a
	// template) renders "true": e.g. the shared OpenSSL for dynamic targets.
	Collect []CollectRule `yaml:"collect"`
	// Ships says what a build publishes for deployment where that is not
	// all it collects: the scan's deployment checks (matrix.yaml
	// scan.deployment_checks) judge those files alone.
	Ships Ships `yaml:"ships"`
	// Smoke are the commands every build must pass under the target's CPU
	// model, relative to the output directory (e.g. be/lib/doris_be --self-test).
	Smoke [][]string `yaml:"smoke"`
	// ScanAllow is an allow file (relative to the recipe) of reviewed scan
	// exceptions every build of this recipe carries.
	ScanAllow string   `yaml:"scan_allow"`
	Outputs   []string `yaml:"outputs"`
	// Ignore lists tree paths that are build products, not sources (besides
	// the third-party source and install directories).
	Ignore []string `yaml:"ignore"`
	// Images are the container images made from a build's outputs, by
	// image name (doris-be, doris-fe).
	Images map[string]*ImageSpec `yaml:"images"`

	// File is where the recipe was read from; Dir the directory relative
	// paths in it (patches, lock) are resolved against; Digest its sha256.
	File   string `yaml:"-"`
	Dir    string `yaml:"-"`
	Digest string `yaml:"-"`
	Pos    datafile.Pos
	Keys   datafile.Keys
}

// ImageSpec is one container image made from a build's outputs: what goes
// in and the image's run-time configuration, laid out like Apache Doris's
// official images.
type ImageSpec struct {
	// From is the output directory the image holds (be, fe), placed at Path.
	From string `yaml:"from"`
	Path string `yaml:"path"`
	// Shared images are the same for every target (the Java FE): the
	// release names them once per version.
	Shared     bool     `yaml:"shared"`
	Entrypoint []string `yaml:"entrypoint"`
	Cmd        []string `yaml:"cmd"`
	Env        []string `yaml:"env"`
	// Ports are exposed ports: "8030/tcp".
	Ports   []string `yaml:"ports"`
	User    string   `yaml:"user"`
	Workdir string   `yaml:"workdir"`
	Pos     datafile.Pos
	Keys    datafile.Keys
}

// VersionSpec says where a tree declares its version.
type VersionSpec struct {
	File  string `yaml:"file"`
	Major string `yaml:"major"`
	Minor string `yaml:"minor"`
	Patch string `yaml:"patch"`
	RC    string `yaml:"rc"`
	// Trunk is the version a development tree declares (Doris master:
	// 0.0.0-trunk); such a tree is planned as the matrix's newest series.
	Trunk string `yaml:"trunk"`
	Pos   datafile.Pos
	Keys  datafile.Keys
}

// Thirdparty describes the tree's third-party build.
type Thirdparty struct {
	Vars    string   `yaml:"vars"`
	List    string   `yaml:"list"`
	Unpack  []string `yaml:"unpack"`
	Build   []string `yaml:"build"`
	SrcDir  string   `yaml:"source_dir"`
	Install string   `yaml:"install_dir"`
	Mirror  string   `yaml:"mirror"`
	// BuildNames maps a TP_ARCHIVES entry to the names of the build function
	// build-thirdparty.sh may have for it, when that is not simply the
	// lower-case entry: the first one the script defines is used; an empty
	// list means the entry has no build of its own (sources another package builds).
	BuildNames map[string][]string `yaml:"build_names" shape:"is keyed by package (a vars.sh entry), each the list of build function names: ODBC: [odbc, libunixodbc]"`
	// PatchesFrom, instead of Unpack, has dorisarm unpack each archive itself
	// and apply the tree's own patches for it as this script (Doris's
	// download-thirdparty.sh) would: its patch section is read, not run.
	PatchesFrom string `yaml:"patches_from"`
	// Reads are files outside the third-party directory its scripts read
	// (Doris's build-thirdparty.sh sources env.sh and custom_env.sh): part
	// of every third-party step's cache key, present or not.
	Reads []string `yaml:"reads"`
	// InstallDirs are directories under install_dir every package's tree
	// starts with, as Doris's script has them by the time it builds the
	// package: some packages copy into installed/include without making it
	// (libdivide, xxhash), relying on a package built before them.
	InstallDirs []string            `yaml:"install_dirs"`
	Deps        map[string][]string `yaml:"deps" shape:"is keyed by package (a vars.sh entry), each the list of packages it links against: GLOG: [GFLAGS]"`
	// InArchive are, for a package whose download script fetches more than
	// its archive (aws-sdk-cpp's block downloads aws-crt-cpp), the paths in
	// its unpacked source that hold what it fetches: the mirror's archive
	// carries them, and the unpack checks they are there.
	InArchive map[string][]string `yaml:"in_archive" shape:"is keyed by package (a vars.sh entry), each the list of paths under its source directory the archive holds for what its download script fetches: AWS_SDK: [crt/aws-crt-cpp]"`
	// SourceReads are packages whose unpacked, patched sources a package's
	// build reads although they have a build of their own (build_mysql
	// copies BOOST_SOURCE): their sources are in its tree, their install
	// is not, and --packages does not build them for it.
	SourceReads map[string][]string          `yaml:"source_reads" shape:"is keyed by package (a vars.sh entry), each the list of packages whose sources its build reads: MYSQL: [BOOST]"`
	Env         map[string]map[string]string `yaml:"env" shape:"is keyed by package (a vars.sh entry), then by variable: GLOG: {CFLAGS: -O2}"`
	Versions    map[string]string            `yaml:"versions" shape:"is keyed by package (a vars.sh entry), each the version it is: OPENSSL: 1.1.1s"`
	// VersionFiles say where a package's unpacked source declares its
	// version when its build system does not in the usual places
	// (CMakeLists.txt project(), configure.ac AC_INIT, configure, meson.build).
	VersionFiles map[string]*VersionFile `yaml:"version_files" shape:"is keyed by package (a vars.sh entry): OPENSSL: {file: include/openssl/opensslv.h, match: 'OpenSSL (\\S+)'}"`
	// NotUsed are packages the tree declares that its product does not
	// use on some machines (Doris's HDFS3 on Linux x86_64 and aarch64).
	NotUsed map[string]*NotUsed `yaml:"not_used" shape:"is keyed by package (a vars.sh entry): HDFS3: {isas: [aarch64], why: ..., shown_by: {file: be/CMakeLists.txt, line: 'ARCH_AARCH64'}}"`
	Pos     datafile.Pos
	Keys    datafile.Keys
}

// VersionFile is a file of an unpacked package and a regexp whose first
// group is the version it declares.
type VersionFile struct {
	File  string `yaml:"file"`
	Match string `yaml:"match"`
	Pos   datafile.Pos
	Keys  datafile.Keys
}

// NotUsed is a package the tree's product does not use on some machines:
// a plan for them does not build it unless --packages names it, and says
// why, with the line of the tree's build that shows it.
type NotUsed struct {
	// ISAs are the instruction sets (matrix isas) it is not used on; none
	// means on any.
	ISAs []string `yaml:"isas"`
	Why  string   `yaml:"why"`
	// ShownBy is where the tree's build says so; a tree where it no longer
	// does (Doris changed) builds the package, with a warning.
	ShownBy ShownBy `yaml:"shown_by"`
	Pos     datafile.Pos
	Keys    datafile.Keys
}

// ShownBy is a file of the tree and either a line it has (Line, a
// regexp: the plan names the file and line number) or a pattern it lacks
// (Absent: nothing in the file names the package).
type ShownBy struct {
	File   string `yaml:"file"`
	Line   string `yaml:"line"`
	Absent string `yaml:"absent"`
	Pos    datafile.Pos
	Keys   datafile.Keys
}

// Slice is how a recipe builds its BE part way: the step configures
// (with Env added, e.g. Doris's OUTPUT_BE_BINARY=0, which makes build.sh
// stop after CMake), then Build (a template; the targets are appended) builds
// named targets or object files in Dir, CMake's build directory. The
// slice's output is Dir's compile_commands.json and the objects and
// archives it made.
type Slice struct {
	Step  string            `yaml:"step"`
	Env   map[string]string `yaml:"env"`
	Dir   string            `yaml:"dir"`
	Build []string          `yaml:"build"`
	Pos   datafile.Pos
	Keys  datafile.Keys
}

// PGO says how a target that asks for profile-guided optimisation trains.
// BuildTool is a program a tree's build runs from a fixed path in the tree
// (Doris's gensrc runs thirdparty/installed/bin/protoc and thrift) that must
// run on the build machine in a cross build: a target protoc there would run
// under emulation, or not be there at all when the package is not rebuilt.
// For a cross build's BE steps the build machine's program (found on PATH)
// stands at Path while the step runs; it is moved away again after it, so
// no step's result holds it.
type BuildTool struct {
	// Path is where the tree's build runs it, relative to the tree.
	Path string `yaml:"path"`
	// Package is the third-party entry (vars.sh) whose version the tool
	// should have, e.g. PROTOBUF for protoc.
	Package string `yaml:"package"`
	// Version is the argument that makes it print its version, and Match a
	// regexp whose first group is that version in vars.sh's spelling; a
	// differing version is a plan warning.
	Version string `yaml:"version"`
	Match   string `yaml:"match"`
	// Install says how to get it (shown when the build machine lacks it).
	Install string `yaml:"install"`
	Pos     datafile.Pos
	Keys    datafile.Keys
}

// HostEnv is an environment variable a tree's build takes from the build
// machine, naming a directory it reads (Doris's BE compiles its JNI code
// against $JAVA_HOME/include). It must be set; the digest of what the build
// reads of it keys the steps, so a step built against one JDK's headers is
// not reused with another's.
type HostEnv struct {
	// Read are the paths in the directory the build reads, relative to it.
	Read []string `yaml:"read"`
	// Install says how to get and set it (shown when it is not set).
	Install string `yaml:"install"`
	Pos     datafile.Pos
	Keys    datafile.Keys
}

type PGO struct {
	// Step is the recipe step built twice (instrumented, then optimized).
	Step string `yaml:"step"`
	// Train runs the instrumented build's workload (relative to the tree, run
	// under the target's emulator). Empty: a profile must be supplied
	// (--pgo-profile), as for real Doris, trained with TPC-H on real hardware.
	Train []string `yaml:"train"`
	// Clean are build directories (relative to the tree) removed before the
	// optimized build, so it recompiles everything with the profile (CMake
	// would otherwise keep the instrumented compiler it cached).
	Clean []string `yaml:"clean"`
	Pos   datafile.Pos
	Keys  datafile.Keys
}

// CollectRule copies files matching From (a glob relative to the tree) into
// To (relative to the output directory) when When renders "true".
type CollectRule struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
	When string `yaml:"when"`
	Pos  datafile.Pos
	Keys datafile.Keys
}

// Ships are globs of paths in a build's output as scan reports name them
// ("*" does not cross "/"; a glob that matches a directory ships what is
// in it).
type Ships struct {
	// Thirdparty is what a third-party-only build (--packages) ships: what
	// the BE takes from the install directory. None: every file ships.
	Thirdparty []string `yaml:"thirdparty"`
	Pos        datafile.Pos
	Keys       datafile.Keys
}

// Step is a build step of the tree itself (BE, FE).
type Step struct {
	Command []string          `yaml:"command"`
	Env     map[string]string `yaml:"env"`
	Needs   []string          `yaml:"needs"`
	Outputs []string          `yaml:"outputs"`
	Pos     datafile.Pos
	Keys    datafile.Keys
}

// Load reads and validates a recipe.
func Load(path string) (*Recipe, error) {
	data, err := datafs.ReadFile(path)
	if err != nil {
		return nil, &datafile.Error{Pos: datafile.Pos{File: path}, Msg: fmt.Sprintf("cannot read the recipe: %v (pass --recipe FILE)", err), Err: err}
	}
	var r Recipe
	if err := datafile.Decode(path, data, &r); err != nil {
		return nil, err
	}
	r.File = path
	r.Dir = datafs.Dir(path)
	r.Digest = digestBytes(data)
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Path resolves a path written in the recipe (relative to the recipe's
// directory; for a built-in recipe, a name in the built-in data).
func (r *Recipe) Path(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return datafs.Join(r.Dir, p)
}

// StepNames returns the tree's steps in dependency order (then by name).
func (r *Recipe) StepNames() []string {
	var out []string
	done := map[string]bool{}
	var visit func(string)
	visit = func(n string) {
		if done[n] {
			return
		}
		done[n] = true
		for _, d := range r.Steps[n].Needs {
			if _, ok := r.Steps[d]; ok {
				visit(d)
			}
		}
		out = append(out, n)
	}
	names := make([]string, 0, len(r.Steps))
	for n := range r.Steps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		visit(n)
	}
	return out
}

// problems collects a data file's errors, each at its place.
type problems struct{ list datafile.List }

func (e *problems) fail(p datafile.Pos, f string, a ...any) {
	e.list = append(e.list, datafile.Errorf(p, f, a...))
}

func (r *Recipe) validate() error {
	var e problems
	if r.Name == "" {
		e.fail(r.Pos, "recipe: name is required")
	}
	for _, check := range []func(*problems){
		r.checkVersion, r.checkThirdparty, r.checkSteps, r.checkImages, r.checkSlice,
		r.checkBuildTools, r.checkVersionFiles, r.checkNotUsed, r.checkHostEnv, r.checkOutputs,
	} {
		check(&e)
	}
	return e.list.Err()
}

// checkVersion checks the version section: the file and the regexps that read the tree's version.
func (r *Recipe) checkVersion(e *problems) {
	v := r.Version
	if v.File == "" {
		e.fail(r.Keys.At("version", r.Pos), "recipe %s: version.file is required (the file the tree declares its version in)", r.Name)
	}
	for _, kv := range []struct{ key, re string }{{"major", v.Major}, {"minor", v.Minor}, {"patch", v.Patch}, {"rc", v.RC}} {
		if kv.re == "" {
			if kv.key != "rc" {
				e.fail(v.Keys.At(kv.key, v.Pos), "recipe %s: version.%s is required (a regular expression with one group)", r.Name, kv.key)
			}
			continue
		}
		re, err := regexp.Compile(kv.re)
		if err != nil {
			e.fail(v.Keys.At(kv.key, v.Pos), "recipe %s: version.%s: bad regular expression: %v", r.Name, kv.key, err)
		} else if re.NumSubexp() != 1 {
			e.fail(v.Keys.At(kv.key, v.Pos), "recipe %s: version.%s must have exactly one group, has %d", r.Name, kv.key, re.NumSubexp())
		}
	}
}

// checkThirdparty checks the thirdparty section: what is required, the install directories, the dependencies and the environment.
func (r *Recipe) checkThirdparty(e *problems) {
	tp := r.Thirdparty
	for _, kv := range []struct {
		key string
		ok  bool
	}{{"vars", tp.Vars != ""}, {"list", tp.List != ""}, {"unpack or patches_from", len(tp.Unpack) > 0 || tp.PatchesFrom != ""}, {"build", len(tp.Build) > 0}, {"source_dir", tp.SrcDir != ""}, {"install_dir", tp.Install != ""}} {
		if !kv.ok {
			e.fail(r.Keys.At("thirdparty", r.Pos), "recipe %s: thirdparty.%s is required", r.Name, kv.key)
		}
	}
	for _, d := range tp.InstallDirs {
		if d == "" || path.IsAbs(d) || path.Clean(d) != d || d == "." || d == ".." || strings.HasPrefix(d, "../") {
			e.fail(tp.Keys.At("install_dirs", tp.Pos), "recipe %s: thirdparty.install_dirs: %q is not a clean relative path under install_dir (as include)", r.Name, d)
		}
	}
	if len(tp.Unpack) > 0 && tp.PatchesFrom != "" {
		e.fail(tp.Keys.At("patches_from", tp.Pos), "recipe %s: thirdparty has both unpack and patches_from: keep one (patches_from: dorisarm unpacks and applies the tree's own patches; unpack: a command does both)", r.Name)
	}
	for pkg, deps := range tp.Deps {
		for _, d := range deps {
			if d == pkg {
				e.fail(tp.Keys.At("deps", tp.Pos), "recipe %s: thirdparty.deps: %s depends on itself", r.Name, pkg)
			}
		}
	}
	for pkg, paths := range tp.InArchive {
		for _, d := range paths {
			if d == "" || path.IsAbs(d) || path.Clean(d) != d || d == "." || d == ".." || strings.HasPrefix(d, "../") {
				e.fail(tp.Keys.At("in_archive", tp.Pos), "recipe %s: thirdparty.in_archive.%s: %q is not a clean relative path under its source directory", r.Name, pkg, d)
			}
		}
	}
	for pkg, reads := range tp.SourceReads {
		for _, d := range reads {
			if d == pkg {
				e.fail(tp.Keys.At("source_reads", tp.Pos), "recipe %s: thirdparty.source_reads: %s reads its own sources", r.Name, pkg)
			}
		}
	}
	if cyc := depCycle(tp.Deps); cyc != "" {
		e.fail(tp.Keys.At("deps", tp.Pos), "recipe %s: thirdparty.deps has a cycle: %s", r.Name, cyc)
	}
	for pkg, env := range tp.Env {
		for k, val := range env {
			if _, err := parseTemplate(val); err != nil {
				e.fail(tp.Keys.At("env", tp.Pos), "recipe %s: thirdparty.env.%s.%s: %v", r.Name, pkg, k, err)
			}
		}
	}
}

// checkSteps checks the build steps: each has a command, needs known steps, and parses.
func (r *Recipe) checkSteps(e *problems) {
	if len(r.Steps) == 0 {
		e.fail(r.Keys.At("steps", r.Pos), "recipe %s: steps: at least one build step (e.g. be) is required", r.Name)
	}
	for name, s := range r.Steps {
		if len(s.Command) == 0 {
			e.fail(s.Pos, "recipe %s: step %s: command is required", r.Name, name)
		}
		for _, d := range s.Needs {
			if _, ok := r.Steps[d]; !ok && d != "thirdparty" {
				e.fail(s.Keys.At("needs", s.Pos), "recipe %s: step %s needs unknown step %q (a step name or \"thirdparty\")", r.Name, name, d)
			}
		}
		for _, word := range append(append([]string{}, s.Command...), mapValues(s.Env)...) {
			if _, err := parseTemplate(word); err != nil {
				e.fail(s.Pos, "recipe %s: step %s: %v", r.Name, name, err)
			}
		}
	}
}

// checkImages checks the images: each from an output directory, at an absolute path, with well-formed ports and environment.
func (r *Recipe) checkImages(e *problems) {
	for _, name := range slices.Sorted(maps.Keys(r.Images)) {
		im := r.Images[name]
		if im == nil || im.From == "" || strings.Contains(im.From, "..") || strings.HasPrefix(im.From, "/") {
			e.fail(r.Keys.At("images", r.Pos), "recipe %s: image %s: from must name an output directory (be, fe)", r.Name, name)
			continue
		}
		if !strings.HasPrefix(im.Path, "/") {
			e.fail(im.Keys.At("path", im.Pos), "recipe %s: image %s: path must be absolute (e.g. /opt/apache-doris/be)", r.Name, name)
		}
		for _, p := range im.Ports {
			if !portRE().MatchString(p) {
				e.fail(im.Keys.At("ports", im.Pos), "recipe %s: image %s: port %q must look like 8030/tcp", r.Name, name, p)
			}
		}
		for _, kv := range im.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				e.fail(im.Keys.At("env", im.Pos), "recipe %s: image %s: env %q must be NAME=value", r.Name, name, kv)
			}
		}
	}
}

// checkSlice checks the slice section: a step of the recipe, a build directory inside the tree.
func (r *Recipe) checkSlice(e *problems) {
	if r.Slice.Step != "" {
		if _, ok := r.Steps[r.Slice.Step]; !ok {
			e.fail(r.Slice.Keys.At("step", r.Slice.Pos), "recipe %s: slice.step %q is not a step", r.Name, r.Slice.Step)
		}
		if r.Slice.Dir == "" || len(r.Slice.Build) == 0 {
			e.fail(r.Slice.Pos, "recipe %s: slice needs dir (CMake's build directory, relative to the tree) and build (the command that builds targets there)", r.Name)
		}
		if d := r.Slice.Dir; filepath.IsAbs(d) || strings.HasPrefix(filepath.Clean(d), "..") {
			e.fail(r.Slice.Keys.At("dir", r.Slice.Pos), "recipe %s: slice.dir %q must be a path inside the tree", r.Name, d)
		}
	}
}

// checkBuildTools checks the build tools: a path inside the tree, a program name, a version regexp with its group.
func (r *Recipe) checkBuildTools(e *problems) {
	for _, name := range slices.Sorted(maps.Keys(r.BuildTools)) {
		bt := r.BuildTools[name]
		if bt == nil {
			e.fail(r.Keys.At("build_tools", r.Pos), "recipe %s: build_tools.%s is empty: give path (where the tree runs it), version and match", r.Name, name)
			continue
		}
		if p := bt.Path; p == "" || filepath.IsAbs(p) || strings.HasPrefix(filepath.Clean(p), "..") {
			e.fail(bt.Keys.At("path", bt.Pos), "recipe %s: build_tools.%s.path %q must be a path inside the tree (where its build runs %s)", r.Name, name, p, name)
		}
		if strings.ContainsAny(name, "/ ") || name == "" {
			e.fail(bt.Pos, "recipe %s: build_tools key %q must be a program name, as found on PATH", r.Name, name)
		}
		if bt.Match != "" {
			re, err := regexp.Compile(bt.Match)
			switch {
			case err != nil:
				e.fail(bt.Keys.At("match", bt.Pos), "recipe %s: build_tools.%s.match: %v", r.Name, name, err)
			case re.NumSubexp() < 1:
				e.fail(bt.Keys.At("match", bt.Pos), "recipe %s: build_tools.%s.match %q has no group: its first group must capture the version", r.Name, name, bt.Match)
			}
			if bt.Version == "" || bt.Package == "" {
				e.fail(bt.Keys.At("match", bt.Pos), "recipe %s: build_tools.%s.match needs version (the argument that prints it) and package (the vars.sh entry to compare with)", r.Name, name)
			}
		}
	}
}

// checkVersionFiles checks thirdparty.version_files: a file in the unpacked source and a regexp with groups.
func (r *Recipe) checkVersionFiles(e *problems) {
	for _, name := range slices.Sorted(maps.Keys(r.Thirdparty.VersionFiles)) {
		vf := r.Thirdparty.VersionFiles[name]
		if vf == nil || vf.File == "" || vf.Match == "" {
			e.fail(r.Thirdparty.Keys.At("version_files", r.Thirdparty.Pos), "recipe %s: thirdparty.version_files.%s needs file (a path in the unpacked source) and match (a regexp whose groups, joined with dots, are the version)", r.Name, name)
			continue
		}
		if filepath.IsAbs(vf.File) || strings.HasPrefix(filepath.Clean(vf.File), "..") {
			e.fail(vf.Keys.At("file", vf.Pos), "recipe %s: thirdparty.version_files.%s.file %q must be a path inside the unpacked source", r.Name, name, vf.File)
		}
		if re, err := regexp.Compile(vf.Match); err != nil || re.NumSubexp() < 1 {
			e.fail(vf.Keys.At("match", vf.Pos), "recipe %s: thirdparty.version_files.%s.match %q must be a regexp whose groups, joined with dots, are the version", r.Name, name, vf.Match)
		}
	}
}

// checkNotUsed checks thirdparty.not_used: each says why, and shows it
// by a file of the tree with a line it has or a pattern it lacks.
func (r *Recipe) checkNotUsed(e *problems) {
	for _, name := range slices.Sorted(maps.Keys(r.Thirdparty.NotUsed)) {
		nu := r.Thirdparty.NotUsed[name]
		if nu == nil || strings.TrimSpace(nu.Why) == "" {
			e.fail(r.Thirdparty.Keys.At("not_used", r.Thirdparty.Pos), "recipe %s: thirdparty.not_used.%s needs why (what the tree's build does instead) and shown_by (the file of the tree that shows it)", r.Name, name)
			continue
		}
		sb := nu.ShownBy
		if f := sb.File; f == "" || filepath.IsAbs(f) || strings.HasPrefix(filepath.Clean(f), "..") {
			e.fail(nu.Keys.At("shown_by", nu.Pos), "recipe %s: thirdparty.not_used.%s.shown_by.file %q must be a file of the tree (e.g. be/CMakeLists.txt)", r.Name, name, sb.File)
		}
		if (sb.Line == "") == (sb.Absent == "") {
			e.fail(nu.Keys.At("shown_by", nu.Pos), "recipe %s: thirdparty.not_used.%s.shown_by needs one of line (a regexp of the line that shows it) and absent (a regexp the file has no match of)", r.Name, name)
			continue
		}
		for _, kv := range [][2]string{{"line", sb.Line}, {"absent", sb.Absent}} {
			if kv[1] == "" {
				continue
			}
			if _, err := regexp.Compile(kv[1]); err != nil {
				e.fail(sb.Keys.At(kv[0], sb.Pos), "recipe %s: thirdparty.not_used.%s.shown_by.%s: %v", r.Name, name, kv[0], err)
			}
		}
	}
}

// checkHostEnv checks host_env: the paths under each variable the build reads.
func (r *Recipe) checkHostEnv(e *problems) {
	for _, name := range slices.Sorted(maps.Keys(r.HostEnv)) {
		he := r.HostEnv[name]
		if he == nil || len(he.Read) == 0 {
			e.fail(r.Keys.At("host_env", r.Pos), "recipe %s: host_env.%s needs read (the paths in $%s the build reads, e.g. include)", r.Name, name, name)
			continue
		}
		for _, p := range he.Read {
			if p == "" || filepath.IsAbs(p) || strings.HasPrefix(filepath.Clean(p), "..") {
				e.fail(he.Keys.At("read", he.Pos), "recipe %s: host_env.%s.read %q must be a path inside $%s", r.Name, name, p, name)
			}
		}
	}
}

// checkOutputs checks the pgo step, the CMake cache pins, the collect rules, what ships and the outputs.
func (r *Recipe) checkOutputs(e *problems) {
	if r.PGO.Step != "" {
		if _, ok := r.Steps[r.PGO.Step]; !ok {
			e.fail(r.PGO.Keys.At("step", r.PGO.Pos), "recipe %s: pgo.step %q is not a step", r.Name, r.PGO.Step)
		}
	}
	for k, v := range r.CMakeCache {
		if _, err := parseTemplate(v); err != nil {
			e.fail(r.Keys.At("cmake_cache", r.Pos), "recipe %s: cmake_cache.%s: %v", r.Name, k, err)
		}
	}
	for i, c := range r.Collect {
		if c.From == "" || c.To == "" {
			e.fail(c.Pos, "recipe %s: collect[%d]: from and to are required", r.Name, i)
		}
		if _, err := parseTemplate(c.When); err != nil {
			e.fail(c.Keys.At("when", c.Pos), "recipe %s: collect[%d].when: %v", r.Name, i, err)
		}
	}
	for i, g := range r.Ships.Thirdparty {
		if _, err := path.Match(g, ""); err != nil || g == "" || path.IsAbs(g) || g != path.Clean(g) {
			e.fail(r.Ships.Keys.At("thirdparty", r.Ships.Pos), "recipe %s: ships.thirdparty[%d] %q must be a glob of paths in a third-party build's output, as its scan names them (e.g. thirdparty/installed/lib64/openssl-shared)", r.Name, i, g)
		}
	}
	if len(r.Outputs) == 0 {
		e.fail(r.Keys.At("outputs", r.Pos), "recipe %s: outputs: list what a build hands over (e.g. output/be/lib/doris_be)", r.Name)
	}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func depCycle(deps map[string][]string) string {
	state := map[string]int{}
	var stack []string
	var found string
	var visit func(string) bool
	visit = func(n string) bool {
		switch state[n] {
		case 1:
			i := 0
			for j, s := range stack {
				if s == n {
					i = j
				}
			}
			found = strings.Join(append(append([]string{}, stack[i:]...), n), " -> ")
			return true
		case 2:
			return false
		}
		state[n] = 1
		stack = append(stack, n)
		for _, d := range deps[n] {
			if visit(d) {
				return true
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = 2
		return false
	}
	keys := make([]string, 0, len(deps))
	for k := range deps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if visit(k) {
			return found
		}
	}
	return ""
}

// Context is what recipe templates see: the cell being built.
type Context struct {
	Target  *matrix.Target
	CPU     *matrix.CPU
	OS      *matrix.OS
	ISA     *matrix.ISA
	Allowed []string
	March   string
	Jobs    int
	Package string // the TP_ARCHIVES entry, in third-party steps
	Build   string // its build-thirdparty.sh name
}

// Has reports whether the target CPU has an extension.
func (c Context) Has(ext string) bool {
	for _, a := range c.Allowed {
		if a == ext {
			return true
		}
	}
	return false
}

func parseTemplate(s string) (*template.Template, error) {
	return template.New("").Option("missingkey=error").Parse(s)
}

// Expand renders a recipe string for a cell.
func Expand(s string, ctx Context) (string, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	t, err := parseTemplate(s)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, ctx); err != nil {
		return "", fmt.Errorf("expanding %q: %w", s, err)
	}
	return b.String(), nil
}

var portRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,5}/(tcp|udp)$`) })

// ImageNames are the names in the images: section of the recipe file, in
// order; a recipe without images is bad input (a release needs them).
func ImageNames(file string) ([]string, error) {
	r, err := Load(file)
	if err != nil {
		return nil, err
	}
	if len(r.Images) == 0 {
		return nil, fault.Inputf("%s names no images (images:): pass the recipe the release was built with", file)
	}
	return slices.Sorted(maps.Keys(r.Images)), nil
}
