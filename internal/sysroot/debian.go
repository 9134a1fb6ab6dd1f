package sysroot

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// AptError is a failed apt-get run.
type AptError struct {
	Op       string   // "update" or "download"
	Packages []string // the packages apt named in its errors, as name:arch
	Suite    string
	Mirror   string
	Where    string // matrix.yaml oses.<name>.sysroot
	// Unreachable: apt could not connect to the mirror at all.
	Unreachable bool
	// DiskFull: apt said "No space left on device": the disk that holds
	// Dir (its lists, caches and downloads, under the sysroot cache) is
	// full.
	DiskFull bool
	Dir      string
	Output   string // apt's error and warning lines
	Err      error
}

func (e *AptError) Error() string {
	var b strings.Builder
	b.WriteString("apt-get " + e.Op + " failed")
	if len(e.Packages) > 0 {
		b.WriteString(" for " + strings.Join(e.Packages, ", "))
	}
	fmt.Fprintf(&b, " from %s (%s): %s", e.Suite, e.Mirror, e.Output)
	switch {
	case e.DiskFull:
		fmt.Fprintf(&b, "; the disk is full: apt could not write under %s (no space left on device); free space there (df -h %s), or point --cache (or $DORISARM_CACHE) at a disk with room, then run again", e.Dir, e.Dir)
	case e.Unreachable:
		fmt.Fprintf(&b, "; the mirror cannot be reached: check the network, or set %s.debian.mirror to a mirror this machine reaches", e.Where)
	case e.Op == "update":
		fmt.Fprintf(&b, "; check the suite and architecture in %s.debian and that the mirror serves them", e.Where)
	default:
		fmt.Fprintf(&b, "; check the suite and package names in %s.debian", e.Where)
	}
	return b.String()
}

func (e *AptError) Unwrap() error { return e.Err }

// Is makes a full disk seen in apt's output ENOSPC, as a write of
// dorisarm's own that found no space is (fault.DiskFull), and a mirror that
// cannot be reached a failure of the network (fault.ErrEnv): neither is
// the matrix's sysroot being wrong.
func (e *AptError) Is(target error) bool {
	return e.DiskFull && target == syscall.ENOSPC || e.Unreachable && target == fault.ErrEnv
}

