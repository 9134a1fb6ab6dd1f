package patch

// Tests of the patch-writing side (ChangesFromPristine, FindPristineArchive)
// on synthetic archives shaped like git archive's and on the real archives of
// the corpus at ../shared/corpus beside the repository.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/testproc"
)

// tarEntry is one header (and, for regular files, content) of a test archive.
type tarEntry struct {
	h    tar.Header
	body string
}

func globalHeader(commit string) tarEntry {
	return tarEntry{h: tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": commit}}}
}

func dirEntry(name string) tarEntry {
	return tarEntry{h: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o775}}
}

func fileEntry(name, body string) tarEntry {
	return tarEntry{h: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o664}, body: body}
}

// writeTgz writes the entries as a .tar.gz, as `git archive | gzip -n` does.
func writeTgz(t *testing.T, path string, entries ...tarEntry) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	mtime := time.Date(2022, 8, 15, 22, 45, 0, 0, time.UTC)
	for _, e := range entries {
		h := e.h
		if h.Typeflag != tar.TypeXGlobalHeader {
			h.ModTime = mtime
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

const commitID = "5ff839680134437dbf4678f3d0c7b371d84f4964"

// TestPAXGlobalHeaderIsMetadata: an archive that starts with git's PAX global
// header (and has another one later, which PAX allows) is read as the tree
// under its single top directory; contiguous files and hard links are files.
func TestPAXGlobalHeaderIsMetadata(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "pkg-1.0.tar.gz")
	writeTgz(t, archive,
		globalHeader(commitID),
		dirEntry("pkg-1.0/"),
		dirEntry("pkg-1.0/lib/"),
		fileEntry("pkg-1.0/lib/a.c", "int a;\nint b;\nint c;\n"),
		tarEntry{h: tar.Header{Typeflag: tar.TypeCont, Name: "pkg-1.0/cont.c", Mode: 0o644}, body: "contiguous\n"},
		tarEntry{h: tar.Header{Typeflag: tar.TypeLink, Name: "pkg-1.0/lib/hard.c", Linkname: "pkg-1.0/lib/a.c"}},
		tarEntry{h: tar.Header{Typeflag: tar.TypeSymlink, Name: "pkg-1.0/link.c", Linkname: "lib/a.c"}},
		globalHeader("second"),
		fileEntry("pkg-1.0/README", "readme\n"),
	)
	// archive/tar hands the global header out of Next like an entry.
	f, _ := os.Open(archive)
	zr, _ := gzip.NewReader(f)
	h, err := tar.NewReader(zr).Next()
	f.Close()
	if err != nil || h.Typeflag != tar.TypeXGlobalHeader || h.Name != "pax_global_header" || h.PAXRecords["comment"] != commitID {
		t.Fatalf("first header: %+v %v", h, err)
	}

	got, err := readPristine(archive)
	if err != nil {
		t.Fatalf("readPristine: %v", err)
	}
	if k := strings.Join(keys(got), " "); k != "README cont.c lib/a.c lib/hard.c" {
		t.Errorf("files %q, want README cont.c lib/a.c lib/hard.c", k)
	}
	if string(got["lib/hard.c"]) != "int a;\nint b;\nint c;\n" || string(got["cont.c"]) != "contiguous\n" {
		t.Errorf("contents: %q", got)
	}
	if top := topDir(archive); top != "pkg-1.0" {
		t.Errorf("topDir %q, want pkg-1.0", top)
	}

	// The unpacked tree beside the archive, as Doris's thirdparty/src has it,
	// with one line changed and a build product added.
	tree := filepath.Join(dir, "pkg-1.0")
	for name, body := range map[string]string{
		"lib/a.c": "int a;\nint B;\nint c;\n", "lib/hard.c": "int a;\nint b;\nint c;\n",
		"cont.c": "contiguous\n", "README": "readme\n", "lib/a.o": "\x7fELF\x00",
	} {
		os.MkdirAll(filepath.Join(tree, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(tree, name), []byte(body), 0o644)
	}
	os.Symlink("lib/a.c", filepath.Join(tree, "link.c"))
	found, err := FindPristineArchive(tree)
	if err != nil || found != archive {
		t.Fatalf("FindPristineArchive: %q %v, want %s", found, err, archive)
	}
	changes, err := ChangesFromPristine(tree, found, DefaultIgnore)
	if err != nil {
		t.Fatalf("ChangesFromPristine: %v", err)
	}
	if len(changes) != 1 || changes[0].Path != "lib/a.c" {
		t.Fatalf("changes %+v, want lib/a.c alone", changes)
	}
	text, err := Compose(Header{AppliesTo: "pkg = 1.0"}, changes)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "-int b;\n+int B;\n") || strings.Contains(string(text), "pax_global_header") {
		t.Errorf("patch:\n%s", text)
	}
}

// TestPristineArchiveSafety: the checks on what an archive may contain hold
// with and without a global header in front.
func TestPristineArchiveSafety(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		entries []tarEntry
		want    string
	}{
		{"two tops", []tarEntry{globalHeader(commitID), fileEntry("a-1/x", "x\n"), fileEntry("b-1/y", "y\n")}, "outside the single top directory a-1/"},
		{"climbs out", []tarEntry{globalHeader(commitID), fileEntry("a-1/x", "x\n"), fileEntry("a-1/../../etc/passwd", "x\n")}, "outside the archive"},
		{"absolute", []tarEntry{fileEntry("/a-1/x", "x\n")}, "outside the archive"},
		{"hard link out", []tarEntry{globalHeader(commitID), fileEntry("a-1/x", "x\n"), {h: tar.Header{Typeflag: tar.TypeLink, Name: "a-1/y", Linkname: "b-1/x"}}}, "points outside the top directory"},
		{"hard link up", []tarEntry{fileEntry("a-1/x", "x\n"), {h: tar.Header{Typeflag: tar.TypeLink, Name: "a-1/y", Linkname: "../etc/passwd"}}}, "outside the archive"},
		{"hard link to nothing", []tarEntry{fileEntry("a-1/x", "x\n"), {h: tar.Header{Typeflag: tar.TypeLink, Name: "a-1/y", Linkname: "a-1/z"}}}, "not an earlier regular file"},
		{"only metadata", []tarEntry{globalHeader(commitID)}, "no entries"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".tar.gz")
		writeTgz(t, p, c.entries...)
		if _, err := readPristine(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}

	// A member that claims more than the bound is refused before it is read.
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": commitID}})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeCont, Name: "big-1/big", Mode: 0o644, Size: maxPristine + 1})
	tw.Flush()
	zw.Write(make([]byte, 4096))
	zw.Close()
	big := filepath.Join(dir, "big.tar.gz")
	os.WriteFile(big, buf.Bytes(), 0o644)
	if _, err := readPristine(big); err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Errorf("size bound: %v", err)
	}
}

