package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The real Doris BE is not in ../shared (its source is hundreds of MB); these
// tests build part of it through dorisarm when pointed at one:
//
//	DORISARM_DORIS_BE_SRC   a Doris 2.1 tree with its BE source and submodules
//	                        (be/src/clucene, be/src/apache-orc)
//	DORISARM_THIRDPARTY_BASE  an aarch64 third-party install holding what the
//	                        BE's configure and the units below need
//	                        (scripts/be-slice-base.sh OUT makes one: OUT/installed)
//	DORISARM_CACHE          optional: a step cache that already holds the C++
//	                        runtime (runtimes.gcc-12), to skip rebuilding it
//	JAVA_HOME               a JDK (the BE compiles JNI against its include/)
//
// make test-real-be runs them; without the variables they skip.
func realBE(t *testing.T) (tree, base string) {
	t.Helper()
	tree, base = os.Getenv("DORISARM_DORIS_BE_SRC"), os.Getenv("DORISARM_THIRDPARTY_BASE")
	if tree == "" || base == "" {
		t.Skip("set DORISARM_DORIS_BE_SRC (a Doris 2.1 tree with its BE source) and DORISARM_THIRDPARTY_BASE (an aarch64 third-party install) to build a real BE slice; see make test-real-be")
	}
	if _, err := os.Stat(filepath.Join(tree, "be", "src", "util", "murmur_hash3.cpp")); err != nil {
		t.Fatalf("DORISARM_DORIS_BE_SRC=%s holds no BE source: %v", tree, err)
	}
	if os.Getenv("JAVA_HOME") == "" {
		t.Fatal("JAVA_HOME is not set: the BE compiles JNI against $JAVA_HOME/include")
	}
	needTool(t, "clang-16", "cmake", "ninja", "protoc", "thrift", "readelf")
	return tree, base
}

// beSliceObjects are small units of three BE libraries and one of clucene's
// TurboPFor, whose CMakeLists.txt sets its own -march (patch 0004).
var beSliceObjects = []string{
	// Units of scripts/be-slice-units-2.1.txt (md5.cpp fails against that
	// base's OpenSSL 3 headers: MD5_Init is deprecated, and -Werror).
	"src/util/CMakeFiles/Util.dir/slice.cpp.o",
	"src/util/CMakeFiles/Util.dir/errno.cpp.o",
	"src/olap/CMakeFiles/Olap.dir/rowset/segment_v2/bitshuffle_page.cpp.o",
	"src/clucene/src/ext/for/CMakeFiles/ic.dir/v8.c.o",
}

// lastMarch is the last -march in a command line.
func lastMarch(cmdline string) string {
	m := regexp.MustCompile(`-march=(\S+)`).FindAllStringSubmatch(cmdline, -1)
	if m == nil {
		return ""
	}
	return m[len(m)-1][1]
}

