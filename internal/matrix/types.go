// Package matrix loads matrix.yaml, the data file that holds every fact about
// ISAs, CPUs, target OSes, compilers, Doris versions and release targets,
// validates it, and expands it into cells (a Doris series × a target).
package matrix

import "github.com/dorisarm/dorisarm/internal/datafile"

// Matrix is the decoded and validated matrix.yaml.
type Matrix struct {
	Schema     int                    `yaml:"schema"`
	ISAs       map[string]*ISA        `yaml:"isas"`
	Extensions map[string]*Extension  `yaml:"extensions"`
	ArchLevels map[string]*ArchLevel  `yaml:"arch_levels"`
	QemuModels map[string]*QemuModel  `yaml:"qemu_models"`
	CPUs       map[string]*CPU        `yaml:"cpus"`
	OSes       map[string]*OS         `yaml:"oses"`
	Compilers  map[string]*Compiler   `yaml:"compilers"`
	Doris      map[string]*DorisRange `yaml:"doris"`
	Targets    map[string]*Target     `yaml:"targets"`
	Sysroots   map[string]*Sysroot    `yaml:"sysroots"`
	// Runtimes are C++ runtimes built for an old glibc (runtimes:).
	Runtimes map[string]*Runtime `yaml:"runtimes"`
	// Scan says which of the scanner's checks judge only what a build
	// ships for deployment.
	Scan ScanRules `yaml:"scan"`

	// File is the path the matrix was read from; Digest the sha256 of its bytes.
	File   string `yaml:"-"`
	Digest string `yaml:"-"`
	Pos    datafile.Pos
	Keys   datafile.Keys
}

// ScanRules divide the scanner's checks between every file and the files
// a build ships for deployment.
type ScanRules struct {
	// DeploymentChecks are finding kinds that judge a file as the target
	// OS loads and runs it (its glibc, its libstdc++, its page size, the
	// target's OpenSSL linkage): they apply to the files a build ships,
	// not to the build tools and libraries it makes and does not ship.
	// Every other check (foreign code, instructions the CPU lacks) applies
	// to every file. The scanner checks the names (scan.PolicyFor).
	DeploymentChecks []string `yaml:"deployment_checks"`
	Pos              datafile.Pos
	Keys             datafile.Keys
}

// ISA is an instruction-set architecture we build for.
type ISA struct {
	Name           string      `yaml:"-"`
	Triple         string      `yaml:"triple"`
	Sysroot        string      `yaml:"sysroot"`
	Qemu           string      `yaml:"qemu"`
	ELFMachine     int         `yaml:"elf_machine"`
	OCI            OCIPlatform `yaml:"oci"`
	CMakeProcessor string      `yaml:"cmake_processor"`
	// GNUType is the canonical GNU system type (config.sub output) autoconf
	// uses for this ISA as --host or --build, e.g. aarch64-unknown-linux-gnu.
	GNUType string `yaml:"gnu_type"`
	// PageSize fixes the page size on ISAs where it does not vary by kernel
	// (4 KiB on x86-64); 0 means the OS decides (aarch64: 4, 16 or 64 KiB).
	PageSize int `yaml:"page_size"`
	// IndexTarget is the target whose build stands for this platform in a
	// release's multi-arch image index (doris-be:<version>); optional.
	IndexTarget string `yaml:"index_target"`
	// ELFClass (32 or 64) and ELFData (little or big) are the ELF class and
	// byte order of the ABI the triple names (aarch64-linux-gnu: LP64,
	// little-endian); the loader rejects objects of another. Optional: when
	// absent the scanner does not check them.
	ELFClass int    `yaml:"elf_class"`
	ELFData  string `yaml:"elf_data"`
	// LLVMArch are the names LLVM gives this architecture in a target
	// triple (aarch64, arm64): an LTO object's triple must start with one
	// and name OCI.OS as its OS. Optional: when absent the scanner does not
	// check bitcode's triple.
	LLVMArch []string `yaml:"llvm_arch"`
	Pos      datafile.Pos
	Keys     datafile.Keys
}

