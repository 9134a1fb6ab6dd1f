package source

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// VersionFrom says where an unpacked package declares its version when the
// build system's usual places do not (OpenSSL's opensslv.h): a file in the
// source and a regexp whose groups, joined with dots, are the version
// (Abseil declares 20230125.3 as ABSL_LTS_RELEASE_VERSION 20230125 and
// ABSL_LTS_RELEASE_PATCH_LEVEL 3).
type VersionFrom struct {
	File  string `json:"file"`
	Match string `json:"match"`
}

// declarations are the places build systems declare a package's version,
// tried in order: the first that names a literal version wins.
var declarations = sync.OnceValue(func() []VersionFrom {
	return []VersionFrom{
		{"CMakeLists.txt", `(?is)\bproject\s*\([^)]*?\bVERSION\s+"?([0-9][0-9A-Za-z.\-]*)`},
		{"configure.ac", `AC_INIT\(\s*\[?[^,\]]*\]?\s*,\s*\[?([0-9][0-9A-Za-z.\-]*)`},
		{"configure.in", `AC_INIT\(\s*\[?[^,\]]*\]?\s*,\s*\[?([0-9][0-9A-Za-z.\-]*)`},
		{"configure", `(?m)^PACKAGE_VERSION='([0-9][^']*)'`},
		{"meson.build", `(?s)\bproject\s*\([^)]*?\bversion\s*:\s*'([0-9][^']*)'`},
	}
})

// maxDeclaration bounds what is read of one file to find a version.
const maxDeclaration = 1 << 20

// DeclaredVersion is the version an unpacked source declares, and the file
// that says so: extra first (when set), then the build system's usual
// places. "" when none names a literal version (a variable, no file).
func DeclaredVersion(dir string, extra *VersionFrom) (version, file string) {
	cands := declarations()
	if extra != nil {
		cands = append([]VersionFrom{*extra}, cands...)
	}
	for _, c := range cands {
		p := filepath.Join(dir, filepath.FromSlash(c.File))
		if rel, err := filepath.Rel(dir, p); err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, maxDeclaration))
		f.Close()
		if err != nil {
			continue
		}
		re, err := regexp.Compile(c.Match)
		if err != nil {
			continue
		}
		m := re.FindSubmatch(b)
		if len(m) < 2 || len(m[1]) == 0 {
			continue
		}
		var parts []string
		for _, g := range m[1:] {
			if len(g) > 0 {
				parts = append(parts, string(g))
			}
		}
		v := strings.TrimRight(strings.Join(parts, "."), ".-")
		if placeholder(v) {
			continue // 0.0.0 names no release (brotli 1.0.9's configure.ac): look further
		}
		return v, c.File
	}
	return "", ""
}

// placeholder says whether a declared version is all zeros.
func placeholder(v string) bool {
	return strings.Trim(v, "0.") == ""
}

// SameVersion reports whether a declared version is the one a tree names,
// allowing for the spellings of one release: a "-stable" label, trailing ".0" parts
// (leveldb's CMake says 1.23.0 for vars.sh's 1.23), a leading "v", and a
// scheme prefix (protobuf's configure says 3.21.11 for its release 21.11).
func SameVersion(declared, named string) bool {
	label := regexp.MustCompile(`-[a-z]+$`) // "-stable": a label, not another release ("-rc1" is)
	norm := func(v string) string {
		v = label.ReplaceAllString(strings.TrimPrefix(strings.ToLower(v), "v"), "")
		for strings.HasSuffix(v, ".0") && strings.Count(v, ".") > 1 {
			v = strings.TrimSuffix(v, ".0")
		}
		return v
	}
	d, n := norm(declared), norm(named)
	return d == n || strings.HasSuffix(d, "."+n) || strings.HasSuffix(n, "."+d)
}
