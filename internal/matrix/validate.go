package matrix

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

// Dialects are the compiler flag dialects dorisarm speaks, with the LTO modes
// each supports (GCC has no ThinLTO; Clang has no -flto=auto).
var Dialects = map[string][]string{
	"gcc":   {"auto", "full"},
	"clang": {"thin", "full"},
}

// OpenSSLPolicies are the values a target's openssl policy may take.
var OpenSSLPolicies = []string{"static", "dynamic", "any"}

type checker struct {
	m    *Matrix
	errs datafile.List
	// Parsed versions and constraints: the same few strings recur, and
	// go-version parses each with a regular expression.
	versions    map[string]versionOrErr
	constraints map[string]constraintsOrErr
}

type versionOrErr struct {
	v   *version.Version
	err error
}

type constraintsOrErr struct {
	cs  version.Constraints
	err error
}

func (c *checker) newVersion(s string) (*version.Version, error) {
	if r, ok := c.versions[s]; ok {
		return r.v, r.err
	}
	v, err := version.NewVersion(s)
	if c.versions == nil {
		c.versions = map[string]versionOrErr{}
	}
	c.versions[s] = versionOrErr{v, err}
	return v, err
}

func (c *checker) newConstraint(s string) (version.Constraints, error) {
	if r, ok := c.constraints[s]; ok {
		return r.cs, r.err
	}
	cs, err := version.NewConstraint(s)
	if c.constraints == nil {
		c.constraints = map[string]constraintsOrErr{}
	}
	c.constraints[s] = constraintsOrErr{cs, err}
	return cs, err
}

func (c *checker) fail(p datafile.Pos, format string, args ...any) {
	c.errs = append(c.errs, datafile.Errorf(p, format, args...))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *checker) constraint(p datafile.Pos, what, s string) version.Constraints {
	if s == "" {
		c.fail(p, "%s: a version constraint is required (e.g. \">= 12\")", what)
		return nil
	}
	cs, err := c.newConstraint(s)
	if err != nil {
		c.fail(p, "%s: bad version constraint %q: %v (go-version syntax, e.g. \">= 2.1, < 2.2\")", what, s, err)
		return nil
	}
	return cs
}

func (c *checker) extList(p datafile.Pos, what, isa string, names []string) {
	for _, n := range names {
		e, ok := c.m.Extensions[n]
		if !ok {
			c.fail(p, "%s: unknown extension %q (add it under extensions:)", what, n)
			continue
		}
		if isa != "" && e.ISA != isa {
			c.fail(p, "%s: extension %q is for %s, not %s", what, n, e.ISA, isa)
		}
	}
}

func (m *Matrix) validate() error {
	c := &checker{m: m}
	if m.Schema != 1 {
		c.fail(m.Keys.At("schema", m.Pos), "schema must be 1 (this dorisarm reads schema 1)")
	}
	for _, sec := range []struct {
		key string
		n   int
	}{{"isas", len(m.ISAs)}, {"extensions", len(m.Extensions)}, {"arch_levels", len(m.ArchLevels)},
		{"qemu_models", len(m.QemuModels)}, {"cpus", len(m.CPUs)}, {"oses", len(m.OSes)},
		{"compilers", len(m.Compilers)}, {"doris", len(m.Doris)}, {"targets", len(m.Targets)}} {
		if sec.n == 0 {
			c.fail(m.Keys.At(sec.key, m.Pos), "section %s: is missing or empty", sec.key)
		}
	}
	m.checkISA(c)
	m.checkLevels(c)
	for _, n := range slices.Sorted(maps.Keys(m.Compilers)) {
		m.checkCompiler(c, m.Compilers[n])
	}
	for _, n := range slices.Sorted(maps.Keys(m.CPUs)) {
		m.checkCPU(c, m.CPUs[n])
	}
	m.checkOSes(c)
	m.checkSysroots(c)
	c.runtimes()
	m.checkDoris(c)
	for _, n := range slices.Sorted(maps.Keys(m.Targets)) {
		m.checkTarget(c, m.Targets[n])
	}
	return c.errs.Err()
}

