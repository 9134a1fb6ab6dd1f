package scan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

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
	allowed      map[string]bool
}

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
	p.init()
	return p, nil
}

func (p *Policy) init() {
	p.allowed = map[string]bool{}
	for _, a := range p.Allowed {
		p.allowed[a] = true
	}
	sort.Strings(p.Allowed)
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