// A named pipe named like an archive, given (--pristine) or beside the
// tree, is refused or passed over at once: opening it waited for a writer
// for ever.
func TestPristinePipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pkg-1.0.tar.gz")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(dir, "pkg-1.0")
	os.Mkdir(tree, 0o755)
	done := make(chan error, 1)
	go func() {
		_, err := readPristine(fifo)
		if err == nil || !strings.Contains(err.Error(), "a named pipe") {
			done <- fmt.Errorf("readPristine of a pipe: %v, want it named as one", err)
			return
		}
		if found, err := FindPristineArchive(tree); err == nil {
			done <- fmt.Errorf("FindPristineArchive took the pipe %s", found)
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still blocked on the pipe after 10 s")
	}
}

// TestIgnoreLeavesUpstreamFiles: ignore patterns leave out build products
// (new files), never edits to the pristine copy's own files; build-*/ is for
// directories, so Doris's build-thirdparty.sh is not a build product.
func TestIgnoreLeavesUpstreamFiles(t *testing.T) {
	pristine := writeTree(t, map[string]string{
		"build/cmake/CMakeLists.txt":     "project(lz4)\n",
		"thirdparty/build-thirdparty.sh": "uname -m\n",
		"src/a.c":                        "int a;\n",
	})
	tree := writeTree(t, map[string]string{
		"build/cmake/CMakeLists.txt":       "project(lz4 C)\n",
		"thirdparty/build-thirdparty.sh":   "echo aarch64\n",
		"src/a.c":                          "int a;\n",
		"src/a.o":                          "\x7fELF\x00",
		"build/cmake/CMakeCache.txt":       "CMAKE_BUILD_TYPE:STRING=Release\n",
		"build-aarch64/CMakeCache.txt":     "x\n",
		"src/doris_build/CMakeCache.txt":   "x\n",
		"patched_mark":                     "",
		"thirdparty/build-arm-packages.sh": "new script\n",
		// A checkout's repository is not source (and no patch may touch it).
		".git/config":         "[core]\n",
		".git/hooks/pre-push": "x\n",
		"be/src/clucene/.git": "gitdir: ../../../.git/modules/clucene\n",
	})
	changes, err := ChangesFromPristine(tree, pristine, DefaultIgnore)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.Path)
	}
	want := "build/cmake/CMakeLists.txt thirdparty/build-arm-packages.sh thirdparty/build-thirdparty.sh"
	if strings.Join(got, " ") != want {
		t.Errorf("changes %q, want %q", strings.Join(got, " "), want)
	}
	// A user's pattern without a slash still matches files.
	changes, _ = ChangesFromPristine(tree, pristine, append(DefaultIgnore[:len(DefaultIgnore):len(DefaultIgnore)], "build-arm-*"))
	if len(changes) != 2 {
		t.Errorf("--ignore build-arm-*: %+v", changes)
	}
	// An edited binary file of the pristine copy cannot be ignored away.
	os.WriteFile(filepath.Join(pristine, "logo.bin"), []byte("\x00\x01"), 0o644)
	os.WriteFile(filepath.Join(tree, "logo.bin"), []byte("\x00\x02"), 0o644)
	if _, err := ChangesFromPristine(tree, pristine, append(DefaultIgnore[:len(DefaultIgnore):len(DefaultIgnore)], "*.bin")); err == nil || !strings.Contains(err.Error(), "restore it") {
		t.Errorf("edited binary: %v", err)
	}
}

