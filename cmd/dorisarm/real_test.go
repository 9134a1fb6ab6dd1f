package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/pkgstatus"
	"github.com/dorisarm/dorisarm/internal/testproc"
)

// Tests on real Apache Doris inputs: the 2.1.7 build interface and upstream
// archives in ../shared/corpus (skipped where it is absent).

func corpusTree(t *testing.T) (tree, mirror string) {
	t.Helper()
	c := testproc.Corpus(t)
	return filepath.Join(c, "doris-2.1.7"), filepath.Join(c, "mirror")
}

// copyTree copies a real tree to a temp dir so a test can change a byte of it.
func copyCorpusTree(t *testing.T, tree string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "doris")
	if out, err := exec.Command("cp", "-r", tree, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	exec.Command("chmod", "-R", "u+w", dst).Run()
	return dst
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o755); err != nil {
		t.Fatal(err)
	}
}

func planKeys(t *testing.T, args ...string) map[string]string {
	t.Helper()
	out, errOut, code := run(t, append([]string{"plan", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("plan %v: exit %d\n%s", args, code, errOut)
	}
	var p struct {
		Steps []struct{ ID, Key string }
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, s := range p.Steps {
		keys[s.ID] = s.Key
	}
	return keys
}

// Cache keys cover every byte a step reads: the same tree at another path
// shares every key; one byte of build-thirdparty.sh changes every step that
// runs it and everything after, and nothing before it.
func TestRealTreeCacheKeys(t *testing.T) {
	tree, _ := corpusTree(t)
	needTool(t, "clang-16")
	args := []string{"--target", "kunpeng920", "--packages", "snappy,bzip"}
	a := copyCorpusTree(t, tree)
	b := copyCorpusTree(t, tree)
	ka := planKeys(t, append(args, "--source", a)...)
	kb := planKeys(t, append(args, "--source", b)...)
	if len(ka) == 0 || len(ka) != len(kb) {
		t.Fatalf("plans differ in steps: %v %v", ka, kb)
	}
	for id, k := range ka {
		if kb[id] != k {
			t.Errorf("%s: the same tree at another path has another key", id)
		}
	}
	edit(t, filepath.Join(b, "thirdparty", "build-thirdparty.sh"), "# zlib\n", "# zlib.\n")
	kb = planKeys(t, append(args, "--source", b)...)
	for id, k := range ka {
		downstream := strings.HasPrefix(id, "thirdparty:") || id == "collect" || id == "scan" || id == "patch:doris"
		if downstream && kb[id] == k {
			t.Errorf("%s: key unchanged after build-thirdparty.sh changed", id)
		}
		if !downstream && kb[id] != k {
			t.Errorf("%s: key changed though it does not read build-thirdparty.sh", id)
		}
	}
	// env.sh, which build-thirdparty.sh sources, is read too.
	c := copyCorpusTree(t, tree)
	edit(t, filepath.Join(c, "env.sh"), "export LC_ALL=C", "export LC_ALL=C ")
	kc := planKeys(t, append(args, "--source", c)...)
	if kc["thirdparty:SNAPPY"] == ka["thirdparty:SNAPPY"] {
		t.Error("thirdparty:SNAPPY key unchanged after env.sh changed")
	}
	// dorisarm's patch on the tree depends on the tree it patches (the
	// sample tree and a real tree once shared patch:doris's key).
	d := copyCorpusTree(t, tree)
	edit(t, filepath.Join(d, "be", "CMakeLists.txt"), "cmake_minimum_required", "cmake_minimum_required ")
	if kd := planKeys(t, append(args, "--source", d)...); kd["patch:doris"] == ka["patch:doris"] || kd["thirdparty:SNAPPY"] == ka["thirdparty:SNAPPY"] {
		t.Error("patch:doris (or what needs it) kept its key after the tree changed")
	}
	// One of Doris's own patches changes the unpack of its package only.
	e := copyCorpusTree(t, tree)
	args2 := []string{"--target", "kunpeng920", "--packages", "snappy,glog"}
	ke0 := planKeys(t, append(args2, "--source", a)...)
	f, _ := os.OpenFile(filepath.Join(e, "thirdparty", "patches", "glog-0.6.0.patch"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\n")
	f.Close()
	ke := planKeys(t, append(args2, "--source", e)...)
	if ke["unpack:GLOG"] == ke0["unpack:GLOG"] || ke["unpack:SNAPPY"] != ke0["unpack:SNAPPY"] {
		t.Error("a change to glog's Doris patch must change unpack:GLOG and only that unpack")
	}
}

// --packages takes the names vars.sh and build-thirdparty.sh use, in any
// case, adds what each needs, and plans no BE or FE.
func TestRealTreePackageNames(t *testing.T) {
	tree, _ := corpusTree(t)
	needTool(t, "clang-16")
	keys := planKeys(t, "--source", tree, "--target", "kunpeng920", "--packages", "BitShuffle,libunixodbc")
	for _, want := range []string{"thirdparty:BITSHUFFLE", "thirdparty:LZ4", "thirdparty:ODBC", "collect", "scan"} {
		if _, ok := keys[want]; !ok {
			t.Errorf("no step %s in %v", want, keys)
		}
	}
	for id := range keys {
		if strings.HasPrefix(id, "build:") || strings.HasPrefix(id, "pgo:") || id == "thirdparty:SNAPPY" {
			t.Errorf("unexpected step %s", id)
		}
	}
	for _, c := range []struct{ pkgs, want string }{
		{"xsimd", "XSIMD cannot be built on its own: build-thirdparty.sh defines no build_xsimd"},
		{"nosuch", `"nosuch" is not a package`},
		{"ragel", "RAGEL cannot be built on its own"},
	} {
		_, errOut, code := run(t, "plan", "--source", tree, "--target", "kunpeng920", "--packages", c.pkgs)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("--packages %s: exit %d %q, want 2 and %q", c.pkgs, code, errOut, c.want)
		}
	}
	// The plan of the whole tree shows what cannot be built instead of running into exit 127.
	out, _, code := run(t, "plan", "--source", tree, "--target", "kunpeng920", "--pgo-profile", writeProfdata(t))
	if code != 0 || !strings.Contains(out, "XSIMD has no build step: build-thirdparty.sh defines no build_xsimd") || strings.Contains(out, "thirdparty:XSIMD") {
		t.Errorf("whole-tree plan: exit %d\n%s", code, out)
	}
	// Its BE needs GCC 11's C++ library, and the sysroot holds GCC 10's:
	// the plan builds the sysroot's C++ runtime first and is buildable.
	if !strings.Contains(out, "runtime:gcc-12") || strings.Contains(out, "unbuildable") || strings.Contains(out, "waive") {
		t.Errorf("the whole-tree plan does not build against the C++ runtime:\n%s", out)
	}
	// A matrix whose sysroot names no runtime: the plan says why it cannot
	// build, and a build of it is refused before anything runs.
	mb, err := os.ReadFile(filepath.Join(repo_(t), "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	noRuntime := filepath.Join(t.TempDir(), "matrix.yaml")
	os.WriteFile(noRuntime, []byte(strings.ReplaceAll(string(mb), "    runtime: gcc-12\n", "")), 0o644)
	out, _, _ = run(t, "plan", "--matrix", noRuntime, "--source", tree, "--target", "kunpeng920", "--pgo-profile", writeProfdata(t))
	const why = "sysroot debian-11-arm64 holds GCC 10's"
	if !strings.Contains(out, why) || !strings.Contains(out, "no C++ runtime new enough") {
		t.Errorf("the whole-tree plan does not say the BE cannot build against the sysroot:\n%s", out)
	}
	pub := filepath.Join(t.TempDir(), "out")
	_, errOut, code := run(t, "build", "--matrix", noRuntime, "--source", tree, "--target", "kunpeng920", "--out", pub, "--be-targets", "src/util/CMakeFiles/Util.dir/md5.cpp.o")
	if code != 2 || !strings.Contains(errOut, why) {
		t.Errorf("building it: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(pub); !os.IsNotExist(err) {
		t.Errorf("a refused build made %s (%v)", pub, err)
	}
}

// writeProfdata makes a real LLVM indexed profile.
func writeProfdata(t *testing.T) string {
	t.Helper()
	needTool(t, "llvm-profdata-16")
	dir := t.TempDir()
	text := filepath.Join(dir, "p.proftext")
	os.WriteFile(text, []byte("# IR level Instrumentation Flag\n:ir\nmain\n# Func Hash:\n1234\n# Num Counters:\n1\n# Counter Values:\n1\n"), 0o644)
	out := filepath.Join(dir, "p.profdata")
	if b, err := exec.Command("llvm-profdata-16", "merge", "-o", out, text).CombinedOutput(); err != nil {
		t.Fatalf("llvm-profdata: %v %s", err, b)
	}
	return out
}

// --pgo-profile is checked before anything runs: exit 2 with what was expected.
func TestPGOProfileValidated(t *testing.T) {
	slow(t, "builds with real compilers")
	needTool(t, "clang-16")
	dir := t.TempDir()
	txt := filepath.Join(dir, "tpch.profdata")
	os.WriteFile(txt, []byte("this is not a profile, just text.\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", "kunpeng920", "--pgo-profile", txt}, "not an LLVM indexed profile"},
		{[]string{"--target", "kunpeng920", "--compiler", "gcc", "--waive-sysroot", "test", "--pgo-profile", writeProfdata(t)}, ".gcda"},
		{[]string{"--target", "kunpeng920", "--pgo-profile", filepath.Join(dir, "missing.profdata")}, "missing.profdata"},
	} {
		args := append([]string{"build", "--out", filepath.Join(dir, "out"), "--cache", filepath.Join(dir, "cache")}, c.args...)
		_, errOut, code := run(t, args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("a refused build wrote its output directory")
	}
	// A real profile passes the check (and the plan records its digest).
	out, errOut, code := run(t, "plan", "--target", "kunpeng920", "--pgo-profile", writeProfdata(t), "-o", "json")
	if code != 0 || !strings.Contains(out, `"profile": "sha256:`) {
		t.Errorf("a real profile: exit %d %s", code, errOut)
	}
}

// build-thirdparty.sh's own prerequisite checks pass on a machine set up by
// install-deps.sh, and the script names every one of them.
func TestDorisPrerequisitesInstalled(t *testing.T) {
	tree, _ := corpusTree(t)
	script, _ := os.ReadFile(filepath.Join(tree, "thirdparty", "build-thirdparty.sh"))
	deps, _ := os.ReadFile(filepath.Join(repo, "scripts", "install-deps.sh"))
	re := regexp.MustCompile(`(?m)^check_prerequest "([^"]+)" "([^"]+)"`)
	ms := re.FindAllStringSubmatch(string(script), -1)
	if len(ms) < 4 {
		t.Fatalf("found %d prerequisite checks in build-thirdparty.sh", len(ms))
	}
	for _, m := range ms {
		cmd := strings.Fields(strings.ReplaceAll(m[1], "${CMAKE_CMD}", "cmake"))[0]
		if _, err := exec.LookPath(cmd); err != nil {
			t.Errorf("%s (%s) is missing: Doris's build-thirdparty.sh stops with %q", cmd, m[2], m[2]+" is missing")
		}
		if !strings.Contains(string(deps), m[2]) {
			t.Errorf("scripts/install-deps.sh does not install %s", m[2])
		}
	}
	for _, tool := range []string{"aclocal", "autoreconf", "patch", "bison", "ninja", "python3", "xz", "unzip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Errorf("%s is not installed", tool)
		}
	}
}

func needTool(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (run scripts/install-deps.sh)", tool)
		}
	}
}

// readelfMachines lists the Machine of every ELF object in dir, by readelf.
func readelfMachines(t *testing.T, dir string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		out, _ := exec.Command("readelf", "-h", p).Output()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "Machine:") {
				counts[strings.TrimSpace(strings.SplitN(l, ":", 2)[1])]++
			}
		}
		return nil
	})
	return counts
}

