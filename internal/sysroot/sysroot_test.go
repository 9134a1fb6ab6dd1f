package sysroot

import (
	"github.com/dorisarm/dorisarm/internal/unpack"

	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/dorisarm/dorisarm/internal/testproc"
)

// startRegistry runs the real docker-registry on loopback (testproc.Registry).
func startRegistry(t *testing.T) string { return testproc.Registry(t) }

type tent struct {
	name string
	typ  byte
	body string
	link string
	mode int64
}

func dir(n string) tent        { return tent{name: n, typ: tar.TypeDir, mode: 0o755} }
func file(n, body string) tent { return tent{name: n, typ: tar.TypeReg, body: body, mode: 0o644} }
func symlink(n, target string) tent {
	return tent{name: n, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(n, target string) tent {
	return tent{name: n, typ: tar.TypeLink, link: target, mode: 0o644}
}

func tarBytes(t testing.TB, ents []tent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link,
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			io.WriteString(tw, e.body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func layer(t *testing.T, ents ...tent) v1.Layer {
	t.Helper()
	b := tarBytes(t, ents)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// push writes an arm64 image of the layers as repo:tag and returns it by digest.
func push(t *testing.T, addr, repo string, layers ...v1.Layer) (byDigest, byTag string) {
	t.Helper()
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: "linux", Architecture: "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.AppendLayers(img, layers...); err != nil {
		t.Fatal(err)
	}
	tag := addr + "/" + repo + ":v1"
	ref, err := name.ParseReference(tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return addr + "/" + repo + "@" + d.String(), tag
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readlink(t *testing.T, p string) string {
	t.Helper()
	s, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func absent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("%s exists (err %v), want it absent", p, err)
	}
}

// checkLinks: every symlink in the tree is relative and, read lexically from
// where it is, stays inside the tree.
func checkLinks(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink == 0 {
			return err
		}
		target, _ := os.Readlink(p)
		rel, _ := filepath.Rel(root, p)
		if path.IsAbs(target) {
			t.Errorf("%s -> %s is absolute", rel, target)
		}
		if !unpack.StaysInside(path.Dir(filepath.ToSlash(rel)), target) {
			t.Errorf("%s -> %s leaves the root", rel, target)
		}
		return nil
	})
}

func cacheEntries(t *testing.T, cache string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(cache, "sysroots"))
	var out []string
	for _, e := range ents {
		if e.Name() != "index" {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// TestImage builds a two-layer image, pushes it to a real registry and
// unpacks it: whiteouts, an opaque directory, absolute and escaping
// symlinks, writes through symlinks, a hard link, files outside the kept
// paths; then the cache, digest stability and digest checks.
func TestImage(t *testing.T) {
	addr := startRegistry(t)
	outside := t.TempDir() // a symlink in the image points here: nothing may be written to it
	libc := "not an ELF file"
	hostLibc := "/usr/aarch64-linux-gnu/lib/libc.so.6" // glibc 2.36, from the cross compiler's packages
	if b, err := os.ReadFile(hostLibc); err == nil {
		libc = string(b)
	}
	l1 := layer(t,
		dir("usr/"), dir("usr/include/"),
		file("usr/include/stdio.h", "one"),
		file("usr/include/gone.h", "gone"),
		dir("usr/lib/"), dir("usr/lib/aarch64-linux-gnu/"),
		file("usr/lib/aarch64-linux-gnu/libc.so.6", libc),
		tent{name: "usr/lib/aarch64-linux-gnu/ld-2.31.so", typ: tar.TypeReg, body: "ld", mode: 0o755},
		symlink("lib", "usr/lib"),
		dir("lib64/"),
		symlink("lib64/ld-linux-aarch64.so.1", "/lib/aarch64-linux-gnu/ld-2.31.so"),
		dir("etc/"), file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"),
		dir("usr/lib/olddir/"), file("usr/lib/olddir/a", "a"), file("usr/lib/olddir/b", "b"),
		symlink("usr/lib/escape", outside),
		symlink("usr/lib/up", "../../../../../../etc"),
		hardlink("usr/lib/hard.h", "usr/include/stdio.h"),
		dir("usr/share/"), file("usr/share/doc", "doc"),
		tent{name: "usr/lib/nulldev", typ: tar.TypeChar, mode: 0o666},
	)
	l2 := layer(t,
		file("usr/include/.wh.gone.h", ""),
		file("usr/lib/olddir/.wh..wh..opq", ""),
		file("usr/lib/olddir/new", "new"),
		file("usr/include/stdio.h", "two"),
		file("usr/lib/escape/pwned", "pwned"),
		file("usr/lib/up/shadow", "pwned"),
		file("lib/aarch64-linux-gnu/libm.so.6", "m"), // through the lib -> usr/lib symlink
		file("etc/passwd", "changed"),
	)
	ref, tag := push(t, addr, "sysroot/test", l1, l2)
	ctx := context.Background()
	cache := t.TempDir()
	spec := Spec{Name: "test-os", Image: ref}

	start := time.Now()
	sr, err := Ensure(ctx, spec, cache, WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	r := sr.Path
	if sr.Cached || !strings.HasPrefix(filepath.Base(r), "sha256-") || filepath.Base(r) != "sha256-"+strings.TrimPrefix(sr.Digest, "sha256:") {
		t.Errorf("first Ensure: %+v", sr)
	}
	if got := read(t, filepath.Join(r, "usr/include/stdio.h")); got != "two" {
		t.Errorf("stdio.h = %q, want the second layer's", got)
	}
	absent(t, filepath.Join(r, "usr/include/gone.h"))
	if ents, _ := os.ReadDir(filepath.Join(r, "usr/lib/olddir")); len(ents) != 1 || ents[0].Name() != "new" {
		t.Errorf("opaque usr/lib/olddir holds %v, want only new", ents)
	}
	absent(t, filepath.Join(r, "etc"))
	absent(t, filepath.Join(r, "usr/share"))
	absent(t, filepath.Join(r, "usr/lib/nulldev"))
	absent(t, filepath.Join(r, "tmp"))
	if got := readlink(t, filepath.Join(r, "lib")); got != "usr/lib" {
		t.Errorf("lib -> %q", got)
	}
	if got := readlink(t, filepath.Join(r, "lib64/ld-linux-aarch64.so.1")); got != "../lib/aarch64-linux-gnu/ld-2.31.so" {
		t.Errorf("lib64/ld-linux-aarch64.so.1 -> %q, want it relative to the sysroot", got)
	}
	if got := read(t, filepath.Join(r, "lib64/ld-linux-aarch64.so.1")); got != "ld" {
		t.Errorf("the loader through its symlinks = %q", got)
	}
	if got := read(t, filepath.Join(r, "usr/lib/aarch64-linux-gnu/libm.so.6")); got != "m" {
		t.Errorf("write through lib -> usr/lib: %q", got)
	}
	if got := readlink(t, filepath.Join(r, "usr/lib/up")); got != "../../etc" {
		t.Errorf("usr/lib/up -> %q, want it stopped at the root", got)
	}
	if got := readlink(t, filepath.Join(r, "usr/lib/escape")); got != "../.."+outside {
		t.Errorf("usr/lib/escape -> %q, want ../..%s", got, outside)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("a write escaped the sysroot into %s: %v", outside, ents)
	}
	if got := read(t, filepath.Join(r, "usr/lib/hard.h")); got != "one" {
		t.Errorf("hard link = %q, want the first layer's stdio.h", got)
	}
	checkLinks(t, r)
	if st, err := TreeDigest(r); err != nil || st.Digest != sr.Digest || st.Files != sr.Files || st.Size != sr.Size {
		t.Errorf("TreeDigest = %+v, %v; Ensure said %+v", st, err, sr)
	}
	if libc != "not an ELF file" {
		if v, err := GlibcVersion(r); err != nil || v != "2.36" || sr.Glibc != "2.36" || sr.GlibcDefined != "2.36" {
			t.Errorf("GlibcVersion = %q, %v; Sysroot %+v; want 2.36 (the host's cross libc)", v, err, sr)
		}
	}
	t.Logf("first Ensure %v: %s, %d files, %d bytes, glibc %s", first, sr.Digest, sr.Files, sr.Size, sr.Glibc)

	start = time.Now()
	again, err := Ensure(ctx, spec, cache, WithInsecure())
	if err != nil || !again.Cached || again.Digest != sr.Digest || again.Path != sr.Path {
		t.Fatalf("second Ensure: %+v, %v", again, err)
	}
	t.Logf("cached Ensure %v", time.Since(start))

	// Same image, new cache: same digest.
	other, err := Ensure(ctx, spec, t.TempDir(), WithInsecure())
	if err != nil || other.Digest != sr.Digest || other.Cached {
		t.Errorf("Ensure into another cache: %+v, %v; want digest %s", other, err, sr.Digest)
	}

	// The expected digest.
	good := spec
	good.Digest = sr.Digest
	if _, err := Ensure(ctx, good, cache, WithInsecure()); err != nil {
		t.Errorf("right digest: %v", err)
	}
	bad := spec
	bad.Digest = "sha256:" + strings.Repeat("0", 64)
	_, err = Ensure(ctx, bad, t.TempDir(), WithInsecure())
	if !errors.Is(err, ErrDigestMismatch) || !strings.Contains(err.Error(), sr.Digest) || !strings.Contains(err.Error(), "oses.test-os.sysroot") {
		t.Errorf("wrong digest: %v", err)
	}
	bad.Digest = "sha256:abc"
	if _, err := Ensure(ctx, bad, cache, WithInsecure()); err == nil || !strings.Contains(err.Error(), "sha256:<64 hex digits>") {
		t.Errorf("malformed digest: %v", err)
	}

	// By tag: refused unless allowed; allowed, it resolves to the same tree.
	_, err = Ensure(ctx, Spec{Name: "test-os", Image: tag}, cache, WithInsecure())
	if err == nil || !strings.Contains(err.Error(), "not pinned by digest") {
		t.Errorf("tag without WithTagsAllowed: %v", err)
	}
	byTag, err := Ensure(ctx, Spec{Name: "test-os", Image: tag}, cache, WithInsecure(), WithTagsAllowed())
	if err != nil || byTag.Digest != sr.Digest {
		t.Errorf("tag with WithTagsAllowed: %+v, %v", byTag, err)
	}

	// Bounds: the failed builds leave nothing in the cache.
	small := t.TempDir()
	if _, err := Ensure(ctx, spec, small, WithInsecure(), WithMaxBytes(4096)); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "WithMaxBytes") || !strings.Contains(err.Error(), "point matrix.yaml oses.test-os.sysroot at a smaller source") {
		t.Errorf("WithMaxBytes(4096): %v", err)
	}
	if _, err := Ensure(ctx, spec, small, WithInsecure(), WithMaxEntries(5)); !errors.Is(err, ErrLimit) {
		t.Errorf("WithMaxEntries(5): %v", err)
	}
	if got := cacheEntries(t, small); len(got) != 0 {
		t.Errorf("failed Ensures left %v in the cache", got)
	}

	// By the digest of an index holding it and an amd64 image: the arm64 one is picked.
	arm, err := remote.Image(mustRef(t, ref), remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "arm64"}))
	if err != nil {
		t.Fatal(err)
	}
	amd, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: "linux", Architecture: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	if amd, err = mutate.AppendLayers(amd, layer(t, file("usr/include/amd64.h", "x"))); err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	if err := remote.WriteIndex(mustRef(t, addr+"/sysroot/multi:v1"), idx); err != nil {
		t.Fatal(err)
	}
	idig, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	multi, err := Ensure(ctx, Spec{Name: "test-os", Image: addr + "/sysroot/multi@" + idig.String()}, cache, WithInsecure())
	if err != nil || multi.Digest != sr.Digest || !strings.Contains(multi.Source, "(linux/arm64: sha256:") {
		t.Errorf("Ensure by index digest: %+v, %v; want the arm64 image's tree %s", multi, err, sr.Digest)
	}

	// A platform the image is not.
	_, err = Ensure(ctx, spec, t.TempDir(), WithInsecure(), WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}))
	if err == nil || !strings.Contains(err.Error(), "linux/arm64, not linux/amd64") {
		t.Errorf("amd64 wanted from an arm64 image: %v", err)
	}
}

// TestImageTraversal: entries and hard links that leave the root are refused.
func TestImageTraversal(t *testing.T) {
	addr := startRegistry(t)
	ctx := context.Background()
	for i, l := range [][]tent{
		{file("usr/include/ok.h", "ok"), file("../../evil.h", "evil")},
		{file("usr/include/../../../evil.h", "evil")},
		{file("usr/include/ok.h", "ok"), hardlink("usr/include/pw", "../../../etc/passwd")},
	} {
		cache := t.TempDir()
		ref, _ := push(t, addr, fmt.Sprintf("sysroot/evil%d", i), layer(t, l...))
		_, err := Ensure(ctx, Spec{Name: "evil", Image: ref}, filepath.Join(cache, "c"), WithInsecure())
		if !errors.Is(err, ErrUnsafePath) {
			t.Errorf("image %d: %v, want ErrUnsafePath", i, err)
		} else {
			t.Logf("image %d refused: %v", i, err)
		}
		absent(t, filepath.Join(cache, "evil.h"))
		if got := cacheEntries(t, filepath.Join(cache, "c")); len(got) != 0 {
			t.Errorf("image %d left %v in the cache", i, got)
		}
	}
}

// TestUnpackerTar drives the unpacker with tar streams directly.
func TestUnpackerTar(t *testing.T) {
	dirp := t.TempDir()
	root, err := os.OpenRoot(dirp)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	u := newUnpacker(root, DefaultKeep, 1<<20, 100)
	ctx := context.Background()
	if err := u.apply(ctx, bytes.NewReader(tarBytes(t, []tent{file("./usr/include/a.h", "a"), symlink("./usr/include/loop", "loop")})), "t1"); err != nil {
		t.Fatal(err)
	}
	// A write through a symlink loop is an error, not a hang.
	if err := u.apply(ctx, bytes.NewReader(tarBytes(t, []tent{file("usr/include/loop/x.h", "x")})), "t2"); err == nil || !strings.Contains(err.Error(), "too many levels") {
		t.Errorf("write through a loop: %v", err)
	}
	if err := u.apply(ctx, bytes.NewReader(tarBytes(t, []tent{file("./../x", "x")})), "t3"); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("./../x: %v", err)
	}
	if err := u.apply(ctx, bytes.NewReader([]byte("this is not a tar stream, and it is longer than one block "+strings.Repeat("x", 600))), "t4"); err == nil {
		t.Errorf("garbage accepted")
	}
	small := newUnpacker(root, DefaultKeep, 2048, 100)
	if err := small.apply(ctx, bytes.NewReader(tarBytes(t, []tent{file("usr/include/big.h", strings.Repeat("b", 4096))})), "t5"); !errors.Is(err, ErrLimit) {
		t.Errorf("4 KiB over a 100-byte budget: %v", err)
	}
}