// checkISA checks the isas: triple, GNU type, ELF identity, LLVM names, OCI platform and index target.
func (m *Matrix) checkISA(c *checker) {
	for _, n := range slices.Sorted(maps.Keys(m.ISAs)) {
		isa := m.ISAs[n]
		if isa.Triple == "" {
			c.fail(isa.Pos, "isa %s: triple is required (e.g. aarch64-linux-gnu)", n)
		}
		if strings.Count(isa.GNUType, "-") < 2 {
			c.fail(isa.Keys.At("gnu_type", isa.Pos), "isa %s: gnu_type must be the canonical GNU system type autoconf uses (cpu-vendor-os, e.g. aarch64-unknown-linux-gnu)", n)
		}
		if isa.ELFMachine <= 0 {
			c.fail(isa.Keys.At("elf_machine", isa.Pos), "isa %s: elf_machine must be the ELF e_machine number (183 for aarch64)", n)
		}
		if isa.ELFClass != 0 && isa.ELFClass != 32 && isa.ELFClass != 64 {
			c.fail(isa.Keys.At("elf_class", isa.Pos), "isa %s: elf_class must be 32 or 64 (the ELF class of the ABI's objects: 64 for aarch64-linux-gnu)", n)
		}
		if isa.ELFData != "" && isa.ELFData != "little" && isa.ELFData != "big" {
			c.fail(isa.Keys.At("elf_data", isa.Pos), "isa %s: elf_data must be little or big (the byte order of the ABI's objects: little for aarch64-linux-gnu)", n)
		}
		for _, a := range isa.LLVMArch {
			if a == "" || strings.ContainsAny(a, "- \t") {
				c.fail(isa.Keys.At("llvm_arch", isa.Pos), "isa %s: llvm_arch %q is not an LLVM triple's architecture name (the part before the first '-', e.g. aarch64)", n, a)
			}
		}
		if isa.OCI.Architecture == "" {
			c.fail(isa.Keys.At("oci", isa.Pos), "isa %s: oci.architecture is required", n)
		}
		if t := isa.IndexTarget; t != "" {
			at := isa.Keys.At("index_target", isa.Pos)
			if tg, ok := m.Targets[t]; !ok {
				c.fail(at, "isa %s: index_target %q is not a target", n, t)
			} else if cpu, ok := m.CPUs[tg.CPU]; ok && cpu.ISA != n {
				c.fail(at, "isa %s: index_target %s builds for %s, not %s", n, t, cpu.ISA, n)
			}
		}
	}
}

