package scan

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/flagrec"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

// Policy is what a target requires of its build. It comes from matrix.yaml.
type Policy struct {
	Target   string `json:"target"`
	ISA      string `json:"isa"`
	Machine  int    `json:"elf_machine"`
	ELFClass int    `json:"elf_class,omitempty"` // 32 or 64; 0: not checked
	ELFData  string `json:"elf_data,omitempty"`  // little or big; "": not checked
	// LLVMArch are the architecture names of the ISA's LLVM triples, and
	// LLVMOS the OS part they must have: LTO objects for another target are
	// foreign code. None: bitcode's triple is not checked.
	LLVMArch   []string `json:"llvm_arch,omitempty"`
	LLVMOS     string   `json:"llvm_os,omitempty"`
	CPU        string   `json:"cpu"`
	Allowed    []string `json:"allowed_extensions"`
	OS         string   `json:"os"`
	GlibcMax   string   `json:"glibc_max"`
	GlibcxxMax string   `json:"glibcxx_max,omitempty"`
	PageSize   int      `json:"page_size"`
	OpenSSL    string   `json:"openssl"`
	// Flags is what the target's objects must be compiled for (the flag
	// read-back); RequireFlags makes its warnings violations.
	Flags        *flagrec.Expect `json:"flags,omitempty"`
	RequireFlags bool            `json:"require_target_flags,omitempty"`
	// DeploymentChecks are the kinds of finding that judge a file as the
	// target OS loads and runs it (matrix.yaml scan.deployment_checks):
	// they apply to the files that ship, every other kind to every file.
	DeploymentChecks []string `json:"deployment_checks,omitempty"`
	// Ships are globs of the paths, as the report names them, that ship
	// for deployment (a third-party-only build's: the recipe's
	// ships.thirdparty; dorisarm scan --ship); none: every file ships.
	Ships      []string `json:"ships,omitempty"`
	allowed    map[string]bool
	deployOnly map[string]bool
	// origins and keepDigests are the scan's Options.Origins and
	// Options.Digests.
	origins     *Origins
	keepDigests bool
}

// Scopes a file is judged in (File.Scope).
const (
	// ScopeDeployment: the file ships; every check applies.
	ScopeDeployment = "deployment"
	// ScopeNotShipped: a linked file the build makes and does not ship (a
	// third-party build tool, a library the BE does not take): the
	// deployment checks do not apply.
	ScopeNotShipped = "not-shipped"
	// ScopeObject: a relocatable object (an archive member, a .o). It has
	// no loader, glibc needs or page alignment of its own: those are
	// judged in what it is linked into.
	ScopeObject = "object"
)

// deployable are the kinds matrix.yaml may make deployment checks: what a
// linked image needs of the OS it runs on. Foreign code and instructions
// the CPU lacks are errors wherever they are.
var deployable = []string{KindGlibc, KindGlibcxx, KindOpenSSLStatic, KindOpenSSLShared, KindPageSize}

// PolicyFor builds the policy of a matrix target.
func PolicyFor(m *matrix.Matrix, target string) (*Policy, error) {
	// The series of a cell does not change what the binary may contain.
	c, err := m.Platform(target)
	if err != nil {
		return nil, err
	}
	p := &Policy{Target: c.Target.Name, ISA: c.ISA.Name, Machine: c.ISA.ELFMachine, ELFClass: c.ISA.ELFClass, ELFData: c.ISA.ELFData,
		LLVMArch: c.ISA.LLVMArch, LLVMOS: c.ISA.OCI.OS, CPU: c.CPU.Name, Allowed: c.Allowed,
		OS: c.OS.ID, GlibcMax: c.OS.Glibc, GlibcxxMax: c.OS.Glibcxx, PageSize: c.PageSize(), OpenSSL: c.Target.OpenSSL}
	if p.Flags, err = flagrec.ExpectFor(m, c); err != nil {
		return nil, err
	}
	for _, k := range m.Scan.DeploymentChecks {
		if !slices.Contains(deployable, k) {
			return nil, datafile.Errorf(m.Scan.Keys.At("deployment_checks", m.Scan.Pos), "scan.deployment_checks: %q cannot be limited to what ships (only %s can: foreign code and instructions the CPU lacks are errors in every file)",
				k, strings.Join(deployable, ", "))
		}
	}
	p.DeploymentChecks = slices.Clone(m.Scan.DeploymentChecks)
	p.init()
	return p, nil
}