// OCIPlatform is the platform an image of this ISA declares.
type OCIPlatform struct {
	OS           string `yaml:"os" json:"os"`
	Architecture string `yaml:"architecture" json:"architecture"`
	Variant      string `yaml:"variant" json:"variant,omitempty"`
}

// Extension is one optional ISA extension.
type Extension struct {
	Name        string   `yaml:"-"`
	ISA         string   `yaml:"isa"`
	March       string   `yaml:"march"`
	Implies     []string `yaml:"implies"`
	Description string   `yaml:"description"`
	Pos         datafile.Pos
	Keys        datafile.Keys
}

// ArchLevel is an architecture level usable as the base of -march.
type ArchLevel struct {
	Name    string   `yaml:"-"`
	ISA     string   `yaml:"isa"`
	Extends string   `yaml:"extends"`
	Adds    []string `yaml:"adds"`
	Crypto  []string `yaml:"crypto"`
	Pos     datafile.Pos
	Keys    datafile.Keys
}

// QemuModel is a qemu-user CPU model and the extensions it implements.
type QemuModel struct {
	Name       string   `yaml:"-"`
	ISA        string   `yaml:"isa"`
	Extensions []string `yaml:"extensions"`
	Pos        datafile.Pos
	Keys       datafile.Keys
}

// CPU is a CPU model a target runs on.
type CPU struct {
	Name           string               `yaml:"-"`
	ISA            string               `yaml:"isa"`
	Description    string               `yaml:"description"`
	Arch           string               `yaml:"arch"`
	Extensions     []string             `yaml:"extensions"`
	Mcpu           map[string]*MCPUName `yaml:"mcpu"`
	Qemu           string               `yaml:"qemu"`
	OpenBLASTarget string               `yaml:"openblas_target"`
	Pos            datafile.Pos
	Keys           datafile.Keys
}

// MCPUName is a compiler's spelling of a CPU and the compiler versions that know it.
type MCPUName struct {
	Name  string `yaml:"name"`
	Since string `yaml:"since"`
	Pos   datafile.Pos
	Keys  datafile.Keys
}

// OS is a target operating system.
type OS struct {
	ID    string `yaml:"-"`
	Name  string `yaml:"name"`
	Glibc string `yaml:"glibc"`
	// Glibcxx is the newest GLIBCXX_ symbol version the OS's libstdc++ has
	// (only binaries that link libstdc++ dynamically need it).
	Glibcxx  string `yaml:"glibcxx"`
	PageSize int    `yaml:"page_size"`
	// Sysroot names, per ISA, the sysroot builds for this OS link against
	// (sysroots.*); its glibc is capped at the OS's when it is newer.
	Sysroot map[string]string `yaml:"sysroot"`
	Pos     datafile.Pos
	Keys    datafile.Keys
}

// Sysroot is where a target OS's headers and libraries come from: Debian
// suite packages for an architecture, or an OCI image (by digest).
type Sysroot struct {
	Name        string         `yaml:"-"`
	Description string         `yaml:"description"`
	Triple      string         `yaml:"triple"`
	Debian      *SysrootDebian `yaml:"debian"`
	Image       string         `yaml:"image"`
	// Digest, when set, pins the content of the unpacked tree (before any
	// glibc cap): a mirror or image that gives other bytes is refused.
	Digest string `yaml:"digest"`
	// Libstdcxx is the GCC release whose C++ library (headers and
	// libstdc++.a) the sysroot provides, e.g. "10"; "" when unknown.
	Libstdcxx string `yaml:"libstdcxx"`
	// Runtime names the C++ runtime (runtimes.<name>) builds against the
	// sysroot compile and link with when a recipe needs a newer C++
	// library than the sysroot's own (libstdcxx_min); "" for none.
	Runtime string `yaml:"runtime"`
	Pos     datafile.Pos
	Keys    datafile.Keys
}

