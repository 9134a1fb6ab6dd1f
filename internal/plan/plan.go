// Package plan turns a cell, a recipe, a source tree, its patch series and a
// resolved toolchain into the ordered steps of one build, each with a
// content-addressed cache key. A plan is plain data: printing it twice from
// the same inputs gives the same bytes, on any machine.
//
// Plans never hold machine paths. They use placeholders the runner fills in:
// $SRC (the working copy of the source tree), $TOOLCHAIN/<phase> (the
// generated compiler home of a flag phase), $PROFILE (the merged PGO profile)
// and $OUT (the cell's output directory).
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/source"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// Schema is the plan format version. 2: typed step inputs (fetch, unpack,
// patch, build, train, collect) instead of a string map; every key changed.
const Schema = 2

// Plan is one cell's build.
type Plan struct {
	Schema    int              `json:"schema"`
	Cell      CellInfo         `json:"cell"`
	Matrix    string           `json:"matrix_digest"`
	Recipe    RecipeInfo       `json:"recipe"`
	Source    SourceInfo       `json:"source"`
	Toolchain ToolchainInfo    `json:"toolchain"`
	Packages  []source.Package `json:"packages"`
	Patches   []PatchRef       `json:"patches"`
	Warnings  []string         `json:"warnings,omitempty"`
	// Only lists the third-party packages built when the plan is for some
	// packages alone (--packages): no BE, no FE.
	Only []string `json:"only,omitempty"`
	// NotUsed are the tree's packages the cell's product does not use
	// (the recipe's thirdparty.not_used), built only when asked for.
	NotUsed []NotUsedPackage `json:"not_used,omitempty"`
	// Slice says the plan builds the BE part way, and how.
	Slice *SliceInfo `json:"slice,omitempty"`
	// Unbuildable says why building this plan would fail for certain (a
	// sysroot whose C++ library is too old): the plan is shown, a build
	// of it stops before its first step.
	Unbuildable string              `json:"unbuildable,omitempty"`
	Steps       []Step              `json:"steps"`
	Phases      map[string][]string `json:"phases"` // flag phase → compile flags
}

// CellInfo is the resolved cell.
type CellInfo struct {
	Doris    string   `json:"doris"`
	Series   string   `json:"series"`
	Target   string   `json:"target"`
	CPU      string   `json:"cpu"`
	OS       string   `json:"os"`
	ISA      string   `json:"isa"`
	Glibc    string   `json:"glibc_max"`
	PageSize int      `json:"page_size"`
	Qemu     string   `json:"qemu"`
	March    string   `json:"march"`
	Enabled  []string `json:"enabled"`
	Allowed  []string `json:"allowed"`
	PGO      bool     `json:"pgo"`
	// PGONone says why a target that uses PGO builds without it ("no
	// profile": the recipe has no training workload and no --pgo-profile
	// was given); the record, attestation, images and report carry it.
	PGONone string `json:"pgo_none,omitempty"`
	// LostTuning is the user's reason for building a BE whose tree fixes
	// an -march no selected patch replaces (FixedMarch lists the lines).
	LostTuning  string       `json:"lost_tuning,omitempty"`
	FixedMarch  []FixedMarch `json:"fixed_march,omitempty"`
	LTO         string       `json:"lto,omitempty"`
	OpenSSL     string       `json:"openssl"`
	BaseImage   string       `json:"base_image"`
	Required    []string     `json:"required_patches,omitempty"`
	Description string       `json:"description,omitempty"`
	// Sysroot is the target OS's libraries the build links against;
	// SysrootWaiver the recorded reason when it links the build machine's.
	Sysroot       *toolchain.Sysroot `json:"sysroot,omitempty"`
	SysrootWaiver string             `json:"sysroot_waiver,omitempty"`
}

// RecipeInfo identifies the recipe.
type RecipeInfo struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// SourceInfo identifies the source tree by content, not by path.
type SourceInfo struct {
	Version string `json:"version"`
	Digest  string `json:"digest"`
	Scripts string `json:"thirdparty_scripts_digest"`
}

// ToolchainInfo is the compiler and what it gets.
type ToolchainInfo struct {
	Compiler toolchain.Identity `json:"compiler"`
	Target   []string           `json:"target_flags"`
	Env      []string           `json:"env"`
	Notes    []string           `json:"notes,omitempty"`
	Emulator []string           `json:"emulator,omitempty"`
	// CMakeCache are the cache pins of the generated toolchain file (K=V).
	CMakeCache []string `json:"cmake_cache,omitempty"`
}

// PatchRef is a selected patch.
type PatchRef struct {
	ID        string `json:"id"`
	Component string `json:"component"`
	SHA256    string `json:"sha256"`
	Why       string `json:"why"`
}