func (p *Policy) init() {
	p.allowed = map[string]bool{}
	for _, a := range p.Allowed {
		p.allowed[a] = true
	}
	sort.Strings(p.Allowed)
	p.deployOnly = map[string]bool{}
	for _, k := range p.DeploymentChecks {
		p.deployOnly[k] = true
	}
}

// WithShips is the policy for a build that ships only the files matching
// ships (globs of the paths as the report names them, as in allow files;
// a glob that matches a directory, an archive or a jar ships what is in
// it): the deployment checks judge those files alone. nil ships: the
// policy unchanged, every file ships.
func (p *Policy) WithShips(ships []string) (*Policy, error) {
	if len(ships) == 0 {
		return p, nil
	}
	for _, g := range ships {
		if _, err := path.Match(g, ""); err != nil || g == "" || path.IsAbs(g) || g != path.Clean(g) {
			return nil, fmt.Errorf("ships %q: not a glob of paths in the scanned tree; write it as the scan report names files, e.g. thirdparty/installed/lib64/openssl-shared or be/lib/*.so", g)
		}
	}
	q := *p
	q.Ships = slices.Clone(ships)
	return &q, nil
}

// WithShipsUnder is WithShips for a scan whose inputs are the files of the
// scanned tree at dir, named by their paths (a package's install checked
// in the work tree before it is collected): each glob is taken below dir.
func (p *Policy) WithShipsUnder(dir string, ships []string) (*Policy, error) {
	q, err := p.WithShips(ships)
	if err != nil || len(ships) == 0 {
		return q, err
	}
	for i, g := range q.Ships {
		q.Ships[i] = path.Join(filepath.ToSlash(dir), g)
	}
	return q, nil
}

// scopeOf is the scope a file of the report (name, and its ELF type) is
// judged in. Without a policy, or when no check is a deployment check,
// every linked file is judged as deployed.
func (p *Policy) scopeOf(name, typ string) string {
	switch {
	case typ == "rel":
		return ScopeObject
	case p == nil || len(p.deployOnly) == 0 || p.ships(name):
		return ScopeDeployment
	}
	return ScopeNotShipped
}

// ships says whether the file name ships: with no Ships every file does;
// else one of them matches name or a leading part of it that ends before
// a "/", "!" or "(" (a directory, a jar or an archive holding it).
func (p *Policy) ships(name string) bool {
	if len(p.Ships) == 0 {
		return true
	}
	for _, g := range p.Ships {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
		for i := range len(name) {
			if c := name[i]; c != '/' && c != '!' && c != '(' {
				continue
			}
			if ok, _ := path.Match(g, name[:i]); ok {
				return true
			}
		}
	}
	return false
}

// Judges reports whether findings of kind apply to a file judged in scope.
func (p *Policy) Judges(kind, scope string) bool {
	return p == nil || scope == ScopeDeployment || !p.deployOnly[kind]
}

// NativeTriple says whether an LLVM target triple (arch-vendor-os[-env]
// or arch-os[-env]) is for this ISA and OS; true when the policy names no
// LLVM architectures.
func (p *Policy) NativeTriple(triple string) bool {
	if len(p.LLVMArch) == 0 {
		return true
	}
	parts := strings.Split(triple, "-")
	return slices.Contains(p.LLVMArch, parts[0]) && (p.LLVMOS == "" || slices.Contains(parts[1:], p.LLVMOS))
}

// Allows reports whether the target CPU has the extension.
func (p *Policy) Allows(ext string) bool { return p.allowed[ext] }

func (p *Policy) String() string {
	return fmt.Sprintf("%s (%s, cpu %s, os %s: glibc <= %s, %d KiB pages, openssl %s)", p.Target, p.ISA, p.CPU, p.OS, p.GlibcMax, p.PageSize/1024, p.OpenSSL)
}