// Runtime is a newer GCC's C++ runtime (libstdc++, libsupc++, libgcc,
// libgcc_eh: static archives and headers) built from a pinned source
// against a sysroot capped at an old glibc, so that programs linking it
// statically (-static-libstdc++ -static-libgcc) start on every OS with
// that glibc or newer: what Doris's ldb_toolchain ships for CentOS 7.
type Runtime struct {
	Name        string `yaml:"-"`
	Description string `yaml:"description"`
	// Libstdcxx is the GCC release whose C++ library the runtime is ("12");
	// a recipe's libstdcxx_min is checked against it.
	Libstdcxx string `yaml:"libstdcxx"`
	// Compiler is the compiler (compilers.<name>, GCC dialect) that builds
	// it for each ISA; its identity is part of the runtime's key.
	Compiler string `yaml:"compiler"`
	// Glibc is the glibc the runtime is built against (the sysroot capped
	// there): it serves every OS with this glibc or newer, and one runtime
	// per ISA serves them all.
	Glibc string `yaml:"glibc"`
	// Source is the pinned source archive.
	Source RuntimeSource `yaml:"source"`
	// Script builds it (a file beside matrix.yaml), run in a step's
	// sandbox; see the script's header for its interface.
	Script string `yaml:"script"`
	Pos    datafile.Pos
	Keys   datafile.Keys
}

// RuntimeSource is where a runtime's source comes from, pinned by digest
// and size.
type RuntimeSource struct {
	URL    string `yaml:"url"`
	SHA256 string `yaml:"sha256"`
	Size   int64  `yaml:"size"`
	Pos    datafile.Pos
	Keys   datafile.Keys
}

// SysrootDebian are Debian packages of one suite and architecture.
type SysrootDebian struct {
	Suite    string   `yaml:"suite"`
	Arch     string   `yaml:"arch"`
	Packages []string `yaml:"packages"`
	Mirror   string   `yaml:"mirror"`
	Pos      datafile.Pos
	Keys     datafile.Keys
}

// Compiler is a C/C++ compiler family installation.
type Compiler struct {
	Name     string              `yaml:"-"`
	Dialect  string              `yaml:"dialect"`
	Version  string              `yaml:"version"`
	CC       string              `yaml:"cc"`
	CXX      string              `yaml:"cxx"`
	Home     string              `yaml:"home"`
	HomeEnv  string              `yaml:"home_env"`
	Cross    string              `yaml:"cross"`
	Tools    map[string]string   `yaml:"tools"`
	Packages map[string][]string `yaml:"packages"`
	// Identity is what, beyond the driver binary, makes the compiler.
	Identity CompilerIdentity `yaml:"identity"`
	Pos      datafile.Pos
	Keys     datafile.Keys
}

// CompilerIdentity names the parts of a compiler outside its driver whose
// bytes decide what it makes: they join the driver's digest in every
// compile step's cache key and in the key its --version is remembered by.
type CompilerIdentity struct {
	// Programs the driver runs, found by asking it (-print-prog-name=NAME):
	// GCC's cc1, cc1plus, lto1.
	Programs []string `yaml:"programs"`
	// Libs are globs over the names of the shared libraries (DT_NEEDED,
	// transitively) the driver and those programs load: clang's
	// libclang-cpp and libLLVM, GCC's GMP, MPFR, MPC and ISL. The C
	// library and the C++ runtime the compiler itself runs on are left out
	// on purpose: a security update of libc does not change the code a
	// compiler makes.
	Libs []string `yaml:"libs"`
}

// DorisRange is a Doris release series.
type DorisRange struct {
	Series   string `yaml:"-"`
	Versions string `yaml:"versions"`
	Branch   string `yaml:"branch"`
	Pos      datafile.Pos
	Keys     datafile.Keys
}

// Target is a release target: what one build is for.
type Target struct {
	Name        string            `yaml:"-"`
	Description string            `yaml:"description"`
	CPU         string            `yaml:"cpu"`
	OS          string            `yaml:"os"`
	Compilers   []string          `yaml:"compilers"`
	Tune        string            `yaml:"tune"`
	March       string            `yaml:"march"`
	Mtune       bool              `yaml:"mtune"`
	PGO         bool              `yaml:"pgo"`
	LTO         map[string]string `yaml:"lto"`
	Doris       string            `yaml:"doris"`
	Patches     []string          `yaml:"patches"`
	OpenSSL     string            `yaml:"openssl"`
	BaseImage   string            `yaml:"base_image"`
	Pos         datafile.Pos
	Keys        datafile.Keys
}