// untar unpacks an archive with the system tar into dir.
func untarInto(t *testing.T, archive, dir string) {
	t.Helper()
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("tar not installed")
	}
	os.MkdirAll(dir, 0o755)
	if out, err := exec.Command("tar", "-xzf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xzf %s: %v\n%s", archive, err, out)
	}
}

// TestCorpusArchives: each corpus archive reads as exactly the tree GNU tar
// unpacks from it, is found beside that tree, and a one-line edit becomes a
// one-hunk patch that applies cleanly to a fresh unpack.
func TestCorpusArchives(t *testing.T) {
	corpus := testproc.Corpus(t)
	for _, c := range []struct {
		name, file, from, to string
		gitArchive           bool
	}{
		{"lz4-1.9.4", "lib/lz4.h", "#define LZ4_VERSION_MINOR    9", "#define LZ4_VERSION_MINOR    9 /* dorisarm */", true},
		{"snappy-1.1.8", "snappy.cc", "namespace snappy {", "namespace snappy {  // dorisarm", true},
		{"bitshuffle-0.5.1", "src/bitshuffle_core.c", "#include \"bitshuffle_core.h\"", "#include \"bitshuffle_core.h\"  /* dorisarm */", true},
		{"bzip2-1.0.8", "bzlib.c", "#include \"bzlib_private.h\"", "#include \"bzlib_private.h\"  /* dorisarm */", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			archive := filepath.Join(corpus, "mirror", c.name+".tar.gz")
			f, err := os.Open(archive)
			if err != nil {
				t.Fatal(err)
			}
			zr, _ := gzip.NewReader(f)
			h, err := tar.NewReader(zr).Next()
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if isGlobal := h.Typeflag == tar.TypeXGlobalHeader; isGlobal != c.gitArchive {
				t.Fatalf("first entry %q type %q: the corpus is not what this test expects", h.Name, h.Typeflag)
			}

			dir := t.TempDir()
			untarInto(t, archive, dir)
			data, err := os.ReadFile(archive)
			if err != nil {
				t.Fatal(err)
			}
			beside := filepath.Join(dir, c.name+".tar.gz")
			os.WriteFile(beside, data, 0o644)
			tree := filepath.Join(dir, c.name)

			got, err := readPristine(archive)
			if err != nil {
				t.Fatalf("readPristine: %v", err)
			}
			onDisk, err := readTree(tree)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(keys(got), "\n") != strings.Join(keys(onDisk), "\n") {
				t.Errorf("archive reads as %d files, tar unpacks %d", len(got), len(onDisk))
			}
			if found, err := FindPristineArchive(tree); err != nil || found != beside {
				t.Fatalf("FindPristineArchive: %q %v", found, err)
			}
			if changes, err := ChangesFromPristine(tree, archive, DefaultIgnore); err != nil || len(changes) != 0 {
				t.Fatalf("an untouched tree: %d changes, %v", len(changes), err)
			}

			p := filepath.Join(tree, filepath.FromSlash(c.file))
			src, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(src, []byte(c.from)) {
				t.Fatalf("%s lacks %q", c.file, c.from)
			}
			os.Chmod(p, 0o644)
			os.WriteFile(p, bytes.Replace(src, []byte(c.from), []byte(c.to), 1), 0o644)
			changes, err := ChangesFromPristine(tree, archive, DefaultIgnore)
			if err != nil || len(changes) != 1 || changes[0].Path != c.file {
				t.Fatalf("changes %+v %v, want %s alone", changes, err, c.file)
			}
			component, _, _ := strings.Cut(c.name, "-")
			text, err := Compose(Header{AppliesTo: component, Description: "d", Evidence: "e", Author: "t"}, changes)
			if err != nil {
				t.Fatal(err)
			}
			pf := filepath.Join(dir, "patches", component, "0001-x.patch")
			pt, err := Parse(pf, text)
			if err != nil {
				t.Fatalf("parse:\n%s\n%v", text, err)
			}
			fresh := filepath.Join(t.TempDir(), "fresh")
			untarInto(t, archive, fresh)
			res, err := Apply(filepath.Join(fresh, c.name), []*Patch{pt}, Options{Strip: 1, MaxFuzz: 2, DryRun: true})
			if err != nil || !res.OK() || len(res.Hunks) != 1 || res.Hunks[0].Status != Clean {
				t.Errorf("check on a fresh unpack: %+v %v", res, err)
			}
		})
	}
}