// checkLevels checks the extensions, arch levels and qemu models: known ISAs and extensions, levels that extend their own ISA's.
func (m *Matrix) checkLevels(c *checker) {
	for _, n := range slices.Sorted(maps.Keys(m.Extensions)) {
		e := m.Extensions[n]
		m.knownISA(c, e.Keys.At("isa", e.Pos), "extension "+n, e.ISA)
		c.extList(e.Keys.At("implies", e.Pos), "extension "+n, e.ISA, e.Implies)
	}
	for _, n := range slices.Sorted(maps.Keys(m.ArchLevels)) {
		al := m.ArchLevels[n]
		m.knownISA(c, al.Keys.At("isa", al.Pos), "arch level "+n, al.ISA)
		if al.Extends != "" {
			parent, ok := m.ArchLevels[al.Extends]
			switch {
			case !ok:
				c.fail(al.Keys.At("extends", al.Pos), "arch level %s: extends unknown level %q", n, al.Extends)
			case parent.ISA != al.ISA:
				c.fail(al.Keys.At("extends", al.Pos), "arch level %s: extends %s, which is for another isa", n, al.Extends)
			}
		}
		c.extList(al.Keys.At("adds", al.Pos), "arch level "+n, al.ISA, al.Adds)
		c.extList(al.Keys.At("crypto", al.Pos), "arch level "+n, al.ISA, al.Crypto)
		if _, err := m.LevelExtensions(n); err != nil {
			c.fail(al.Pos, "arch level %s: %v", n, err)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(m.QemuModels)) {
		q := m.QemuModels[n]
		m.knownISA(c, q.Keys.At("isa", q.Pos), "qemu model "+n, q.ISA)
		c.extList(q.Keys.At("extensions", q.Pos), "qemu model "+n, q.ISA, q.Extensions)
	}
}

// checkOSes checks the target OSes: a name, a glibc version, a page size, sysroots for known ISAs.
func (m *Matrix) checkOSes(c *checker) {
	for _, n := range slices.Sorted(maps.Keys(m.OSes)) {
		o := m.OSes[n]
		if o.Name == "" {
			c.fail(o.Pos, "os %s: name is required", n)
		}
		if _, err := c.newVersion(o.Glibc); err != nil {
			c.fail(o.Keys.At("glibc", o.Pos), "os %s: glibc must be a version like \"2.28\", got %q", n, o.Glibc)
		}
		if o.PageSize < 4096 || o.PageSize&(o.PageSize-1) != 0 {
			c.fail(o.Keys.At("page_size", o.Pos), "os %s: page_size must be a power of two of at least 4096 bytes, got %d", n, o.PageSize)
		}
		for _, isa := range slices.Sorted(maps.Keys(o.Sysroot)) {
			at := o.Keys.At("sysroot", o.Pos)
			sr, ok := m.Sysroots[o.Sysroot[isa]]
			switch {
			case m.ISAs[isa] == nil:
				c.fail(at, "os %s: sysroot for unknown isa %q", n, isa)
			case !ok:
				c.fail(at, "os %s: sysroot %q for %s is not in sysroots (one of: %s)", n, o.Sysroot[isa], isa, strings.Join(slices.Sorted(maps.Keys(m.Sysroots)), ", "))
			case sr.Triple != m.ISAs[isa].Triple:
				c.fail(at, "os %s: sysroot %s is for %s, not %s (%s)", n, sr.Name, sr.Triple, isa, m.ISAs[isa].Triple)
			}
		}
	}
}

// checkSysroots checks the sysroots: one source (Debian packages or an image by digest), a triple, a libstdc++ release.
func (m *Matrix) checkSysroots(c *checker) {
	for _, n := range slices.Sorted(maps.Keys(m.Sysroots)) {
		sr := m.Sysroots[n]
		if (sr.Debian == nil) == (sr.Image == "") {
			c.fail(sr.Pos, "sysroot %s: give exactly one source, debian (suite, arch, packages) or image (a reference by digest)", n)
		}
		if sr.Debian != nil && (sr.Debian.Suite == "" || sr.Debian.Arch == "" || len(sr.Debian.Packages) == 0) {
			c.fail(sr.Keys.At("debian", sr.Pos), "sysroot %s: debian needs suite, arch and packages", n)
		}
		if sr.Image != "" && !strings.Contains(sr.Image, "@sha256:") {
			c.fail(sr.Keys.At("image", sr.Pos), "sysroot %s: image %q must be a reference by digest (NAME@sha256:...), so the sysroot cannot change under a tag", n, sr.Image)
		}
		if sr.Digest != "" && !strings.HasPrefix(sr.Digest, "sha256:") {
			c.fail(sr.Keys.At("digest", sr.Pos), "sysroot %s: digest must be sha256:<hex>", n)
		}
		if sr.Triple == "" {
			c.fail(sr.Pos, "sysroot %s: triple is required (the ISA's, e.g. aarch64-linux-gnu)", n)
		}
		if v := sr.Libstdcxx; v != "" {
			if _, err := c.newVersion(v); err != nil {
				c.fail(sr.Keys.At("libstdcxx", sr.Pos), "sysroot %s: libstdcxx %q must be a GCC release number like \"10\" (the GCC whose libstdc++ it holds)", n, v)
			}
		}
	}
}

// checkDoris checks the Doris series: each range includes the series itself.
func (m *Matrix) checkDoris(c *checker) {
	for _, n := range slices.Sorted(maps.Keys(m.Doris)) {
		d := m.Doris[n]
		cs := c.constraint(d.Keys.At("versions", d.Pos), "doris "+n+": versions", d.Versions)
		if cs != nil {
			if v, err := c.newVersion(n + ".0"); err == nil && !cs.Check(v) {
				c.fail(d.Keys.At("versions", d.Pos), "doris %s: versions %q does not include %s.0; the series name and its range disagree", n, d.Versions, n)
			}
		}
	}
}

func (m *Matrix) checkCompiler(c *checker, cc *Compiler) {
	n := cc.Name
	if _, ok := Dialects[cc.Dialect]; !ok {
		c.fail(cc.Keys.At("dialect", cc.Pos), "compiler %s: unknown dialect %q (one of: gcc, clang)", n, cc.Dialect)
	}
	c.constraint(cc.Keys.At("version", cc.Pos), "compiler "+n+": version", cc.Version)
	if cc.CC == "" || cc.CXX == "" {
		c.fail(cc.Pos, "compiler %s: cc and cxx are required (the C and C++ driver names under home/bin)", n)
	}
	if cc.Cross != "prefix" && cc.Cross != "target-flag" {
		c.fail(cc.Keys.At("cross", cc.Pos), "compiler %s: cross must be \"prefix\" (aarch64-linux-gnu-gcc) or \"target-flag\" (clang --target=…), got %q", n, cc.Cross)
	}
	for isa := range cc.Packages {
		if _, ok := m.ISAs[isa]; !ok {
			c.fail(cc.Keys.At("packages", cc.Pos), "compiler %s: packages for unknown isa %q", n, isa)
		}
	}
	for _, p := range cc.Identity.Programs {
		if p == "" || strings.ContainsAny(p, "/ \t\n") || strings.HasPrefix(p, "-") {
			c.fail(cc.Keys.At("identity", cc.Pos), "compiler %s: identity.programs: %q is not a program name (a bare name the driver finds, as cc1plus)", n, p)
		}
	}
	for _, g := range cc.Identity.Libs {
		if _, err := path.Match(g, ""); err != nil || g == "" || strings.Contains(g, "/") {
			c.fail(cc.Keys.At("identity", cc.Pos), "compiler %s: identity.libs: %q is not a library name glob (as libLLVM-*.so*, no directory)", n, g)
		}
	}
}

func (m *Matrix) checkCPU(c *checker, cpu *CPU) {
	n := cpu.Name
	if _, ok := m.ISAs[cpu.ISA]; !ok {
		c.fail(cpu.Keys.At("isa", cpu.Pos), "cpu %s: unknown isa %q", n, cpu.ISA)
		return
	}
	c.extList(cpu.Keys.At("extensions", cpu.Pos), "cpu "+n, cpu.ISA, cpu.Extensions)
	have := m.Closure(cpu.Extensions)
	if al, ok := m.ArchLevels[cpu.Arch]; !ok {
		c.fail(cpu.Keys.At("arch", cpu.Pos), "cpu %s: unknown architecture level %q", n, cpu.Arch)
	} else if al.ISA != cpu.ISA {
		c.fail(cpu.Keys.At("arch", cpu.Pos), "cpu %s: architecture level %s is for %s", n, cpu.Arch, al.ISA)
	} else if lvl, err := m.LevelExtensions(cpu.Arch); err == nil {
		// A level's mandatory features the CPU lacks mean the level is wrong.
		if missing := lvl.Minus(have); len(missing) > 0 && cpu.ISA == "aarch64" {
			c.fail(cpu.Keys.At("arch", cpu.Pos), "cpu %s: is listed as %s but lacks %s, which that level implies; lower the level or add the extensions", n, cpu.Arch, strings.Join(missing, ", "))
		}
	}
	if q, ok := m.QemuModels[cpu.Qemu]; !ok {
		c.fail(cpu.Keys.At("qemu", cpu.Pos), "cpu %s: unknown qemu model %q (one of: %s)", n, cpu.Qemu, strings.Join(slices.Sorted(maps.Keys(m.QemuModels)), ", "))
	} else if q.ISA != cpu.ISA {
		c.fail(cpu.Keys.At("qemu", cpu.Pos), "cpu %s: qemu model %s emulates %s, not %s", n, cpu.Qemu, q.ISA, cpu.ISA)
	}
	for _, comp := range slices.Sorted(maps.Keys(cpu.Mcpu)) {
		mc := cpu.Mcpu[comp]
		if _, ok := m.Compilers[comp]; !ok {
			c.fail(mc.Pos, "cpu %s: mcpu names unknown compiler %q", n, comp)
		}
		if mc.Name == "" {
			c.fail(mc.Pos, "cpu %s: mcpu.%s.name is required", n, comp)
		}
		c.constraint(mc.Keys.At("since", mc.Pos), fmt.Sprintf("cpu %s: mcpu.%s.since", n, comp), mc.Since)
	}
}

func (m *Matrix) checkTarget(c *checker, t *Target) {
	n := t.Name
	at := func(key string) datafile.Pos { return t.Keys.At(key, t.Pos) }
	cpu, okCPU := m.CPUs[t.CPU]
	if !okCPU {
		c.fail(at("cpu"), "target %s: unknown cpu %q (one of: %s)", n, t.CPU, strings.Join(slices.Sorted(maps.Keys(m.CPUs)), ", "))
	}
	if _, ok := m.OSes[t.OS]; !ok {
		c.fail(at("os"), "target %s: unknown os %q (one of: %s)", n, t.OS, strings.Join(slices.Sorted(maps.Keys(m.OSes)), ", "))
	}
	if len(t.Compilers) == 0 {
		c.fail(at("compilers"), "target %s: compilers must list at least one compiler", n)
	}
	dialects := map[string]bool{}
	for _, cn := range t.Compilers {
		cc, ok := m.Compilers[cn]
		if !ok {
			c.fail(at("compilers"), "target %s: unknown compiler %q (one of: %s)", n, cn, strings.Join(slices.Sorted(maps.Keys(m.Compilers)), ", "))
			continue
		}
		dialects[cc.Dialect] = true
	}
	switch t.Tune {
	case "", "march":
		if t.March == "" {
			c.fail(t.Pos, "target %s: march is required unless tune: mcpu", n)
		}
	case "mcpu":
	default:
		c.fail(at("tune"), "target %s: tune must be \"march\" or \"mcpu\", got %q", n, t.Tune)
	}
	if okCPU && t.March != "" {
		mm, err := m.ParseMarch(t.March)
		if err != nil {
			c.fail(at("march"), "target %s: %v", n, err)
		} else {
			if al := m.ArchLevels[mm.Level]; al != nil && al.ISA != cpu.ISA {
				c.fail(at("march"), "target %s: -march=%s is for %s but cpu %s is %s", n, t.March, al.ISA, cpu.Name, cpu.ISA)
			}
			have := m.Closure(cpu.Extensions)
			for _, x := range mm.Extensions.Minus(have) {
				c.fail(at("march"), "target %s: cpu %s has no extension %q but the target enables it (-march=%s); binaries would die with SIGILL", n, cpu.Name, x, t.March)
			}
		}
	}
	if okCPU && (t.Tune == "mcpu" || t.Mtune) {
		for _, cn := range t.Compilers {
			cc, ok := m.Compilers[cn]
			if !ok {
				continue
			}
			mc, ok := cpu.Mcpu[cn]
			if !ok {
				if t.Tune == "mcpu" {
					c.fail(at("tune"), "target %s: cpu %s has no -mcpu spelling for compiler %s; add cpus.%s.mcpu.%s or use tune: march", n, cpu.Name, cn, cpu.Name, cn)
				}
				continue
			}
			since, err := c.newConstraint(mc.Since)
			if err != nil {
				continue
			}
			if lb := LowerBound(cc.Version); t.Tune == "mcpu" && lb != nil && !since.Check(lb) {
				c.fail(at("compilers"), "target %s: compiler %s allows version %s, which is too old for -mcpu=%s (needs %s %s); raise compilers.%s.version or use tune: march", n, cn, lb, mc.Name, cn, mc.Since, cn)
			}
		}
	}
	for _, d := range slices.Sorted(maps.Keys(t.LTO)) {
		modes, ok := Dialects[d]
		if !ok {
			c.fail(at("lto"), "target %s: lto for unknown dialect %q (gcc or clang)", n, d)
			continue
		}
		if mode := t.LTO[d]; !contains(modes, mode) {
			hint := ""
			if d == "gcc" && mode == "thin" {
				hint = "; GCC has no ThinLTO, use gcc: auto"
			}
			c.fail(at("lto"), "target %s: %s cannot do lto %q (it supports %s)%s", n, d, mode, strings.Join(modes, ", "), hint)
		}
		if !dialects[d] {
			c.fail(at("lto"), "target %s: lto.%s is set but none of its compilers is a %s", n, d, d)
		}
	}
	if t.Doris != "" {
		c.constraint(at("doris"), "target "+n+": doris", t.Doris)
	}
	if !contains(OpenSSLPolicies, t.OpenSSL) {
		c.fail(at("openssl"), "target %s: openssl must be one of %s, got %q", n, strings.Join(OpenSSLPolicies, ", "), t.OpenSSL)
	}
	if t.BaseImage == "" {
		c.fail(t.Pos, "target %s: base_image is required (a registry reference or oci:DIR)", n)
	}
}

// Warnings are facts worth a maintainer's attention that do not make the matrix
// wrong: a qemu model that cannot exercise every extension a CPU has, or one that
// has extensions the CPU lacks (a smoke run then cannot catch them).
func (m *Matrix) Warnings() []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(m.CPUs)) {
		cpu := m.CPUs[n]
		q, ok := m.QemuModels[cpu.Qemu]
		if !ok || cpu.ISA != "aarch64" {
			continue
		}
		have, model := m.Closure(cpu.Extensions), m.Closure(q.Extensions)
		if lacks := have.Minus(model); len(lacks) > 0 {
			out = append(out, fmt.Sprintf("cpu %s: qemu model %s lacks %s; code using them dies in smoke runs though the CPU has them", n, cpu.Qemu, strings.Join(lacks, ", ")))
		}
		if extra := model.Minus(have); len(extra) > 0 {
			out = append(out, fmt.Sprintf("cpu %s: qemu model %s also has %s; smoke runs cannot catch their use, only the scanner can", n, cpu.Qemu, strings.Join(extra, ", ")))
		}
	}
	return out
}