// neonSize is the size nm gives bitshuffle's NEON bit transpose.
func neonSize(t *testing.T, lib string) int64 {
	t.Helper()
	out, err := exec.Command("aarch64-linux-gnu-nm", "-S", lib).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[3] == "bshuf_trans_bit_elem_NEON" {
			n, _ := strconv.ParseInt(f[1], 16, 64)
			return n
		}
	}
	t.Fatalf("%s has no bshuf_trans_bit_elem_NEON", lib)
	return 0
}

// Doris 2.1.7's own scripts build real packages for ARM targets: the
// objects are for the target (readelf), record the target's flags, use SVE
// only where the CPU has it, and Kunpeng 920's bitshuffle keeps only the
// stubs of its NEON kernels.
func TestRealDorisPackagesCrossBuild(t *testing.T) {
	slow(t, "cross-builds real Doris third-party packages")
	tree, mirror := corpusTree(t)
	needTool(t, "qemu-aarch64", "aarch64-linux-gnu-gcc", "clang-16", "llvm-objdump-16", "byacc", "flex", "automake", "libtoolize", "cmake")
	dir := t.TempDir()
	out, cache := filepath.Join(dir, "out"), filepath.Join(dir, "cache")
	allow := filepath.Join("recipes", "doris-glibc-allow.yaml")
	type result struct{ neon int64 }
	got := map[string]result{}
	// GCC 12's runtime cannot meet any target OS's glibc (see the sysroot
	// tests), so the GCC cross build is made with an explicit waiver.
	for _, c := range []struct {
		target, mtune string
		extra         []string
	}{
		{"kunpeng920", "-mtune=tsv110", []string{"--compiler", "clang"}},
		{"graviton3", "-mtune=neoverse-v1", []string{"--compiler", "gcc", "--waive-sysroot", "testing the GCC cross build"}},
	} {
		seedRuntime(t, cache, c.target)
		args := append([]string{"build", "--source", tree, "--mirror", mirror, "--packages", "bitshuffle",
			"--target", c.target, "--out", out, "--cache", cache, "--allow", allow}, c.extra...)
		stdout, errOut, code := run(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", c.target, code, stdout, errOut)
		}
		pub := filepath.Join(out, "2.1.7-rc01", c.target)
		inst := filepath.Join(pub, "thirdparty", "installed")
		ms := readelfMachines(t, inst)
		if ms["AArch64"] == 0 || len(ms) != 1 {
			t.Errorf("%s: readelf sees machines %v, want only AArch64", c.target, ms)
		}
		lib := filepath.Join(inst, "lib64", "libbitshuffle.a")
		rec, _ := exec.Command("readelf", "-p", ".GCC.command.line", lib).CombinedOutput()
		if !strings.Contains(string(rec), c.mtune) {
			t.Errorf("%s: libbitshuffle.a does not record %s:\n%.500s", c.target, c.mtune, rec)
		}
		if _, err := os.Stat(filepath.Join(inst, "lib64", "liblz4.a")); err != nil {
			t.Errorf("%s: bitshuffle's dependency lz4 was not built: %v", c.target, err)
		}
		got[c.target] = result{neon: neonSize(t, lib)}
		// SVE, by llvm-objdump: only in the Graviton3 build.
		dis, _ := exec.Command("llvm-objdump-16", "-d", "--mattr=+sve", filepath.Join(inst, "lib64", "liblz4.a"), lib).Output()
		sve := regexp.MustCompile(`\bz[0-9]+\.[bhsdq]\b`).FindAllIndex(dis, -1)
		if (c.target == "graviton3") != (len(sve) > 0) {
			t.Errorf("%s: %d SVE instructions", c.target, len(sve))
		}
		// The scan gate agrees (glibc waived by the explicit allow file only).
		if _, errOut, code := run(t, "scan", "--target", c.target, "--allow", allow, pub); code != 0 {
			t.Errorf("%s: scan exit %d\n%s", c.target, code, errOut)
		}
		stdout, _, code = run(t, args...)
		if code != 0 || !strings.Contains(stdout, "up to date") {
			t.Errorf("%s: rebuild: exit %d %s", c.target, code, stdout)
		}
	}
	// The package table agrees with readelf and llvm-objdump: bitshuffle
	// and lz4 built on both, SVE only in the Graviton3 build.
	stdout, errOut, code := run(t, "packages", "--feature", "sve", "-o", "json",
		filepath.Join(out, "2.1.7-rc01", "kunpeng920"), filepath.Join(out, "2.1.7-rc01", "graviton3"))
	if code != 0 {
		t.Fatalf("packages: exit %d\n%s", code, errOut)
	}
	var table pkgstatus.Table
	if err := json.Unmarshal([]byte(stdout), &table); err != nil {
		t.Fatal(err)
	}
	var built []string
	for _, row := range table.Rows {
		// The packages the BE does not use on aarch64 are rows of their
		// own, with the line of Doris's build that shows it.
		if r := row.Results["kunpeng920"]; r != nil && r.Status == pkgstatus.NotUsed {
			if g := row.Results["graviton3"]; g == nil || g.Status != pkgstatus.NotUsed || !regexp.MustCompile(`\(be/[^ ]+\)$|\(be/\S+:\d+\)$`).MatchString(r.Cause) {
				t.Errorf("packages: %s not used: %+v / %+v", row.Package, r, g)
			}
			continue
		}
		built = append(built, row.Package)
		for _, target := range []string{"kunpeng920", "graviton3"} {
			r := row.Results[target]
			if r == nil || r.Status != pkgstatus.Built || r.ELF == 0 || r.Foreign != 0 || r.FlagObjects == 0 || r.AtTarget < 0.99 {
				t.Errorf("packages: %s on %s: %+v", row.Package, target, r)
			} else if (target == "graviton3") != (r.Features["sve"] > 0) {
				t.Errorf("packages: %s on %s counts %d SVE instructions", row.Package, target, r.Features["sve"])
			}
		}
	}
	if strings.Join(built, " ") != "BITSHUFFLE LZ4" || len(table.Rows) < 10 {
		t.Errorf("packages: built %v of %d rows, want BITSHUFFLE and LZ4 built and the recipe's not_used rows", built, len(table.Rows))
	}
	if k, g := got["kunpeng920"].neon, got["graviton3"].neon; k > 16 || g <= 64 {
		t.Errorf("bshuf_trans_bit_elem_NEON is %d bytes on kunpeng920 (want a stub) and %d on graviton3 (want the kernel)", k, g)
	}
}