func TestSpecErrors(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "x"}, "neither image nor debian"},
		{Spec{Name: "x", Image: "a/b@sha256:" + strings.Repeat("1", 64), Debian: &DebianSpec{}}, "both image and debian"},
		{Spec{Name: "x", Image: "registry.invalid/os:latest"}, "write it as registry.invalid/os@sha256:<digest> in matrix.yaml oses.x.sysroot.image"},
		{Spec{Name: "x", Image: "Not A Ref"}, "fix matrix.yaml oses.x.sysroot.image"},
		{Spec{Name: "x", Debian: &DebianSpec{Suite: "bullseye", Arch: "arm64"}}, "list at least libc6"},
		{Spec{Name: "x", Debian: &DebianSpec{Suite: "bullseye", Arch: "arm64", Packages: []string{"-oDir=/"}}}, `"-oDir=/" is not a package name`},
		{Spec{Name: "x", Debian: &DebianSpec{Suite: "bullseye", Arch: "arm64", Packages: []string{"libc6", "libc6=2.31-13"}}}, "listed twice"},
		{Spec{Name: "x", Debian: &DebianSpec{Suite: "bull seye", Arch: "arm64", Packages: []string{"libc6"}}}, "not a suite name"},
		{Spec{Name: "x", Debian: &DebianSpec{Suite: "bullseye", Arch: "arm64", Packages: []string{"libc6"}, Mirror: "ftp://x"}}, "not an http, https or file URL"},
	} {
		_, err := Ensure(ctx, c.spec, cache)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
	if _, err := Ensure(ctx, Spec{Name: "x", Debian: &DebianSpec{Suite: "bullseye", Arch: "arm64", Packages: []string{"libc6"}}}, cache, WithAptConfigDir(t.TempDir())); err == nil || !strings.Contains(err.Error(), "no Debian archive") {
		t.Errorf("no apt sources: %v", err)
	}
}

