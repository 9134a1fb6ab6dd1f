package plan

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/source"
)

// corpusTree is Doris 2.1.7's build interface from ../shared/corpus; the
// test is skipped, saying why, where it is absent (a user's clone).
func corpusTree(t *testing.T) string {
	t.Helper()
	tree := filepath.Join(repo, "..", "shared", "corpus", "doris-2.1.7")
	if _, err := os.Stat(filepath.Join(tree, "thirdparty", "vars.sh")); err != nil {
		t.Skipf("no Doris corpus at %s (%v): ../shared/corpus is not part of a clone", tree, err)
	}
	return tree
}

// corpusPlan plans --packages names of the real Doris 2.1.7 tree with the
// stock recipe for kunpeng920.
func corpusPlan(t *testing.T, names ...string) *Plan {
	t.Helper()
	p, err := corpusMake(t, "kunpeng920", names, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCRoaringPinnedOffline: CRoaring 2.1.2's configure downloads
// CPM.cmake unless ROARING_USE_CPM is off; the stock recipe pins it off
// in every CMake configure of the cell (the toolchain file's cache pins).
func TestCRoaringPinnedOffline(t *testing.T) {
	p := corpusPlan(t, "croaringbitmap")
	if !slices.Contains(p.Toolchain.CMakeCache, "ROARING_USE_CPM=OFF") {
		t.Errorf("the plan pins %v, not ROARING_USE_CPM=OFF", p.Toolchain.CMakeCache)
	}
}

// builtPackages plans --packages names of the real Doris 2.1.7 tree with
// the stock recipe and returns the entries of its thirdparty steps in plan
// order.
func builtPackages(t *testing.T, names ...string) []string {
	t.Helper()
	p := corpusPlan(t, names...)
	var out []string
	for _, s := range p.Steps {
		if e, ok := strings.CutPrefix(s.ID, "thirdparty:"); ok {
			out = append(out, e)
		}
	}
	return out
}

// TestPackagesPullDepsInScriptOrder: --packages protobuf builds zlib first
// (the PROTOBUF: [ZLIB] edge), and any subset is built in the order
// build-thirdparty.sh builds the whole set, whatever order vars.sh lists
// the packages in (it lists PROTOBUF before ZLIB) or the user names them.
func TestPackagesPullDepsInScriptOrder(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  []string
	}{
		{[]string{"protobuf"}, []string{"ZLIB", "PROTOBUF"}},
		{[]string{"protobuf", "zlib"}, []string{"ZLIB", "PROTOBUF"}},
		{[]string{"brpc"}, []string{"OPENSSL", "ZLIB", "GFLAGS", "GLOG", "PROTOBUF", "SNAPPY", "LEVELDB", "BRPC"}},
		{[]string{"croaringbitmap", "jemalloc_doris", "leveldb", "openssl"}, []string{"OPENSSL", "SNAPPY", "LEVELDB", "JEMALLOC_DORIS", "CROARINGBITMAP"}},
	} {
		if got := builtPackages(t, c.names...); !slices.Equal(got, c.want) {
			t.Errorf("--packages %s builds %v, want %v", strings.Join(c.names, ","), got, c.want)
		}
	}
}

func TestOrderByScriptKeepsUnnamedAfter(t *testing.T) {
	pkgs := []source.Package{{Entry: "RAGEL"}, {Entry: "B", Build: "b"}, {Entry: "X", Build: "x"}, {Entry: "A", Build: "a"}}
	OrderByScript(pkgs, []string{"a", "b"})
	var got []string
	for _, p := range pkgs {
		got = append(got, p.Entry)
	}
	if want := []string{"A", "B", "RAGEL", "X"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestJemallocHugePageFromTargetOS: jemalloc's LG_HUGEPAGE comes from the
// target OS's page size (patch 0006 passes it to configure), never from the
// build machine's /proc/meminfo: 29 for Kylin's 64 KiB pages, 21 for
// Amazon Linux's 4 KiB and for x86-64, whatever the OS says.
func TestJemallocHugePageFromTargetOS(t *testing.T) {
	for target, want := range map[string]string{"kunpeng920": "29", "graviton3": "21", "x86_64": "21"} {
		p, err := corpusMake(t, target, []string{"jemalloc_doris"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range p.Steps {
			if s.ID == "thirdparty:JEMALLOC_DORIS" {
				for _, e := range s.Env {
					if v, ok := strings.CutPrefix(e, "DORISARM_JEMALLOC_LG_HUGEPAGE="); ok {
						got = append(got, v)
					}
				}
			}
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: DORISARM_JEMALLOC_LG_HUGEPAGE %v, want %s", target, got, want)
		}
		if !slices.ContainsFunc(p.Patches, func(a PatchRef) bool { return strings.Contains(a.ID, "0006-jemalloc-lg-hugepage") }) {
			t.Errorf("%s: patch 0006-jemalloc-lg-hugepage not in the plan", target)
		}
	}
}

// TestSourceDepsNeedTheirPatches: a package that reads another package's
// sources (RAGEL for HYPERSCAN) needs them patched: it needs the source
// package's last patch step, not its unpack (run at once, it could start
// between the two and see half of it). Here bitshuffle, which has a
// patch for kunpeng920, is made a source-only dependency of lz4.
func TestSourceDepsNeedTheirPatches(t *testing.T) {
	in := corpusInputs(t, "kunpeng920", []string{"lz4"}, nil)
	r := *in.Recipe
	r.Thirdparty.BuildNames = maps.Clone(r.Thirdparty.BuildNames)
	r.Thirdparty.BuildNames["BITSHUFFLE"] = []string{}
	r.Thirdparty.Deps = maps.Clone(r.Thirdparty.Deps)
	r.Thirdparty.Deps["LZ4"] = []string{"BITSHUFFLE"}
	in.Recipe = &r
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Step("patch:bitshuffle") == nil {
		t.Fatal("no patch:bitshuffle in the plan: the test needs a source package with a patch")
	}
	needs := p.Step("thirdparty:LZ4").Needs
	if !slices.Contains(needs, "patch:bitshuffle") || slices.Contains(needs, "unpack:BITSHUFFLE") {
		t.Errorf("thirdparty:LZ4 needs %v: want patch:bitshuffle, not unpack:BITSHUFFLE", needs)
	}
}

// TestMySQLReadsBoostSources: build_mysql checks for and copies
// BOOST_SOURCE (boost's headers) and links no boost library, so --packages
// mysql unpacks boost (thirdparty.source_reads) without building it, and
// MySQL's build step waits for the unpacked source, which its tree holds.
func TestMySQLReadsBoostSources(t *testing.T) {
	p := corpusPlan(t, "mysql")
	if got, want := builtPackages(t, "mysql"), []string{"OPENSSL", "ZLIB", "MYSQL"}; !slices.Equal(got, want) {
		t.Errorf("--packages mysql builds %v, want %v", got, want)
	}
	if p.Step("unpack:BOOST") == nil {
		t.Fatal("--packages mysql does not unpack BOOST")
	}
	my := p.Step("thirdparty:MYSQL")
	if my == nil || !slices.Contains(my.Needs, "unpack:BOOST") {
		t.Errorf("thirdparty:MYSQL needs %v, want unpack:BOOST among them", my.Needs)
	}
	if !slices.ContainsFunc(p.Packages, func(pk source.Package) bool { return pk.Entry == "BOOST" }) {
		t.Error("the plan's packages (the build record's) do not list BOOST, whose archive it reads")
	}
}