// A package that falls back to a host tool fails the step that built it,
// naming the package; --keep-going builds the rest and reports it.
func TestRealDorisForeignObjectFailsItsPackage(t *testing.T) {
	slow(t, "cross-builds real Doris third-party packages")
	tree, mirror := corpusTree(t)
	needTool(t, "qemu-aarch64", "aarch64-linux-gnu-gcc", "x86_64-linux-gnu-gcc", "cmake")
	bad := copyCorpusTree(t, tree)
	// bzip2's build, as if its Makefile reached the host's compiler by its
	// full path for one object of libbz2.a.
	edit(t, filepath.Join(bad, "thirdparty", "build-thirdparty.sh"),
		"make -j \"${PARALLEL}\" install PREFIX=\"${TP_INSTALL_DIR}\"\n}\n\n# lzo2",
		"make -j \"${PARALLEL}\" install PREFIX=\"${TP_INSTALL_DIR}\"\n"+
			"    /usr/bin/x86_64-linux-gnu-gcc -B/usr/bin/x86_64-linux-gnu- -O2 -c bzlib.c -o bzlib_host.o\n"+
			"    /usr/bin/x86_64-linux-gnu-ar r \"${TP_INSTALL_DIR}/lib64/libbz2.a\" bzlib_host.o\n}\n\n# lzo2")
	dir := t.TempDir()
	seedRuntime(t, filepath.Join(dir, "cache"), "generic-armv8")
	stdout, errOut, code := run(t, "build", "--source", bad, "--mirror", mirror, "--packages", "bzip,snappy", "--keep-going",
		"--target", "generic-armv8", "--out", filepath.Join(dir, "out"), "--cache", filepath.Join(dir, "cache"))
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, stdout, errOut)
	}
	for _, want := range []string{"1 package(s) failed", "BZIP, step thirdparty:BZIP", "package BZIP installed objects for another machine", "libbz2.a(bzlib_host.o)"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if !regexp.MustCompile(`thirdparty:SNAPPY ran`).MatchString(errOut) {
		t.Errorf("snappy was not built after bzip failed:\n%s", errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "2.1.7-rc01", "generic-armv8")); err == nil {
		t.Error("a build with a failed package was published")
	}
	// The partial build's record says why bzip failed; the table shows it
	// and snappy as built.
	partialOut, partialErr := stdout, errOut
	stdout, errOut, code = run(t, "packages", "-o", "json", filepath.Join(dir, "out", "2.1.7-rc01", "generic-armv8.partial"))
	if code != 0 {
		t.Fatalf("packages: exit %d\n%s\nthe build said:\n%s\n%s", code, errOut, partialOut, partialErr)
	}
	var table pkgstatus.Table
	if err := json.Unmarshal([]byte(stdout), &table); err != nil {
		t.Fatal(err)
	}
	res := map[string]*pkgstatus.Result{}
	for _, row := range table.Rows {
		res[row.Package] = row.Results["generic-armv8"]
	}
	if b := res["BZIP"]; b == nil || b.Status != pkgstatus.Failed || b.Step != "thirdparty:BZIP" || !strings.Contains(b.Cause, "another machine") {
		t.Errorf("packages: BZIP %+v, want failed in thirdparty:BZIP for objects of another machine", b)
	}
	if s := res["SNAPPY"]; s == nil || s.Status != pkgstatus.Built || s.ELF == 0 || s.Foreign != 0 {
		t.Errorf("packages: SNAPPY %+v, want built with target objects", s)
	}
}

