package scan

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/flagrec"
)

// originsOf scans a package's install (its archive) as the build's
// install check does, keeping its records' digests, and attributes them
// to the package.
func originsOf(t *testing.T, pkg, archive string) *Origins {
	t.Helper()
	r, err := Scan(context.Background(), []string{archive}, policy(t, "kunpeng920"), Options{Digests: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Digests) == 0 {
		t.Fatalf("the install scan of %s kept no record digest", archive)
	}
	o := &Origins{Packages: map[string]string{}}
	for _, d := range r.Digests {
		o.Packages[d] = pkg
	}
	return o
}

// TestFlagOriginsSplitTreeFromPackages: a linked BE (a shared object
// here, as doris_be is linked) holds the records of the BE's own objects
// and those of a package archive linked into it, from GCC (whose records
// name no file) and from clang with ThinLTO (the package's records read
// from bitcode at install, from .GCC.command.line after the link). With
// the packages' records as origins, lost tuning in the BE's own objects
// is an error naming the -march that won, in a package's a warning, and
// the BE's accepted (--accept-lost-tuning) a warning that says so;
// without origins both are warnings, as before.
func TestFlagOriginsSplitTreeFromPackages(t *testing.T) {
	need(t, "aarch64-linux-gnu-g++", "aarch64-linux-gnu-ar", "clang-16", "clang++-16", "llvm-ar-16", "ld.lld-16")
	type toolset struct {
		name              string
		cc, cxx, ar, link []string
	}
	for _, ts := range []toolset{
		{name: "gcc", cc: []string{"aarch64-linux-gnu-gcc", "-frecord-gcc-switches", "-g"}, cxx: []string{"aarch64-linux-gnu-g++", "-frecord-gcc-switches", "-g"},
			ar: []string{"aarch64-linux-gnu-ar", "rcs"}, link: []string{"aarch64-linux-gnu-g++", "-shared"}},
		{name: "clang-thinlto", cc: []string{"clang-16", "--target=aarch64-linux-gnu", "-frecord-command-line", "-flto=thin"},
			cxx: []string{"clang++-16", "--target=aarch64-linux-gnu", "-frecord-command-line", "-flto=thin"},
			ar:  []string{"llvm-ar-16", "rcs"}, link: []string{"clang++-16", "--target=aarch64-linux-gnu", "-fuse-ld=lld", "-flto=thin", "-shared"}},
	} {
		t.Run(ts.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "pkg.c"), "int work(int x) { return x * 3 + 1; }\n")
			write(t, filepath.Join(dir, "pkg_ok.c"), "int more(int x) { return x * 5 + 1; }\n")
			write(t, filepath.Join(dir, "be.cc"), "extern \"C\" int work(int);\nextern \"C\" int more(int);\nint be_entry(int x) { return work(x) + more(x); }\n")
			cmd := func(base []string, args ...string) {
				run(t, dir, append(append([]string{}, base...), args...)...)
			}
			kp := append([]string{"-O2", "-fPIC"}, kunpengFlags...)
			// A package that ends its compile of pkg.c with Doris's -march
			// (as bitshuffle's neon variant did), pkg_ok.c at the target.
			cmd(ts.cc, append(append([]string{}, kp...), dorisARM, "-c", "pkg.c", "-o", "pkg.o")...)
			cmd(ts.cc, append(append([]string{}, kp...), "-c", "pkg_ok.c", "-o", "pkg_ok.o")...)
			cmd(ts.ar, "libpkg.a", "pkg.o", "pkg_ok.o")
			// The BE at the target's flags, and with Doris's -march last.
			cmd(ts.cxx, append(append([]string{}, kp...), "-std=c++17", "-c", "be.cc", "-o", "be_target.o")...)
			cmd(ts.cxx, append(append([]string{}, kp...), "-std=c++17", dorisARM, "-c", "be.cc", "-o", "be_lost.o")...)
			cmd(ts.link, "be_target.o", "libpkg.a", "-o", "libbe_target.so")
			cmd(ts.link, "be_lost.o", "libpkg.a", "-o", "libbe_lost.so")
			origins := originsOf(t, "thirdparty:PKG", filepath.Join(dir, "libpkg.a"))
			pol := policy(t, "kunpeng920")
			gate := func(so string, o *Origins) *Report {
				t.Helper()
				r, err := Scan(context.Background(), []string{filepath.Join(dir, so)}, pol, Options{Origins: o})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			findings := func(r *Report, kind, origin string) []Finding {
				var out []Finding
				for _, f := range r.Findings {
					if f.Kind == kind && f.Origin == origin {
						out = append(out, f)
					}
				}
				return out
			}

			// Only the package lost tuning: a warning, the build passes.
			r := gate("libbe_target.so", origins)
			ff := fileFlags(t, r, "libbe_target.so")
			if ff.Verdict != flagrec.Lost || ff.Origins[OriginTree] == nil || ff.Origins[OriginTree].Verdict != flagrec.AtTarget ||
				ff.Origins["thirdparty:PKG"] == nil || ff.Origins["thirdparty:PKG"].Verdict != flagrec.Lost {
				t.Errorf("BE at target, package lost: file flags %+v, origins %+v", ff, ff.Origins)
			}
			if f := findings(r, KindLostTuning, "thirdparty:PKG"); len(f) != 1 || f[0].Severity != SevWarning || !strings.Contains(f[0].Detail, "compiled by thirdparty:PKG") {
				t.Errorf("package lost tuning: %+v", r.Findings)
			}
			if !r.Summary.Clean || len(findings(r, KindLostTuning, OriginTree)) != 0 || r.Summary.Flags.LostBy["thirdparty:PKG"] != 1 || r.Summary.Flags.LostBy[OriginTree] != 0 {
				t.Errorf("BE at target, package lost: clean %v, findings %+v, lost by %v", r.Summary.Clean, r.Findings, r.Summary.Flags.LostBy)
			}

			// The BE's own objects lost: an error naming the -march that won
			// and the target's, and the ways out.
			r = gate("libbe_lost.so", origins)
			tree := findings(r, KindLostTuning, OriginTree)
			if len(tree) != 1 || !tree[0].Violation() || !strings.Contains(tree[0].Detail, "-march=armv8-a+crc") ||
				!strings.Contains(tree[0].Detail, "-march="+strings.TrimPrefix(kunpengFlags[0], "-march=")) || !strings.Contains(tree[0].Detail, "--accept-lost-tuning") {
				t.Errorf("BE lost tuning: %+v", r.Findings)
			}
			if r.Summary.Clean || r.Summary.ByKind[KindLostTuning] != 1 || r.Summary.Warned[KindLostTuning] != 1 || r.Summary.Flags.LostBy[OriginTree] != 1 {
				t.Errorf("BE lost tuning: summary %+v, flags %+v", r.Summary, r.Summary.Flags)
			}
			if of := fileFlags(t, r, "libbe_lost.so").Origins[OriginTree]; of == nil || of.Verdict != flagrec.Lost || !strings.HasPrefix(of.Flags, "-march=armv8-a+crc") {
				t.Errorf("BE's records: %+v", of)
			}

			// Accepted: a warning that says so, in the finding and the summary.
			acc := &Origins{Packages: origins.Packages, Accepted: "no patch for this trunk yet"}
			r = gate("libbe_lost.so", acc)
			tree = findings(r, KindLostTuning, OriginTree)
			if !r.Summary.Clean || len(tree) != 1 || tree[0].Severity != SevWarning || !strings.Contains(tree[0].Detail, "accepted (--accept-lost-tuning): no patch for this trunk yet") ||
				r.Summary.Flags.LostTuningAccepted != acc.Accepted || r.Summary.Warned[KindLostTuning] != 2 {
				t.Errorf("accepted: clean %v, findings %+v, flags %+v", r.Summary.Clean, r.Findings, r.Summary.Flags)
			}
			// --require-target-flags still makes every lost tuning an error.
			if req, err := Scan(context.Background(), []string{filepath.Join(dir, "libbe_lost.so")}, pol, Options{Origins: acc, RequireTargetFlags: true}); err != nil || req.Summary.ByKind[KindLostTuning] != 2 {
				t.Errorf("accepted, with --require-target-flags: %v %+v", err, req.Summary)
			}

			// No origins (dorisarm scan): one warning for the file, as before.
			r = gate("libbe_lost.so", nil)
			if f := flagFinding(r, KindLostTuning, "libbe_lost.so"); !r.Summary.Clean || f == nil || f.Origin != "" || f.Severity != SevWarning ||
				fileFlags(t, r, "libbe_lost.so").Origins != nil || r.Summary.Flags.LostBy != nil {
				t.Errorf("without origins: %+v", r.Findings)
			}
		})
	}
}