// knownISA reports an isa: the matrix does not define.
func (m *Matrix) knownISA(c *checker, at datafile.Pos, what, isa string) {
	if _, ok := m.ISAs[isa]; !ok {
		c.fail(at, "%s: unknown isa %q", what, isa)
	}
}

// runtimes checks runtimes: and the sysroots that carry one: a runtime
// must be newer than the sysroot's own C++ library and built for a glibc
// no newer than any OS using the sysroot has.
func (c *checker) runtimes() {
	m := c.m
	for _, n := range slices.Sorted(maps.Keys(m.Runtimes)) {
		rt := m.Runtimes[n]
		if _, err := c.newVersion(rt.Libstdcxx); err != nil {
			c.fail(rt.Keys.At("libstdcxx", rt.Pos), "runtime %s: libstdcxx %q must be a GCC release number like \"12\"", n, rt.Libstdcxx)
		}
		if _, err := c.newVersion(rt.Glibc); err != nil {
			c.fail(rt.Keys.At("glibc", rt.Pos), "runtime %s: glibc %q must be a version like \"2.17\" (the glibc it is built against)", n, rt.Glibc)
		}
		switch cc := m.Compilers[rt.Compiler]; {
		case cc == nil:
			c.fail(rt.Keys.At("compiler", rt.Pos), "runtime %s: compiler %q is not in compilers (one of: %s)", n, rt.Compiler, strings.Join(slices.Sorted(maps.Keys(m.Compilers)), ", "))
		case cc.Dialect != "gcc":
			c.fail(rt.Keys.At("compiler", rt.Pos), "runtime %s: compiler %s is %s; GCC's C++ runtime is built with GCC (a compiler of dialect gcc)", n, rt.Compiler, cc.Dialect)
		}
		src := rt.Source
		at := rt.Keys.At("source", rt.Pos)
		if u, err := url.Parse(src.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || path.Base(u.Path) == "/" || path.Base(u.Path) == "." {
			c.fail(src.Keys.At("url", at), "runtime %s: source.url %q must be an http or https URL of an archive", n, src.URL)
		}
		if len(src.SHA256) != 64 || strings.Trim(src.SHA256, "0123456789abcdef") != "" {
			c.fail(src.Keys.At("sha256", at), "runtime %s: source.sha256 must be the archive's sha256 (64 lower-case hex digits)", n)
		}
		if src.Size <= 0 {
			c.fail(src.Keys.At("size", at), "runtime %s: source.size must be the archive's size in bytes (a download is cut there)", n)
		}
		if rt.Script == "" || path.IsAbs(rt.Script) || strings.HasPrefix(path.Clean(rt.Script), "..") {
			c.fail(rt.Keys.At("script", rt.Pos), "runtime %s: script %q must be a path beside matrix.yaml (e.g. runtimes/gcc-cxxrt.sh)", n, rt.Script)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(m.Sysroots)) {
		sr := m.Sysroots[n]
		if sr.Runtime == "" {
			continue
		}
		at := sr.Keys.At("runtime", sr.Pos)
		rt, ok := m.Runtimes[sr.Runtime]
		if !ok {
			c.fail(at, "sysroot %s: runtime %q is not in runtimes (one of: %s)", n, sr.Runtime, strings.Join(slices.Sorted(maps.Keys(m.Runtimes)), ", "))
			continue
		}
		have, err1 := version.NewVersion(sr.Libstdcxx)
		got, err2 := version.NewVersion(rt.Libstdcxx)
		if err1 == nil && err2 == nil && !have.LessThan(got) {
			c.fail(at, "sysroot %s: runtime %s holds GCC %s's C++ library, no newer than the sysroot's own (GCC %s): drop it, or name a newer one", n, rt.Name, rt.Libstdcxx, sr.Libstdcxx)
		}
		floor, err := version.NewVersion(rt.Glibc)
		if err != nil {
			continue
		}
		for _, on := range slices.Sorted(maps.Keys(m.OSes)) {
			o := m.OSes[on]
			g, err := version.NewVersion(o.Glibc)
			if err != nil || !slices.Contains(slices.Collect(maps.Values(o.Sysroot)), n) {
				continue
			}
			if g.LessThan(floor) {
				c.fail(at, "sysroot %s: runtime %s is built for glibc %s, and os %s (which uses the sysroot) has glibc %s: a program linking it would not start there; build the runtime for glibc %s or older", n, rt.Name, rt.Glibc, on, o.Glibc, o.Glibc)
			}
		}
	}
}
