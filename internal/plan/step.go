package plan

import (
	"fmt"
	"strings"

	"github.com/dorisarm/dorisarm/internal/source"
)

// Kind is what a step does. Each kind has one way to run in the build
// runner and reads one of the step's typed inputs (StepInputs).
type Kind string

// Step kinds.
const (
	KindPatchTree  Kind = "patch-tree"      // dorisarm's patches on the tree itself (component doris); inputs: Patch
	KindFetch      Kind = "fetch"           // fetch + verify one archive into the tree's source dir; inputs: Fetch
	KindUnpack     Kind = "unpack"          // unpack one archive (and the tree's own patches for it); inputs: Unpack
	KindPatch      Kind = "patch"           // dorisarm's patches on one unpacked package; inputs: Patch
	KindBase       Kind = "thirdparty-base" // copy a prebuilt third-party install into the tree; inputs: Base
	KindThirdparty Kind = "thirdparty"      // build one package with the tree's build-thirdparty.sh; inputs: Build
	KindBuild      Kind = "build"           // a recipe step (be, fe), possibly a PGO phase of it; inputs: Build
	KindTrain      Kind = "pgo-train"       // run the instrumented build's workload under emulation; inputs: Train
	KindMerge      Kind = "pgo-merge"       // merge raw profiles; no inputs
	KindCollect    Kind = "collect"         // copy the outputs into $OUT; inputs: Collect
	KindScan       Kind = "scan"            // scan $OUT with the target's policy; no inputs
	KindSysroot    Kind = "sysroot"         // make (or find) the target OS's sysroot; inputs: Sysroot
	KindToolchain  Kind = "toolchain"       // check the compiler against the sysroot, lay out its wrappers; inputs: Toolchain
	KindRuntime    Kind = "runtime"         // build the C++ runtime against the capped sysroot; inputs: Runtime
)

// Cacheable reports whether the runner keeps a step of this kind's result
// in the step cache (collect and scan make the published build itself).
// A base is copied again each time: caching it would only copy it twice.
// Sysroot and toolchain steps keep their results in stores of their own
// (the sysroot cache, the probe verdicts), keyed as the plan says.
func (k Kind) Cacheable() bool {
	switch k {
	case KindCollect, KindScan, KindBase, KindSysroot, KindToolchain:
		return false
	}
	return true
}

// StepInputs are what a step reads besides its command, environment and
// needs. Exactly the field its kind names is set; all of it is part of the
// step's cache key.
type StepInputs struct {
	Fetch   *FetchInputs   `json:"fetch,omitempty"`
	Unpack  *UnpackInputs  `json:"unpack,omitempty"`
	Patch   *PatchInputs   `json:"patch,omitempty"`
	Base    *BaseInputs    `json:"base,omitempty"`
	Build   *BuildInputs   `json:"build,omitempty"`
	Train   *TrainInputs   `json:"train,omitempty"`
	Collect *CollectInputs `json:"collect,omitempty"`
	Scan    *ScanInputs    `json:"scan,omitempty"`
	// Sysroot and Toolchain are the setup steps' inputs.
	Sysroot   *SysrootInputs   `json:"sysroot,omitempty"`
	Toolchain *ToolchainInputs `json:"toolchain,omitempty"`
	Runtime   *RuntimeInputs   `json:"runtime,omitempty"`
}

// SysrootInputs name the target OS's sysroot by its spec's key (what it is
// made from), not by a path or the made tree.
type SysrootInputs struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// ToolchainInputs are the compiler, by the digests of its binaries, and
// the key of its check against the sysroot ("" when the sysroot is
// waived: nothing is checked).
type ToolchainInputs struct {
	Compiler string            `json:"compiler"`
	Digest   string            `json:"digest"`
	Parts    map[string]string `json:"parts,omitempty"` // toolchain.Identity.Parts
	Probe    string            `json:"probe,omitempty"`
}

// FetchInputs name one archive and what vouches for it.
type FetchInputs struct {
	Archive string `json:"archive"`          // file name in the mirror
	URL     string `json:"url"`              // where vars.sh says it comes from
	MD5     string `json:"md5"`              // vars.sh's checksum
	SHA256  string `json:"sha256,omitempty"` // the lock's pin; empty when unpinned
}