// buildBESlice builds beSliceObjects for kunpeng920 with recipe and returns
// the published directory and the flag read-back's verdict of each object
// (dorisarm scan -o json of it).
func buildBESlice(t *testing.T, tree, base, recipe string) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	// Against the target OS's sysroot and the C++ runtime the plan adds
	// (runtimes.gcc-12): no waiver. DORISARM_CACHE, when set, is a step
	// cache that already holds the runtime (built once per ISA, minutes).
	cache := os.Getenv("DORISARM_CACHE")
	if cache == "" {
		cache = filepath.Join(dir, "cache")
	}
	args := []string{"build", "--source", tree, "--target", "kunpeng920", "--compiler", "clang", "--thirdparty-base", base, "--out", out, "--cache", cache,
		"--be-targets", strings.Join(beSliceObjects, ",")}
	if recipe != "" {
		// Without the -march patches the plan refuses the tree's fixed
		// -march (be/CMakeLists.txt) unless told to build it so.
		args = append(args, "--recipe", recipe, "--accept-lost-tuning", "TestRealBESliceFlags: the read-back must call every object lost")
	}
	stdout, errOut, code := run(t, args...)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s\n%s", code, stdout, errOut)
	}
	pub := filepath.Join(out, "2.1.7-rc01", "kunpeng920")
	rec, err := os.ReadFile(filepath.Join(pub, "dorisarm-build.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(rec)), "waive") {
		t.Errorf("the build record names a waiver:\n%.2000s", rec)
	}
	stdout, errOut, _ = run(t, "scan", "--target", "kunpeng920", "-o", "json", filepath.Join(pub, "be-slice"))
	var rep struct {
		Files []struct {
			Path  string `json:"path"`
			Flags *struct {
				Verdict string `json:"verdict"`
			} `json:"flags"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("scan -o json: %v\n%s", err, errOut)
	}
	verdicts := map[string]string{}
	for _, o := range beSliceObjects {
		for _, f := range rep.Files {
			if strings.HasSuffix(f.Path, o) && f.Flags != nil {
				verdicts[o] = f.Flags.Verdict
			}
		}
	}
	return pub, verdicts
}

// TestRealBESliceFlags builds real BE units for kunpeng920 twice: with the
// stock recipe every object carries the target's -march last (read with
// readelf, not by dorisarm) and the read-back says all are at target; with
// the BE-march patch left out, Doris's own -march=armv8-a+crc wins in every
// object and the read-back says lost tuning for each.
func TestRealBESliceFlags(t *testing.T) {
	slow(t, "configures and compiles part of the real Doris BE, twice")
	tree, base := realBE(t)
	want := "armv8.2-a+crypto+fp16+dotprod+fp16fml" // matrix.yaml: kunpeng920's -march
	check := func(pub string, want map[bool]string) {
		t.Helper()
		for _, o := range beSliceObjects {
			wantMarch := want[strings.Contains(o, "/clucene/")]
			obj := filepath.Join(pub, "be-slice", o)
			h, err := exec.Command("readelf", "-h", obj).CombinedOutput()
			if err != nil || !strings.Contains(string(h), "AArch64") {
				t.Errorf("%s: not an AArch64 object (%v):\n%.300s", o, err, h)
			}
			rec, _ := exec.Command("readelf", "-p", ".GCC.command.line", obj).CombinedOutput()
			if got := lastMarch(string(rec)); got != wantMarch {
				t.Errorf("%s: the last -march recorded is %q, want %q:\n%.800s", o, got, wantMarch, rec)
			}
		}
	}

	pub, verdicts := buildBESlice(t, tree, base, "")
	check(pub, map[bool]string{true: want, false: want})
	for _, o := range beSliceObjects {
		if verdicts[o] != "target" {
			t.Errorf("stock recipe: the read-back says %s is %q, want target", o, verdicts[o])
		}
	}
	var cc []struct{ Command, File string }
	b, _ := os.ReadFile(filepath.Join(pub, "be-slice", "compile_commands.json"))
	if err := json.Unmarshal(b, &cc); err != nil || len(cc) < 1000 {
		t.Fatalf("compile_commands.json: %d entries, %v", len(cc), err)
	}
	// Every BE unit ends with the target's -march, or names none (the
	// wrapper's, first, stands: clucene and apache-orc's own units).
	for _, c := range cc {
		if m := lastMarch(c.Command); strings.Contains(c.File, "/be/src/") && m != "" && m != want {
			t.Errorf("%s compiles with -march=%s last", c.File, m)
			break
		}
	}

	// The same slice without the patches that make the BE's -march (and
	// clucene's) come from the build.
	dir := t.TempDir()
	patches := filepath.Join(dir, "patches")
	if err := os.CopyFS(patches, os.DirFS(filepath.Join(repo, "patches"))); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"0002-be-march-from-build.patch", "0004-clucene-for-march-from-build.patch"} {
		if err := os.Remove(filepath.Join(patches, "doris", p)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := os.ReadFile(filepath.Join(repo, "recipes", "doris.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := filepath.Join(dir, "recipes", "doris.yaml")
	os.MkdirAll(filepath.Dir(recipe), 0o755)
	if err := os.WriteFile(recipe, r, 0o644); err != nil {
		t.Fatal(err)
	}
	if lock, err := os.ReadFile(filepath.Join(repo, "recipes", "doris.lock")); err == nil {
		os.WriteFile(filepath.Join(dir, "recipes", "doris.lock"), lock, 0o644)
	}
	pub, verdicts = buildBESlice(t, tree, base, recipe)
	check(pub, map[bool]string{true: "armv8-a", false: "armv8-a+crc"})
	for _, o := range beSliceObjects {
		if verdicts[o] != "lost" {
			t.Errorf("without the march patches: the read-back says %s is %q, want lost", o, verdicts[o])
		}
	}
}