// sources lock pins what the mirror has and lists what it lacks; --packages
// limits it; an archive that is not what vars.sh says writes nothing.
func TestRealTreeSourcesLock(t *testing.T) {
	tree, mirror := corpusTree(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "recipes"), 0o755)
	data, _ := os.ReadFile(filepath.Join(repo, "recipes", "doris.yaml"))
	os.WriteFile(filepath.Join(dir, "recipes", "doris.yaml"), data, 0o644)
	abs, _ := filepath.Abs(filepath.Join(repo, "patches"))
	os.Symlink(abs, filepath.Join(dir, "patches"))
	recipe := filepath.Join(dir, "recipes", "doris.yaml")
	lockPath := filepath.Join(dir, "recipes", "doris.lock")
	type lock struct {
		Archives map[string]struct{ SHA256 string }
		Missing  []string
	}
	read := func() lock {
		var l lock
		b, err := os.ReadFile(lockPath)
		if err != nil || json.Unmarshal(b, &l) != nil {
			t.Fatalf("lock: %v\n%s", err, b)
		}
		return l
	}
	stdout, errOut, code := run(t, "sources", "lock", "--source", tree, "--mirror", mirror, "--recipe", recipe, "--packages", "bitshuffle")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, errOut)
	}
	if l := read(); len(l.Archives) != 2 || l.Archives["lz4-1.9.4.tar.gz"].SHA256 == "" || len(l.Missing) != 0 {
		t.Errorf("--packages bitshuffle pinned %v, missing %v; want bitshuffle and lz4", l.Archives, l.Missing)
	}
	stdout, errOut, code = run(t, "sources", "lock", "--source", tree, "--mirror", mirror, "--recipe", recipe)
	if code != 0 || !strings.Contains(errOut, "are not in "+mirror) {
		t.Fatalf("exit %d\n%s%s", code, stdout, errOut)
	}
	l := read()
	// Every archive of the corpus mirror has vars.sh's MD5 (its README).
	inMirror, _ := os.ReadDir(mirror)
	if len(l.Archives) != len(inMirror) || len(l.Missing) < 60 {
		t.Errorf("pinned %d archives, %d missing; want the corpus mirror's %d and the rest listed", len(l.Archives), len(l.Missing), len(inMirror))
	}
	for _, m := range l.Missing {
		if _, ok := l.Archives[m]; ok {
			t.Errorf("%s is both pinned and missing", m)
		}
	}
	// A mirror whose lz4 is another file: refused, the lock stays as it was.
	bad := t.TempDir()
	for _, n := range []string{"bitshuffle-0.5.1.tar.gz", "lz4-1.9.4.tar.gz"} {
		b, _ := os.ReadFile(filepath.Join(mirror, n))
		if n == "lz4-1.9.4.tar.gz" {
			b = append(b, 0)
		}
		os.WriteFile(filepath.Join(bad, n), b, 0o644)
	}
	before, _ := os.ReadFile(lockPath)
	_, errOut, code = run(t, "sources", "lock", "--source", tree, "--mirror", bad, "--recipe", recipe, "--packages", "bitshuffle")
	if code != 1 || !strings.Contains(errOut, "lz4-1.9.4.tar.gz: MD5") {
		t.Errorf("bad archive: exit %d %s", code, errOut)
	}
	if after, _ := os.ReadFile(lockPath); !bytes.Equal(before, after) {
		t.Error("a refused lock changed the lock file")
	}
}