func TestMachineMirror(t *testing.T) {
	d := t.TempDir()
	os.MkdirAll(filepath.Join(d, "sources.list.d"), 0o755)
	os.WriteFile(filepath.Join(d, "sources.list"), []byte("# nothing\ndeb [arch=amd64] https://example.org/apt stable-updates main\n"), 0o644)
	os.WriteFile(filepath.Join(d, "sources.list.d/a.list"), []byte("deb https://packages.example.com/apt cloud-sdk main\n"), 0o644)
	os.WriteFile(filepath.Join(d, "sources.list.d/b.list.disabled"), []byte("deb http://wrong.example/debian bookworm main\n"), 0o644)
	os.WriteFile(filepath.Join(d, "sources.list.d/debian.sources"), []byte(`Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
`), 0o644)
	m, err := machineMirror(d)
	if err != nil || m.URI != "http://mirror.example/debian" || m.SignedBy != "/usr/share/keyrings/debian-archive-keyring.gpg" {
		t.Errorf("machineMirror = %+v, %v", m, err)
	}
	if m, err := machineMirror("/etc/apt"); err == nil {
		t.Logf("this machine's Debian archive: %+v", m)
	}
}

// debianSysroot ensures a bullseye arm64 sysroot, skipping the test when the
// mirror cannot be reached.
func debianSysroot(t *testing.T, cache string, pkgs ...string) *Sysroot {
	t.Helper()
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	spec := Spec{Name: "debian-11", Debian: &DebianSpec{Suite: "bullseye", Arch: "arm64", Packages: pkgs}}
	start := time.Now()
	sr, err := Ensure(context.Background(), spec, cache)
	var ae *AptError
	if errors.As(err, &ae) && ae.Unreachable {
		t.Skipf("the Debian mirror cannot be reached: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first Ensure %v: %s, %d files, %d bytes, glibc %s, %s, %v", time.Since(start).Round(time.Millisecond), sr.Digest, sr.Files, sr.Size, sr.Glibc, sr.Source, sr.Packages)
	start = time.Now()
	again, err := Ensure(context.Background(), spec, cache)
	if err != nil || !again.Cached || again.Digest != sr.Digest {
		t.Fatalf("second Ensure: %+v, %v", again, err)
	}
	t.Logf("cached Ensure %v", time.Since(start))
	if v, err := GlibcVersion(sr.Path); err != nil || v != "2.31" || sr.Glibc != "2.31" {
		t.Fatalf("GlibcVersion = %q, %v (Sysroot.Glibc %q), want 2.31", v, err, sr.Glibc)
	}
	// glibc 2.31 added no symbol versions on aarch64: GLIBC_2.30 is its highest.
	if v, err := GlibcDefinedVersion(sr.Path); err != nil || v != "2.30" || sr.GlibcDefined != "2.30" {
		t.Errorf("GlibcDefinedVersion = %q, %v (Sysroot.GlibcDefined %q), want 2.30", v, err, sr.GlibcDefined)
	}
	checkLinks(t, sr.Path)
	for _, p := range []string{"usr/share", "etc"} {
		absent(t, filepath.Join(sr.Path, p))
	}
	return sr
}

var reVer = regexp.MustCompile(`\b(GLIBC|GLIBCXX)_([0-9.]+)\b`)

// needed returns the highest GLIBC_ and GLIBCXX_ versions readelf -V says bin needs.
func needed(t *testing.T, bin string) (glibc, glibcxx string) {
	t.Helper()
	out, err := exec.Command("readelf", "-V", "-W", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf -V %s: %v\n%s", bin, err, out)
	}
	var gv, xv []int
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.Contains(l, "Name:") || !strings.Contains(l, "Flags:") { // the version needs section
			continue
		}
		for _, m := range reVer.FindAllStringSubmatch(l, -1) {
			v, _ := parseVersion(m[2])
			if m[1] == "GLIBC" && compareVersions(v, gv) > 0 {
				gv, glibc = v, m[2]
			}
			if m[1] == "GLIBCXX" && compareVersions(v, xv) > 0 {
				xv, glibcxx = v, m[2]
			}
		}
	}
	return glibc, glibcxx
}