var (
	rePackage = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:_-]+)?$`) })
	reWord    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) })
)

type aptSource struct {
	URI      string
	SignedBy string
}

type debianSource struct {
	spec     Spec
	suite    string
	arch     string
	packages []string
	mirror   aptSource
}

func newDebianSource(s Spec, o *options) (*debianSource, error) {
	d := s.Debian
	if !reWord().MatchString(d.Suite) {
		return nil, fmt.Errorf("%s: debian suite %q is not a suite name (bullseye, bookworm, ...); fix %s.debian.suite", s.label(), d.Suite, s.where())
	}
	if !reWord().MatchString(d.Arch) {
		return nil, fmt.Errorf("%s: debian arch %q is not an architecture (arm64, ...); fix %s.debian.arch", s.label(), d.Arch, s.where())
	}
	if len(d.Packages) == 0 {
		return nil, fmt.Errorf("%s: no debian packages; list at least libc6 and libc6-dev in %s.debian.packages", s.label(), s.where())
	}
	seen := map[string]bool{}
	for _, p := range d.Packages {
		if !rePackage().MatchString(p) {
			return nil, fmt.Errorf("%s: %q is not a package name (name or name=version); fix %s.debian.packages", s.label(), p, s.where())
		}
		n, _, _ := strings.Cut(p, "=")
		if seen[n] {
			return nil, fmt.Errorf("%s: package %s is listed twice in %s.debian.packages", s.label(), n, s.where())
		}
		seen[n] = true
	}
	src := &debianSource{spec: s, suite: d.Suite, arch: d.Arch, packages: sortedCopy(d.Packages)}
	machine, merr := machineMirror(o.aptDir)
	if d.Mirror != "" {
		u, err := url.Parse(d.Mirror)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file") || strings.ContainsAny(d.Mirror, " \t\n[]") {
			return nil, fmt.Errorf("%s: debian mirror %q is not an http, https or file URL; fix %s.debian.mirror", s.label(), d.Mirror, s.where())
		}
		src.mirror = aptSource{URI: strings.TrimRight(d.Mirror, "/")}
		if merr == nil && machine.URI == src.mirror.URI {
			src.mirror.SignedBy = machine.SignedBy
		}
	} else {
		if merr != nil {
			return nil, fmt.Errorf("%s: %w; set %s.debian.mirror", s.label(), merr, s.where())
		}
		src.mirror = machine
	}
	return src, nil
}

// key is what the spec says, not where this machine fetches it: a spec
// without a mirror takes the machine's apt mirror, a copy of the same
// archive, which must not make two machines' keys differ.
func (s *debianSource) key() any {
	return struct {
		Suite    string   `json:"suite"`
		Arch     string   `json:"arch"`
		Packages []string `json:"packages"`
		Mirror   string   `json:"mirror"`
	}{s.suite, s.arch, s.packages, s.spec.Debian.Mirror}
}

func (s *debianSource) fill(ctx context.Context, u *unpacker, work string) (filled, error) {
	dirs := map[string]string{}
	for _, d := range []string{"etc/sources.list.d", "etc/preferences.d", "state/lists/partial", "cache/archives/partial", "debs"} {
		p := filepath.Join(work, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return filled{}, err
		}
		dirs[d] = p
	}
	opts := ""
	if s.mirror.SignedBy != "" {
		opts = " signed-by=" + s.mirror.SignedBy
	}
	list := filepath.Join(work, "etc/sources.list")
	line := fmt.Sprintf("deb [arch=%s%s] %s %s main\n", s.arch, opts, s.mirror.URI, s.suite)
	status := filepath.Join(work, "state/status")
	if err := os.WriteFile(list, []byte(line), 0o644); err != nil {
		return filled{}, err
	}
	if err := os.WriteFile(status, nil, 0o644); err != nil {
		return filled{}, err
	}
	// The machine's apt.conf.d still applies (proxies, ...); its sources,
	// preferences, lists, caches and dpkg status do not.
	common := []string{
		"-o", "Dir::Etc::SourceList=" + list,
		"-o", "Dir::Etc::SourceParts=" + dirs["etc/sources.list.d"],
		"-o", "Dir::Etc::Preferences=" + filepath.Join(work, "etc/preferences"),
		"-o", "Dir::Etc::PreferencesParts=" + dirs["etc/preferences.d"],
		"-o", "Dir::State=" + filepath.Join(work, "state"),
		"-o", "Dir::State::status=" + status,
		"-o", "Dir::Cache=" + filepath.Join(work, "cache"),
		"-o", "Dir::Cache::pkgcache=",
		"-o", "Dir::Cache::srcpkgcache=",
		"-o", "APT::Architecture=" + s.arch,
		"-o", "APT::Architectures=" + s.arch,
		"-o", "Acquire::Languages=none",
		"-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
		"-o", "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
		"-o", "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false",
		"-o", "APT::Update::Error-Mode=any",
		"-q",
	}
	if os.Geteuid() == 0 {
		// apt would drop to _apt, which cannot write our temporary directories.
		common = append(common, "-o", "APT::Sandbox::User=root")
	}
	if out, err := runApt(ctx, "", append(common, "update")...); err != nil {
		return filled{}, s.aptError("update", work, out, err, nil)
	}
	var want []string
	for _, p := range s.packages {
		n, v, pinned := strings.Cut(p, "=")
		w := n + ":" + s.arch
		if pinned {
			w += "=" + v
		}
		want = append(want, w)
	}
	if out, err := runApt(ctx, dirs["debs"], append(append(common, "download", "--"), want...)...); err != nil {
		return filled{}, s.aptError("download", work, out, err, want)
	}
	debs, err := filepath.Glob(filepath.Join(dirs["debs"], "*.deb"))
	if err != nil {
		return filled{}, err
	}
	sort.Strings(debs)
	if len(debs) != len(s.packages) {
		return filled{}, fmt.Errorf("apt-get download gave %d packages for the %d in %s.debian.packages", len(debs), len(s.packages), s.spec.where())
	}
	f := filled{source: fmt.Sprintf("debian %s %s from %s", s.suite, s.arch, s.mirror.URI)}
	for _, deb := range debs {
		ctl, err := debFields(ctx, deb)
		if err != nil {
			return filled{}, err
		}
		if a := ctl["Architecture"]; a != s.arch && a != "all" {
			return filled{}, fmt.Errorf("%s is for %s, not %s", filepath.Base(deb), a, s.arch)
		}
		f.packages = append(f.packages, ctl["Package"]+"="+ctl["Version"])
		if ctl["Package"] == "libc6" {
			f.libc6 = upstreamVersion(ctl["Version"])
		}
		if err := unpackDeb(ctx, u, deb); err != nil {
			return filled{}, err
		}
	}
	return f, nil
}

// aptError reads apt's output (apt-get ran in work) into an AptError. A
// full disk is only in apt's text: "E: Write error - write (28: No space
// left on device)", "... Write error ... No space left on device".
func (s *debianSource) aptError(op, work string, out []byte, err error, want []string) *AptError {
	e := &AptError{Op: op, Suite: s.suite, Mirror: s.mirror.URI, Where: s.spec.where(), Dir: work, Err: err}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "E:") || strings.HasPrefix(l, "Err:") || strings.HasPrefix(l, "W:") {
			lines = append(lines, l)
		}
		if strings.Contains(l, "No space left on device") {
			e.DiskFull = true
		}
		for _, unreach := range []string{"Could not connect", "Temporary failure resolving", "Could not resolve", "Connection timed out", "Network is unreachable", "No route to host", "Connection failed"} {
			if strings.Contains(l, unreach) {
				e.Unreachable = true
			}
		}
	}
	if len(lines) == 0 {
		lines = append(lines, strings.TrimSpace(lastLines(string(out), 5)))
	}
	e.Output = strings.Join(lines, "; ")
	if len(e.Output) > 2000 {
		e.Output = e.Output[:2000] + "..."
	}
	for _, w := range want {
		n, _, _ := strings.Cut(w, ":")
		for _, l := range lines {
			if strings.HasPrefix(l, "E:") && (strings.Contains(l, "'"+n+"'") || strings.Contains(l, " "+n+":") || strings.HasSuffix(l, " "+n) || strings.Contains(l, " "+n+" ")) {
				e.Packages = append(e.Packages, w)
				break
			}
		}
	}
	if op == "download" && len(e.Packages) == 0 {
		e.Packages = want
	}
	return e
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func runApt(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	return cmd.CombinedOutput()
}

func debFields(ctx context.Context, deb string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, "dpkg-deb", "-f", deb, "Package", "Version", "Architecture").Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg-deb -f %s: %w", filepath.Base(deb), err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	if m["Package"] == "" || m["Version"] == "" {
		return nil, fmt.Errorf("%s: no Package or Version in its control file", filepath.Base(deb))
	}
	return m, nil
}

// unpackDeb streams the package's data.tar through the unpacker.
func unpackDeb(ctx context.Context, u *unpacker, deb string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dpkg-deb: %w", err)
	}
	aerr := u.apply(ctx, out, filepath.Base(deb))
	if aerr != nil {
		cancel()
	}
	werr := cmd.Wait()
	if aerr != nil {
		return aerr
	}
	if werr != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w: %s", filepath.Base(deb), werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// upstreamVersion: "2.31-13+deb11u11" -> "2.31", "1:2.3-1" -> "2.3".
func upstreamVersion(v string) string {
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after
	}
	if i := strings.LastIndex(v, "-"); i > 0 {
		v = v[:i]
	}
	return v
}

// machineMirror finds the Debian archive this machine's apt uses: the first
// "deb" source, in apt's order (sources.list, then sources.list.d/*.list and
// *.sources by name), with the component main and a release suite (no "-":
// not -updates or -security); one whose path ends in /debian is preferred.
func machineMirror(aptDir string) (aptSource, error) {
	files := []string{filepath.Join(aptDir, "sources.list")}
	parts, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*"))
	sort.Strings(parts)
	for _, p := range parts {
		if strings.HasSuffix(p, ".list") || strings.HasSuffix(p, ".sources") {
			files = append(files, p)
		}
	}
	type entry struct {
		aptSource
		suites, comps []string
	}
	var ents []entry
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.HasSuffix(f, ".sources") {
			for _, st := range deb822(string(b)) {
				if !hasWord(st["types"], "deb") || strings.EqualFold(st["enabled"], "no") {
					continue
				}
				sb := st["signed-by"]
				if strings.Contains(sb, "BEGIN PGP") {
					sb = "" // an inline key: apt's default keyrings must do
				}
				for _, uri := range strings.Fields(st["uris"]) {
					ents = append(ents, entry{aptSource{strings.TrimRight(uri, "/"), sb}, strings.Fields(st["suites"]), strings.Fields(st["components"])})
				}
			}
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimSpace(l)
			if i := strings.IndexByte(l, '#'); i >= 0 {
				l = strings.TrimSpace(l[:i])
			}
			if !strings.HasPrefix(l, "deb ") && !strings.HasPrefix(l, "deb\t") {
				continue
			}
			l = strings.TrimSpace(l[3:])
			sb := ""
			if strings.HasPrefix(l, "[") {
				end := strings.IndexByte(l, ']')
				if end < 0 {
					continue
				}
				for _, o := range strings.Fields(l[1:end]) {
					if v, ok := strings.CutPrefix(o, "signed-by="); ok {
						sb = v
					}
				}
				l = strings.TrimSpace(l[end+1:])
			}
			fs := strings.Fields(l)
			if len(fs) < 3 {
				continue
			}
			ents = append(ents, entry{aptSource{strings.TrimRight(fs[0], "/"), sb}, fs[1:2], fs[2:]})
		}
	}
	var found []aptSource
	for _, e := range ents {
		release := false
		for _, s := range e.suites {
			if !strings.ContainsAny(s, "-/") && s != "nodistro" {
				release = true
			}
		}
		if release && hasWord(strings.Join(e.comps, " "), "main") {
			found = append(found, e.aptSource)
		}
	}
	for _, f := range found {
		if strings.HasSuffix(f.URI, "/debian") {
			return f, nil
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	return aptSource{}, fmt.Errorf("no Debian archive (a deb source of a release suite with main) in %s/sources.list or %s/sources.list.d", aptDir, aptDir)
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// deb822 parses stanzas of "Key: value" fields (keys lower-cased;
// continuation lines joined with newlines).
func deb822(s string) []map[string]string {
	var out []map[string]string
	cur := map[string]string{}
	last := ""
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur, last = map[string]string{}, ""
	}
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if (l[0] == ' ' || l[0] == '\t') && last != "" {
			cur[last] += "\n" + strings.TrimSpace(l)
			continue
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		last = strings.ToLower(strings.TrimSpace(k))
		cur[last] = strings.TrimSpace(v)
	}
	flush()
	return out
}