// UnpackInputs are what an unpack reads. dorisarm's own unpack (a step
// without a command) sets Unpacker, Archive, Source and the tree's patches;
// the tree's own unpack command sets Scripts only.
type UnpackInputs struct {
	Unpacker string `json:"unpacker,omitempty"` // version of dorisarm's unpack
	Archive  string `json:"archive,omitempty"`
	// Source is the directory the archive unpacks to, under the tree's
	// source directory; empty when the archive is used as it is.
	Source string `json:"source,omitempty"`
	// TreePatches are the tree's own patches for the package, applied in
	// this order with GNU patch.
	TreePatches []source.DorisPatch `json:"tree_patches,omitempty"`
	// Unsupported are commands the tree's download script runs for the
	// package that dorisarm does not (the unpack then fails, saying so).
	Unsupported []string `json:"unsupported,omitempty"`
	// InArchive are paths under Source that hold what those commands would
	// fetch (the recipe's thirdparty.in_archive): with them the unpack
	// checks they are there instead of failing.
	InArchive []string `json:"in_archive,omitempty"`
	// Scripts is the digest of the tree's third-party scripts.
	Scripts string `json:"scripts,omitempty"`
	// Package and Version are the entry and the version the tree (or the
	// recipe) names for it; the unpacked source must declare no other.
	// VersionFrom is where it declares it, when not in the usual places.
	Package     string              `json:"package,omitempty"`
	Version     string              `json:"version,omitempty"`
	VersionFrom *source.VersionFrom `json:"version_from,omitempty"`
}

// PatchInputs are the dorisarm patches a step applies, in order.
type PatchInputs struct {
	Tree    string       `json:"tree,omitempty"` // patch-tree: the digest of the tree it patches
	Patches []PatchInput `json:"patches"`
}

// PatchInput is one patch by its series ID and content.
type PatchInput struct {
	ID     string `json:"id"` // component/NNNN-name
	SHA256 string `json:"sha256"`
}

// BuildInputs are what a build command reads of the tree besides its needs.
type BuildInputs struct {
	Tree    string `json:"tree,omitempty"`    // build: the tree's digest
	Scripts string `json:"scripts,omitempty"` // thirdparty: the third-party scripts' digest
	// InstallDirs are the directories of the install tree a package's tree
	// starts with (the recipe's thirdparty.install_dirs).
	InstallDirs []string `json:"install_dirs,omitempty"`
	Profile     string   `json:"profile,omitempty"` // a PGO profile collected elsewhere
	// Tools are the build machine's programs that stand in the tree while
	// the step runs (a cross build's BE: the recipe's build_tools).
	Tools []BuildToolInfo `json:"build_tools,omitempty"`
	// HostEnv are the build machine's environment variables the step
	// reads a directory through (the recipe's host_env), by content.
	HostEnv []HostEnvInfo `json:"host_env,omitempty"`
}

// TrainInputs are what a PGO training run depends on besides its build.
type TrainInputs struct {
	QemuModel string `json:"qemu_model"`
}

// CollectInputs say what lands in $OUT.
type CollectInputs struct {
	Outputs []string `json:"outputs,omitempty"` // the recipe's outputs
	// Thirdparty is the install directory collected instead (--packages).
	Thirdparty string `json:"thirdparty,omitempty"`
	// Slice is CMake's build directory of a BE built part way, whose
	// compile_commands.json, objects and archives are collected instead.
	Slice string         `json:"slice,omitempty"`
	Extra []CollectExtra `json:"extra,omitempty"` // the recipe's collect rules that apply
}

// CollectExtra is one collect rule: a glob in the tree to a directory of $OUT.
type CollectExtra struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ScanInputs narrow the scan gate; without them every file of $OUT ships.
type ScanInputs struct {
	// Ships are globs of $OUT's paths that ship for deployment (a
	// third-party-only build's: the recipe's ships.thirdparty); the
	// target's deployment checks judge those files alone.
	Ships []string `json:"ships"`
}

