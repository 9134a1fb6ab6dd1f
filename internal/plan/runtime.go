package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path"

	goversion "github.com/hashicorp/go-version"

	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/toolchain"
)

// RuntimeInputs are what a C++ runtime is made from: its pinned source,
// the script that builds it, the sysroot capped at the runtime's glibc
// (by key) and the compiler that builds it (by identity). Nothing of the
// cell's target is in them: every cell and target of one ISA shares the
// step's result.
type RuntimeInputs struct {
	Name      string        `json:"name"`
	Libstdcxx string        `json:"libstdcxx"`
	Glibc     string        `json:"glibc"`
	Triple    string        `json:"triple"`
	Source    RuntimeSource `json:"source"`
	// Script is the build script by its name in the matrix's directory
	// and its content.
	Script       string          `json:"script"`
	ScriptSHA256 string          `json:"script_sha256"`
	Sysroot      SysrootInputs   `json:"sysroot"`
	Compiler     ToolchainInputs `json:"compiler"`
}

// RuntimeSource is the runtime's source archive: where it is fetched
// from, and what vouches for it.
type RuntimeSource struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Archive is the source archive's file name.
func (s RuntimeSource) Archive() string { return path.Base(s.URL) }

// RuntimeBuild is what a build's runtime step needs of this machine
// besides the plan's inputs: the builder compiler's C driver, the script
// (a datafs name) and a way to make the capped sysroot it builds against.
type RuntimeBuild struct {
	CC          string
	Script      string
	MakeSysroot func(context.Context) (*toolchain.Sysroot, error)
}

// runtimeFor is the C++ runtime a cell's builds use: the one its
// sysroot carries (matrix sysroots.<name>.runtime), when the recipe needs
// a newer C++ library than the sysroot's own and the runtime's is new
// enough. nil when none is needed or none would do (the plan then says
// why it cannot build).
func runtimeFor(ctx context.Context, m *matrix.Matrix, r *recipe.Recipe, cell matrix.Cell, sr *toolchain.Sysroot, req Request) (*toolchain.Runtime, *RuntimeInputs, *RuntimeBuild, error) {
	if sr == nil || r.LibstdcxxMin == "" {
		return nil, nil, nil, nil
	}
	ms := m.Sysroots[sr.Name]
	if ms == nil || ms.Runtime == "" || !olderGCC(ms.Libstdcxx, r.LibstdcxxMin) {
		return nil, nil, nil, nil
	}
	mr := m.Runtimes[ms.Runtime]
	if mr == nil || olderGCC(mr.Libstdcxx, r.LibstdcxxMin) {
		return nil, nil, nil, nil
	}
	// The sysroot capped at the runtime's glibc, not the cell's OS's: one
	// runtime serves every OS of the ISA.
	rsr, err := sysrootKeyAt(ctx, m, cell, req.SysrootCache, mr.Glibc, req.Registry)
	if err != nil {
		return nil, nil, nil, err
	}
	builder, err := toolchain.Probe(m, cell, mr.Compiler, toolchain.Options{Memo: memoDir(req.SysrootCache)})
	if err != nil {
		return nil, nil, nil, fault.Gatef("target %s: the C++ runtime %s (runtimes.%s in %s) is built with %s, which is not usable here: %v",
			cell.Target.Name, mr.Name, mr.Name, m.File, mr.Compiler, err)
	}
	script := datafs.Join(datafs.Dir(m.File), mr.Script)
	sum, err := datafs.FileDigest(script)
	if err != nil {
		return nil, nil, nil, fault.Inputf("runtime %s: script %s: %w (runtimes.%s.script in %s)", mr.Name, script, err, mr.Name, m.File)
	}
	id := builder.Identity
	in := &RuntimeInputs{
		Name: mr.Name, Libstdcxx: mr.Libstdcxx, Glibc: mr.Glibc, Triple: cell.ISA.Triple,
		Source: RuntimeSource{URL: mr.Source.URL, SHA256: mr.Source.SHA256, Size: mr.Source.Size},
		Script: mr.Script, ScriptSHA256: sum,
		Sysroot: SysrootInputs{Name: rsr.Name, Key: rsr.Key},
		// By what makes it, not where it is: the driver's and its tools'
		// digests and the compiler proper's parts.
		Compiler: ToolchainInputs{Compiler: id.Name, Digest: id.Digest, Parts: mergedParts(id)},
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, nil, nil, err
	}
	sum256 := sha256.Sum256(b)
	cell2, cache, ro, glibc := cell, req.SysrootCache, req.Registry, mr.Glibc
	build := &RuntimeBuild{CC: builder.CC, Script: script, MakeSysroot: func(ctx context.Context) (*toolchain.Sysroot, error) {
		return sysrootAt(ctx, m, cell2, cache, glibc, ro)
	}}
	// Keyed by what it is made from, as the step is: the sysroot check
	// remembers verdicts by it.
	return &toolchain.Runtime{Name: mr.Name, Libstdcxx: mr.Libstdcxx, Glibc: mr.Glibc, Key: hex.EncodeToString(sum256[:])}, in, build, nil
}

// mergedParts are a compiler's parts and tools in one map, for a key.
func mergedParts(id toolchain.Identity) map[string]string {
	out := map[string]string{}
	for k, v := range id.Parts {
		out[k] = v
	}
	for k, v := range id.Tools {
		out["tool "+k] = v
	}
	return out
}

// olderGCC reports whether GCC release have is older than need; unknown
// or malformed releases are not (nothing is decided on them).
func olderGCC(have, need string) bool {
	h, err1 := goversion.NewVersion(have)
	n, err2 := goversion.NewVersion(need)
	return err1 == nil && err2 == nil && h.LessThan(n)
}

// runtimeStepID is the ID of the step that makes runtime name.
func runtimeStepID(name string) string { return "runtime:" + name }

// RuntimeStepID is the ID of the step that makes runtime name.
func RuntimeStepID(name string) string { return runtimeStepID(name) }
