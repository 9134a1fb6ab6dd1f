// Package scan proves a build fits its target: it walks directories, files
// and archives (tar, gzip, zstd, ar, zip/jar, OCI images), and checks every
// ELF for foreign architecture, ISA extensions the CPU lacks, glibc symbol
// versions newer than the OS has, OpenSSL linkage, and page alignment; jars
// for native libraries that miss the target platform. The glibc, OpenSSL and
// page-size checks judge what a build ships (Policy.Ships); foreign code
// and instructions the CPU lacks are errors in every file.
package scan

// Finding kinds (DESIGN.md).
const (
	KindForeignArch   = "foreign-arch"
	KindISA           = "isa-extension"
	KindGlibc         = "glibc-version"
	KindGlibcxx       = "glibcxx-version"
	KindOpenSSLStatic = "openssl-static"
	KindOpenSSLShared = "openssl-dynamic"
	KindJNIMissing    = "jni-missing-arch"
	KindPageSize      = "page-size"
	KindUnreadable    = "unreadable"
	// KindHeaders: the section headers disagree with the program headers
	// (what the loader runs); the scan followed the program headers.
	KindHeaders = "elf-headers"
	// KindLinkOutside: a symbolic link in a scanned directory that
	// resolves outside it; its target was not scanned (a note).
	KindLinkOutside = "link-outside"
)

// Severities.
const (
	SevError = "error" // a violation: the build does not fit its target
	SevInfo  = "info"  // worth knowing, not a violation (guarded code, other platforms in a jar)
	// SevWarning (flags.go): a violation only when the scan is asked to
	// require it (--require-target-flags).
)

// Report is the result of a scan.
type Report struct {
	Target   string     `json:"target,omitempty"`
	Policy   *Policy    `json:"policy,omitempty"`
	Inputs   []string   `json:"inputs"`
	Files    []File     `json:"files"`
	Findings []Finding  `json:"findings"`
	Allowed  []AllowUse `json:"allowed,omitempty"`
	Warnings []string   `json:"warnings,omitempty"`
	Summary  Summary    `json:"summary"`
	// Digests are the digests of every flag record read
	// (flagrec.Record.Digest), sorted, each once: with Options.Digests.
	Digests []string `json:"-"`
}

// File is one ELF (or other executable format) found in the inputs.
type File struct {
	Path      string         `json:"path"`
	Format    string         `json:"format"` // elf, pe, macho
	Machine   string         `json:"machine"`
	Type      string         `json:"type,omitempty"`  // exec, dyn, rel
	Scope     string         `json:"scope,omitempty"` // how it was judged: deployment, not-shipped, object (ScopeDeployment)
	Size      int64          `json:"size"`
	TextBytes int64          `json:"text_bytes,omitempty"`
	Features  map[string]int `json:"features,omitempty"` // extension → instructions (guarded ones included)
	Guarded   map[string]int `json:"guarded,omitempty"`  // of which behind a run-time check
	Hints     map[string]int `json:"hints,omitempty"`    // HINT-space encodings (NOPs without the feature)
	GlibcMax  string         `json:"glibc_max,omitempty"`
	Glibcxx   string         `json:"glibcxx_max,omitempty"`
	Needed    []string       `json:"needed,omitempty"`
	Soname    string         `json:"soname,omitempty"`
	PageAlign uint64         `json:"page_align,omitempty"`
	OpenSSL   string         `json:"openssl,omitempty"` // dynamic, static, or "" when it does not use OpenSSL
	// Flags is what the object records it was compiled with, judged
	// against the target (with a policy).
	Flags *FileFlags `json:"flags,omitempty"`
}

// Finding is one thing the scan found.
type Finding struct {
	Kind     string `json:"kind"`
	Severity string `json:"severity"`
	Path     string `json:"path"`
	Detail   string `json:"detail"`
	Feature  string `json:"feature,omitempty"`
	Function string `json:"function,omitempty"`
	Address  string `json:"address,omitempty"`
	Count    int    `json:"count,omitempty"`
	Guarded  bool   `json:"guarded,omitempty"`
	// Allowed names the allow-file entry that waived this violation.
	Allowed string `json:"allowed,omitempty"`
	// Origin is the build that compiled the records a flag finding judges
	// (with Options.Origins): OriginTree or a third-party package.
	Origin string `json:"origin,omitempty"`
}

// Violation reports whether the finding fails the scan.
func (f Finding) Violation() bool { return f.Severity == SevError && f.Allowed == "" }

// Summary counts the scan.
type Summary struct {
	Files      int   `json:"files"`
	ELF        int   `json:"elf"`
	Bytes      int64 `json:"bytes"`
	TextBytes  int64 `json:"text_bytes"`
	Violations int   `json:"violations"`
	Allowed    int   `json:"allowed"`
	// AllowedByKind counts the waived findings by kind.
	AllowedByKind map[string]int `json:"allowed_by_kind,omitempty"`
	Unreadable    int            `json:"unreadable"`
	// LinksOutside counts the links that resolve outside the scanned
	// directories, whose targets were not scanned.
	LinksOutside int            `json:"links_outside,omitempty"`
	ByKind       map[string]int `json:"by_kind,omitempty"`
	Machines     map[string]int `json:"machines,omitempty"`
	Features     map[string]int `json:"features,omitempty"`    // extension → instructions, guarded and waived ones included
	Guarded      map[string]int `json:"guarded,omitempty"`     // of which behind a run-time check
	Waived       map[string]int `json:"waived,omitempty"`      // of which outside the CPU, waived by the allow file
	GlibcMax     string         `json:"glibc_max,omitempty"`   // the highest need of the files the glibc check judges (that ship)
	GlibcxxMax   string         `json:"glibcxx_max,omitempty"` // the same for GLIBCXX
	Scopes       map[string]int `json:"scopes,omitempty"`      // files by the scope they were judged in
	// Warnings counts the findings of warning severity not waived, by kind.
	Warned map[string]int `json:"warned,omitempty"`
	// Flags is the flag read-back (with a policy).
	Flags *FlagSummary `json:"flags,omitempty"`
	Clean bool         `json:"clean"`
}