func atMost(v, max string) bool {
	a, _ := parseVersion(v)
	b, _ := parseVersion(max)
	return compareVersions(a, b) <= 0
}

const helloC = `#include <stdio.h>
#include <math.h>
#include <pthread.h>
static void *f(void *a) { return a; }
int main(int argc, char **argv) {
	pthread_t t;
	pthread_create(&t, 0, f, 0);
	pthread_join(t, 0);
	printf("%f\n", sqrt((double)argc));
	return 0;
}
`

const helloCC = `#include <iostream>
#include <memory>
#include <string>
#include <thread>
int main() {
	auto p = std::make_shared<std::string>("x");
	std::thread t([p] { std::cout << *p << std::endl; });
	t.join();
}
`

func compile(t *testing.T, dir, name, src string, cmd ...string) (string, string, error) {
	t.Helper()
	in := filepath.Join(dir, name)
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSuffix(in, filepath.Ext(in)) + fmt.Sprintf("-%d", time.Now().UnixNano())
	var args, libs []string
	for _, a := range cmd[1:] {
		if strings.HasPrefix(a, "-l") {
			libs = append(libs, a)
		} else {
			args = append(args, a)
		}
	}
	args = append(append(args, in, "-o", out), libs...)
	b, err := exec.Command(cmd[0], args...).CombinedOutput()
	return out, string(b), err
}