// Validate checks that the step's kind is known and that it carries the
// inputs its kind reads (a plan written by hand or by an older dorisarm).
func (s *Step) Validate() error {
	var ok bool
	in := s.Inputs
	switch s.Kind {
	case KindFetch:
		ok = in.Fetch != nil && in.Fetch.Archive != "" && len(s.Outputs) == 1
	case KindUnpack:
		ok = len(s.Command) > 0 || (in.Unpack != nil && in.Unpack.Archive != "")
	case KindPatchTree:
		ok = in.Patch != nil && len(in.Patch.Patches) > 0
	case KindPatch:
		ok = in.Patch != nil && len(in.Patch.Patches) > 0 && len(s.Outputs) == 1
	case KindThirdparty, KindBuild:
		ok = len(s.Command) > 0
	case KindBase:
		ok = in.Base != nil && in.Base.Digest != "" && in.Base.Into != ""
	case KindTrain:
		ok = len(s.Command) > 0 && in.Train != nil
	case KindCollect:
		ok = in.Collect != nil
	case KindMerge, KindScan:
		ok = true
	case KindSysroot:
		ok = in.Sysroot != nil && in.Sysroot.Key != ""
	case KindToolchain:
		ok = in.Toolchain != nil && in.Toolchain.Digest != ""
	case KindRuntime:
		ok = in.Runtime != nil && in.Runtime.Source.SHA256 != "" && in.Runtime.Sysroot.Key != "" && in.Runtime.Compiler.Digest != "" && len(s.Outputs) == 1
	default:
		return fmt.Errorf("step %s: unknown kind %q (plan schema %d knows %s); plan again with this dorisarm", s.ID, s.Kind, Schema, strings.Join(kindNames(), ", "))
	}
	if !ok {
		return fmt.Errorf("step %s: a %s step without what it reads (its command, outputs or inputs.%s); plan again with this dorisarm", s.ID, s.Kind, inputsName(s.Kind))
	}
	return nil
}

func kindNames() []string {
	var out []string
	for _, k := range []Kind{KindSysroot, KindRuntime, KindToolchain, KindPatchTree, KindFetch, KindUnpack, KindPatch, KindBase, KindThirdparty, KindBuild, KindTrain, KindMerge, KindCollect, KindScan} {
		out = append(out, string(k))
	}
	return out
}

func inputsName(k Kind) string {
	switch k {
	case KindPatchTree:
		return "patch"
	case KindThirdparty:
		return "build"
	case KindTrain:
		return "train"
	}
	return string(k)
}

// PatchIDs are the IDs of the patches the step applies, in order.
func (s *Step) PatchIDs() []string {
	if s.Inputs.Patch == nil {
		return nil
	}
	ids := make([]string, len(s.Inputs.Patch.Patches))
	for i, p := range s.Inputs.Patch.Patches {
		ids[i] = p.ID
	}
	return ids
}

// Describe says in a line what the step does: its command, or for steps
// dorisarm runs itself what they read.
func (s *Step) Describe() string {
	in := s.Inputs
	switch {
	case s.Kind == KindCollect && in.Collect != nil && in.Collect.Thirdparty != "":
		return "collect " + in.Collect.Thirdparty + " -> $OUT/thirdparty/installed"
	case s.Kind == KindCollect && in.Collect != nil && in.Collect.Slice != "":
		return "collect " + in.Collect.Slice + "'s compile_commands.json, objects and archives -> $OUT/be-slice"
	case s.Kind == KindCollect && in.Collect != nil:
		return "collect " + strings.Join(in.Collect.Outputs, " ") + " -> $OUT"
	case len(s.Command) > 0:
		return strings.Join(s.Command, " ")
	case s.Kind == KindFetch && in.Fetch != nil:
		return "fetch " + in.Fetch.Archive + " (sha256 " + ShortDigest(in.Fetch.SHA256) + ")"
	case (s.Kind == KindPatch || s.Kind == KindPatchTree) && in.Patch != nil:
		return "apply " + strings.Join(s.PatchIDs(), " ")
	case s.Kind == KindBase && in.Base != nil:
		return fmt.Sprintf("copy a prebuilt third-party install (%d files, %s) -> %s", in.Base.Files, ShortDigest(in.Base.Digest), in.Base.Into)
	case s.Kind == KindMerge:
		return "keep " + strings.Join(s.Outputs, " ") + " (GCC .gcda profile)"
	case s.Kind == KindUnpack && in.Unpack != nil:
		d := "unpack " + in.Unpack.Archive
		if n := len(in.Unpack.TreePatches); n > 0 {
			d += fmt.Sprintf(" + %d of the tree's own patches", n)
		}
		return d
	}
	return ""
}

// ShortDigest is the first 12 characters of a digest, or "unpinned".
func ShortDigest(s string) string {
	if s == "" {
		return "unpinned"
	}
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