// A development tree (Doris master declares 0.0.0-trunk) is planned as the
// newest series of the matrix, saying so; --doris still chooses.
func TestRealTrunkTreePlansAsNewestSeries(t *testing.T) {
	tree, _ := corpusTree(t)
	needTool(t, "clang-16")
	trunk := copyCorpusTree(t, tree)
	gen := filepath.Join(trunk, "gensrc", "script", "gen_build_version.sh")
	edit(t, gen, "build_version_major=2", "build_version_major=0")
	edit(t, gen, "build_version_minor=1", "build_version_minor=0")
	edit(t, gen, "build_version_patch=7", "build_version_patch=0")
	edit(t, gen, `build_version_rc_version="rc01"`, `build_version_rc_version="trunk"`)
	out, errOut, code := run(t, "plan", "--source", trunk, "--target", "kunpeng920", "--packages", "zlib")
	if code != 0 || !strings.Contains(out, "the tree declares Doris 0.0.0-trunk") || !strings.Contains(out, "it is planned as 4.0.0-trunk, the newest series") ||
		!strings.Contains(out, "doris 4.0.0-trunk") {
		t.Errorf("trunk tree: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = run(t, "plan", "--source", trunk, "--doris", "3.0.2", "--target", "kunpeng920", "--packages", "zlib")
	if code != 0 || strings.Contains(out, "development tree") || !strings.Contains(out, "plan 3.0/kunpeng920") {
		t.Errorf("--doris 3.0.2: exit %d\n%s\n%s", code, out, errOut)
	}
}