func have(tools ...string) bool {
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return false
		}
	}
	return true
}

// TestDebianBullseye: bullseye's arm64 glibc and GCC 10 runtime as a
// sysroot, used by clang-16 and by the GCC 12 cross compiler.
func TestDebianBullseye(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads from the Debian mirror")
	}
	sr := debianSysroot(t, t.TempDir(), "libc6", "libc6-dev", "linux-libc-dev", "libgcc-10-dev", "libstdc++-10-dev", "libgcc-s1", "libstdc++6")
	S := sr.Path
	work := t.TempDir()

	if have("clang-16", "readelf") {
		bin, out, err := compile(t, work, "hello.c", helloC, "clang-16", "--target=aarch64-linux-gnu", "--sysroot="+S, "-fuse-ld=lld", "-O2", "-pthread", "-lm")
		if err != nil {
			t.Fatalf("clang-16 C: %v\n%s", err, out)
		}
		if g, _ := needed(t, bin); !atMost(g, "2.31") {
			t.Errorf("clang-16 C program needs GLIBC_%s", g)
		}
		bin, out, err = compile(t, work, "hello.cc", helloCC, "clang++-16", "--target=aarch64-linux-gnu", "--sysroot="+S, "-fuse-ld=lld", "-O2", "-pthread", "-v")
		if err != nil {
			t.Fatalf("clang++-16: %v\n%s", err, out)
		}
		if want := "Selected GCC installation: " + S + "/usr/lib/gcc/aarch64-linux-gnu/10"; !strings.Contains(out, want) {
			t.Errorf("clang++-16 did not pick the sysroot's GCC 10:\n%s", out)
		}
		g, x := needed(t, bin)
		if !atMost(g, "2.31") || !atMost(x, "3.4.28") {
			t.Errorf("clang++-16 C++ program needs GLIBC_%s GLIBCXX_%s", g, x)
		}
		t.Logf("clang++-16 --sysroot: selected the sysroot's GCC 10; needs GLIBC_%s GLIBCXX_%s", g, x)
		bin, out, err = compile(t, work, "hello.cc", helloCC, "clang++-16", "--target=aarch64-linux-gnu", "--sysroot="+S, "-fuse-ld=lld", "-O2", "-pthread", "-static-libstdc++", "-static-libgcc")
		if err != nil {
			t.Fatalf("clang++-16 -static-libstdc++: %v\n%s", err, out)
		}
		g, x = needed(t, bin)
		if !atMost(g, "2.31") || x != "" {
			t.Errorf("clang++-16 -static-libstdc++ needs GLIBC_%s GLIBCXX_%s", g, x)
		}
	}

	if !have("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "readelf") {
		return
	}
	// GCC 12 (Debian's cross compiler) with --sysroot alone: its built-in
	// paths /usr/aarch64-linux-gnu/{include,lib} (glibc 2.36) come before the
	// sysroot's, so the host's glibc leaks in.
	bin, out, err := compile(t, work, "hello.c", helloC, "aarch64-linux-gnu-gcc", "--sysroot="+S, "-O2", "-pthread", "-lm")
	if err != nil {
		t.Logf("aarch64-linux-gnu-gcc --sysroot: %v\n%s", err, out)
	} else {
		g, _ := needed(t, bin)
		t.Logf("aarch64-linux-gnu-gcc --sysroot alone: the program needs GLIBC_%s (the host's glibc 2.36 headers, crt files and libc leak in)", g)
	}
	// With the sysroot's headers, crt files and libraries put first.
	gccDir := "/usr/lib/gcc-cross/aarch64-linux-gnu/12"
	cflags := []string{"--sysroot=" + S, "-nostdinc", "-isystem", gccDir + "/include", "-isystem", S + "/usr/include/aarch64-linux-gnu", "-isystem", S + "/usr/include"}
	ldflags := []string{"-B" + S + "/usr/lib/aarch64-linux-gnu/", "-L" + S + "/lib/aarch64-linux-gnu", "-L" + S + "/usr/lib/aarch64-linux-gnu"}
	bin, out, err = compile(t, work, "hello.c", helloC, append(append(append([]string{"aarch64-linux-gnu-gcc"}, cflags...), ldflags...), "-O2", "-pthread", "-lm")...)
	if err != nil {
		t.Fatalf("aarch64-linux-gnu-gcc with the sysroot first: %v\n%s", err, out)
	}
	if g, _ := needed(t, bin); !atMost(g, "2.31") {
		t.Errorf("aarch64-linux-gnu-gcc with the sysroot first: needs GLIBC_%s", g)
	} else {
		t.Logf("aarch64-linux-gnu-gcc with -nostdinc, -isystem <sysroot>, -B and -L <sysroot>: needs GLIBC_%s", g)
	}

	// C++ with GCC 12's own libstdc++.a (built against glibc 2.36).
	cx12 := "/usr/aarch64-linux-gnu/include/c++/12"
	cxx12 := append([]string{"aarch64-linux-gnu-g++", "--sysroot=" + S, "-nostdinc", "-isystem", cx12, "-isystem", cx12 + "/aarch64-linux-gnu", "-isystem", cx12 + "/backward"}, cflags[2:]...)
	_, out, err = compile(t, work, "hello.cc", helloCC, append(append(cxx12, ldflags...), "-O2", "-pthread", "-static-libstdc++", "-static-libgcc")...)
	undef := map[string]bool{}
	for _, m := range regexp.MustCompile("undefined reference to `([^']+)'").FindAllStringSubmatch(out, -1) {
		undef[m[1]] = true
	}
	t.Logf("g++-12 -static-libstdc++ -static-libgcc against bullseye: err %v, undefined %v", err, keys(undef))
	if err == nil || !undef["__libc_single_threaded"] {
		t.Logf("note: expected GCC 12's libstdc++.a to need __libc_single_threaded (GLIBC_2.32)")
	}
	// C++ with the sysroot's GCC 10 runtime ahead of GCC 12's.
	cx10 := S + "/usr/include/c++/10"
	cxx10 := append([]string{"aarch64-linux-gnu-g++", "--sysroot=" + S, "-nostdinc", "-isystem", cx10, "-isystem", S + "/usr/include/aarch64-linux-gnu/c++/10", "-isystem", cx10 + "/backward"}, cflags[2:]...)
	bin, out, err = compile(t, work, "hello.cc", helloCC, append(append(cxx10, "-L"+S+"/usr/lib/gcc/aarch64-linux-gnu/10"), append(ldflags, "-O2", "-pthread", "-static-libstdc++", "-static-libgcc")...)...)
	if err != nil {
		t.Fatalf("g++-12 with the sysroot's GCC 10 libstdc++: %v\n%s", err, out)
	}
	if g, x := needed(t, bin); !atMost(g, "2.31") || x != "" {
		t.Errorf("g++-12 with the sysroot's libstdc++ 10: needs GLIBC_%s GLIBCXX_%s", g, x)
	} else {
		t.Logf("g++-12 with the sysroot's libstdc++ 10 and libgcc 10, both static: needs GLIBC_%s", g)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestDebianMinimal: libc6, libc6-dev and linux-libc-dev alone. Without a
// GCC installation in the sysroot, clang falls back to the host's GCC 12 (and
// its glibc 2.36 library directory); with compiler-rt it needs none.
func TestDebianMinimal(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads from the Debian mirror")
	}
	sr := debianSysroot(t, t.TempDir(), "libc6", "libc6-dev", "linux-libc-dev")
	if !have("clang-16", "readelf") {
		return
	}
	work := t.TempDir()
	_, out, err := compile(t, work, "hello.c", helloC, "clang-16", "--target=aarch64-linux-gnu", "--sysroot="+sr.Path, "-fuse-ld=lld", "-O2", "-pthread", "-lm")
	t.Logf("clang-16 --sysroot without a GCC installation in it: err %v: %s", err, strings.TrimSpace(lastLines(out, 2)))
	if _, err := os.Stat("/usr/lib/llvm-16/lib/clang/16/lib/linux/clang_rt.crtbegin-aarch64.o"); err != nil {
		t.Log("no arm64 compiler-rt (libclang-rt-16-dev:arm64): skipping the compiler-rt link")
		return
	}
	bin, out, err := compile(t, work, "hello.c", helloC, "clang-16", "--target=aarch64-linux-gnu", "--sysroot="+sr.Path,
		"--gcc-toolchain="+sr.Path+"/usr", "-rtlib=compiler-rt", "--unwindlib=none", "-fuse-ld=lld", "-O2", "-pthread", "-lm")
	if err != nil {
		t.Fatalf("clang-16 with compiler-rt: %v\n%s", err, out)
	}
	if g, _ := needed(t, bin); !atMost(g, "2.31") {
		t.Errorf("needs GLIBC_%s", g)
	}
}

func TestDebianBadPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads from the Debian mirror")
	}
	if !have("apt-get", "dpkg-deb") {
		t.Skip("apt-get or dpkg-deb not installed")
	}
	ctx := context.Background()
	_, err := Ensure(ctx, Spec{Name: "debian-11", Debian: &DebianSpec{Suite: "bullseye", Arch: "arm64", Packages: []string{"libc6", "no-such-package-dorisarm"}}}, t.TempDir())
	var ae *AptError
	if errors.As(err, &ae) && ae.Unreachable {
		t.Skipf("the Debian mirror cannot be reached: %v", err)
	}
	if !errors.As(err, &ae) || ae.Op != "download" || len(ae.Packages) != 1 || ae.Packages[0] != "no-such-package-dorisarm:arm64" ||
		!strings.Contains(err.Error(), "check the suite and package names in matrix.yaml oses.debian-11.sysroot.debian") {
		t.Errorf("unknown package: %v", err)
	}
	t.Logf("unknown package: %v", err)
	_, err = Ensure(ctx, Spec{Name: "debian-11", Debian: &DebianSpec{Suite: "no-such-suite", Arch: "arm64", Packages: []string{"libc6"}}}, t.TempDir())
	if !errors.As(err, &ae) || ae.Op != "update" {
		t.Errorf("unknown suite: %v", err)
	}
	t.Logf("unknown suite: %v", err)
}

// BenchmarkUnpack unpacks a layer of 2000 small files in 40 directories.
func BenchmarkUnpack(b *testing.B) {
	var ents []tent
	for d := 0; d < 40; d++ {
		ents = append(ents, dir(fmt.Sprintf("usr/include/d%d/", d)))
		for f := 0; f < 50; f++ {
			ents = append(ents, file(fmt.Sprintf("usr/include/d%d/f%d.h", d, f), strings.Repeat("x", 2000)))
		}
	}
	data := tarBytes(b, ents)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		d := b.TempDir()
		root, err := os.OpenRoot(d)
		if err != nil {
			b.Fatal(err)
		}
		u := newUnpacker(root, DefaultKeep, DefaultMaxBytes, DefaultMaxEntries)
		if err := u.apply(context.Background(), bytes.NewReader(data), "bench"); err != nil {
			b.Fatal(err)
		}
		root.Close()
	}
}
