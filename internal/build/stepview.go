package build

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/plan"
)

// stepPhase is the phase of step s whose compiler home and logs it uses
// (a step of no phase is a third-party package's).
func stepPhase(s plan.Step) string {
	if s.Phase == "" {
		return plan.PhaseThirdparty
	}
	return s.Phase
}

// stepSandbox is what a step's programs see (RunProcess makes it with
// bubblewrap): the step's tree, writable, at the cell tree's path; the
// compiler log of its phase, the PGO and ThinLTO directories of steps
// that compile the tree, writable; and, read-only, the compiler homes,
// the sysroot, the compiler's own installation where it is not under the
// system directories, and the directories the recipe's host_env names.
// The cache, the cell's other files (logs, other packages' trees), --out,
// the source tree dorisarm copied and the keys are not there.
func (r *runner) stepSandbox(s plan.Step) *Sandbox {
	sb := &Sandbox{Writable: []Mount{{From: r.srcDir(), To: r.seen(r.src)}}}
	phase := stepPhase(s)
	if log := filepath.Join(r.logs, "compiler-"+phase+".log"); isRegular(log) {
		sb.Writable = append(sb.Writable, Mount{From: log, To: r.seen(log), Shared: true})
	}
	switch s.Kind {
	case plan.KindBuild, plan.KindTrain, plan.KindMerge:
		pgo := filepath.Join(r.work, "pgo")
		sb.Writable = append(sb.Writable, Mount{From: pgo, To: r.seen(pgo)}, Mount{From: r.ltoCache, To: r.seen(r.ltoCache)})
	}
	if dir, shared := r.compileDirs(s); dir != "" {
		sb.Writable = append(sb.Writable, Mount{From: dir, To: seenCompileCache})
		if shared != "" {
			sb.Writable = append(sb.Writable, Mount{From: shared, To: seenSharedCompileCache})
		}
		if log := r.statsLog(s); isRegular(log) {
			sb.Writable = append(sb.Writable, Mount{From: log, To: r.seen(log)})
		}
	}
	sb.ReadOnly = readOnlyMounts(r.declaredInputs(s))
	for i := range sb.ReadOnly {
		sb.ReadOnly[i].To = r.seen(sb.ReadOnly[i].From)
	}
	return sb
}

// declaredInputs are the paths of this machine a step reads besides the
// system directories.
func (r *runner) declaredInputs(s plan.Step) []string {
	in := []string{filepath.Join(r.work, "toolchain"), r.sysrootPath(), r.sysrootRunPath()}
	if tc := r.in.TC; tc != nil {
		in = append(in, tc.Home)
		for _, p := range append([]string{tc.CC, tc.CXX}, toolPaths(tc.Tools)...) {
			if p != "" && filepath.IsAbs(p) {
				in = append(in, filepath.Dir(p))
			}
		}
	}
	if s.Kind == plan.KindRuntime {
		in = append(in, r.runtimeSource, r.runtimeSysroot)
	}
	if s.Inputs.Build != nil {
		for _, h := range s.Inputs.Build.HostEnv {
			in = append(in, os.Getenv(h.Name))
		}
	}
	return in
}

func toolPaths(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// readOnlyMounts are the existing absolute paths among ps, each once,
// none inside another (which already shows it).
func readOnlyMounts(ps []string) []Mount {
	var clean []string
	for _, p := range ps {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			continue
		}
		clean = append(clean, filepath.Clean(p))
	}
	slices.Sort(clean)
	clean = slices.Compact(clean)
	var out []Mount
	for _, p := range clean {
		if slices.ContainsFunc(out, func(m Mount) bool { return under(p, m.From) }) {
			continue
		}
		out = append(out, Mount{From: p})
	}
	return out
}

func isRegular(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.Mode().IsRegular()
}

// stepEnvAllowed are the variables of dorisarm's own environment a step
// gets: the locale, the time zone, the terminal type and the
// reproducibility epoch. Everything else (COSIGN_*, SIGSTORE_*, tokens,
// registry credentials, proxies) is not passed on; what a build needs
// besides is the plan's (its toolchain and step variables) or the
// recipe's host_env.
var stepEnvAllowed = []string{"LANG", "LANGUAGE", "TZ", "TERM", "SOURCE_DATE_EPOCH"}

// stepEnv is the allow-listed part of env (KEY=VALUE entries), plus the
// named variables.
func stepEnv(env []string, also []string) []string {
	var out []string
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if slices.Contains(stepEnvAllowed, k) || strings.HasPrefix(k, "LC_") || slices.Contains(also, k) {
			out = append(out, kv)
		}
	}
	return out
}

// touch makes p an empty regular file where nothing is (a step's sandbox
// shows it writable: the compiler wrappers append to it).
func touch(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