// TestCorpusDorisTree: an edit to the 2.1.7 tree's real build-thirdparty.sh
// becomes a patch against the tree itself as the pristine copy.
func TestCorpusDorisTree(t *testing.T) {
	corpus := testproc.Corpus(t)
	pristine := filepath.Join(corpus, "doris-2.1.7")
	if _, err := os.Stat(filepath.Join(pristine, "thirdparty", "build-thirdparty.sh")); err != nil {
		t.Skipf("no doris-2.1.7 tree in the corpus: %v", err)
	}
	tree := filepath.Join(t.TempDir(), "doris")
	if out, err := exec.Command("cp", "-r", pristine, tree).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	if changes, err := ChangesFromPristine(tree, pristine, DefaultIgnore); err != nil || len(changes) != 0 {
		t.Fatalf("a copy: %+v %v", changes, err)
	}
	script := filepath.Join(tree, "thirdparty", "build-thirdparty.sh")
	src, _ := os.ReadFile(script)
	const from, to = `    MACHINE_TYPE="$(uname -m)"
    # Becuase aarch64 don't support avx2, disable it.`, `    MACHINE_TYPE="${DORIS_TARGET_ARCH:-$(uname -m)}"
    # Becuase aarch64 don't support avx2, disable it.`
	if !bytes.Contains(src, []byte(from)) {
		t.Fatalf("build-thirdparty.sh lacks %q", from)
	}
	os.WriteFile(script, bytes.Replace(src, []byte(from), []byte(to), 1), 0o755)
	changes, err := ChangesFromPristine(tree, pristine, DefaultIgnore)
	if err != nil || len(changes) != 1 || changes[0].Path != "thirdparty/build-thirdparty.sh" {
		t.Fatalf("changes %+v %v, want thirdparty/build-thirdparty.sh alone", changes, err)
	}
}