// Step is one unit of work with its cache key. Besides its command and
// needs, a step reads what its kind's inputs say (see Kind).
type Step struct {
	ID      string     `json:"id"`
	Kind    Kind       `json:"kind"`
	Needs   []string   `json:"needs,omitempty"`
	Phase   string     `json:"phase,omitempty"` // toolchain flag phase
	Command []string   `json:"command,omitempty"`
	Env     []string   `json:"env,omitempty"`
	Inputs  StepInputs `json:"inputs,omitzero"`
	Outputs []string   `json:"outputs,omitempty"`
	Key     string     `json:"key"`
}

// Step returns the step with id, or nil.
func (p *Plan) Step(id string) *Step {
	for i := range p.Steps {
		if p.Steps[i].ID == id {
			return &p.Steps[i]
		}
	}
	return nil
}

// JSON is the plan's canonical encoding.
func (p *Plan) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// computeKeys fills every step's key: sha256 over the step's own definition,
// the toolchain identity and flags of its phase, and the keys of its needs.
func (p *Plan) computeKeys() error {
	keys := map[string]string{}
	for i := range p.Steps {
		s := &p.Steps[i]
		var needKeys []string
		for _, n := range s.Needs {
			k, ok := keys[n]
			if !ok {
				return fmt.Errorf("step %s needs %s, which is not planned before it", s.ID, n)
			}
			needKeys = append(needKeys, n+"="+k)
		}
		material := struct {
			Schema   int                 `json:"schema"`
			ID       string              `json:"id"`
			Kind     Kind                `json:"kind"`
			Phase    string              `json:"phase"`
			Command  []string            `json:"command"`
			Env      []string            `json:"env"`
			Inputs   StepInputs          `json:"inputs"`
			Outputs  []string            `json:"outputs"`
			Needs    []string            `json:"needs"`
			Compiler *toolchain.Identity `json:"compiler,omitempty"`
			Flags    []string            `json:"flags,omitempty"`
			Cache    []string            `json:"cmake_cache,omitempty"`
			CrossEnv string              `json:"cross_env,omitempty"`
			Sysroot  string              `json:"sysroot,omitempty"`
		}{Schema, s.ID, s.Kind, s.Phase, s.Command, s.Env, s.Inputs, s.Outputs, needKeys, nil, nil, nil, "", ""}
		if s.Phase != "" || s.Kind == KindThirdparty || s.Kind == KindBuild {
			id := p.Toolchain.Compiler
			id.Path = "" // where it is installed does not change what it makes
			material.Compiler = &id
			material.Flags = p.Phases[s.Phase]
			material.Cache = p.Toolchain.CMakeCache
			material.CrossEnv = toolchain.CrossEnvVersion
			if sr := p.Cell.Sysroot; sr != nil {
				material.Sysroot = sr.Key
			} else {
				material.Sysroot = "waived: " + p.Cell.SysrootWaiver
			}
			material.Env = append(append([]string{}, p.Toolchain.Env...), s.Env...)
		}
		b, err := json.Marshal(material)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		s.Key = hex.EncodeToString(sum[:])
		keys[s.ID] = s.Key
	}
	return nil
}

func sortedEnv(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// componentOf maps a package to the patch component names it answers to: the
// lower-case entry (bitshuffle) and the name part of its source directory
// (vectorscan for HYPERSCAN on aarch64).
func componentsOf(p source.Package) []string {
	out := []string{strings.ToLower(p.Entry)}
	base := p.Source
	if base == "" {
		base = p.Name
	}
	if i := strings.Index(base, "-"+p.Version); i > 0 {
		if alias := strings.ToLower(base[:i]); alias != out[0] {
			out = append(out, alias)
		}
	}
	return out
}

// TreeComponent is the component name of patches on the tree itself.
const TreeComponent = "doris"

// CellInfoOf is what a build record says about its cell.
func CellInfoOf(c matrix.Cell, version string) CellInfo { return cellInfo(c, version) }

func cellInfo(c matrix.Cell, version string) CellInfo {
	return CellInfo{
		Doris: version, Series: c.Doris.Series, Target: c.Target.Name, CPU: c.CPU.Name, OS: c.OS.ID, ISA: c.ISA.Name,
		Glibc: c.OS.Glibc, PageSize: c.PageSize(), Qemu: c.Qemu.Name, March: c.Target.March, Enabled: c.Enabled,
		Allowed: c.Allowed, PGO: c.Target.PGO, OpenSSL: c.Target.OpenSSL, BaseImage: c.Target.BaseImage,
		Required: c.Target.Patches, Description: c.Target.Description,
	}
}

// Slice asks for a BE built part way: configured only, or then the named
// build targets (libraries, or object files relative to CMake's build
// directory).
type Slice struct {
	Targets []string
}

// SliceInfo is a plan's BE slice.
type SliceInfo struct {
	Step          string   `json:"step"`
	Dir           string   `json:"dir"`
	ConfigureOnly bool     `json:"configure_only,omitempty"`
	Targets       []string `json:"targets,omitempty"`
}

// PGONoProfile is CellInfo.PGONone for a target that uses PGO built with
// no profile and no training workload.
const PGONoProfile = "no profile"
