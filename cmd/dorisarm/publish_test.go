package main

import (
	"archive/tar"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dorisarm/dorisarm/internal/image"

	"github.com/dorisarm/dorisarm/internal/testproc"
)

// startRegistry runs the real docker-registry on loopback (testproc.Registry).
func startRegistry(t *testing.T) string { return testproc.Registry(t) }

type publishReport struct {
	Tags []struct {
		Ref, Digest  string
		Size, Upload int64
	}
	Uploaded int64 `json:"uploaded_bytes"`
	Blobs    int64 `json:"uploaded_blobs"`
}

func publish(t *testing.T, args ...string) publishReport {
	t.Helper()
	out, errOut, code := run(t, append([]string{"publish", "--format", "json", "--epoch", "1700000000", "--base", "scratch"}, args...)...)
	if code != 0 {
		t.Fatalf("publish %v: exit %d\n%s", args, code, errOut)
	}
	var rep publishReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("publish output: %v\n%s", err, out)
	}
	return rep
}

// TestPublishToRealRegistry builds the sample for three targets with the
// real compilers, publishes it to a real docker-registry, reads it back with
// go-containerregistry, re-publishes (0 bytes), and publishes a one-target
// change (only that target's blobs).
func TestPublishToRealRegistry(t *testing.T) {
	slow(t, "builds and publishes to a real docker-registry")
	needBuildTools(t)
	addr, storage := testproc.RegistryStorage(t)
	dir := t.TempDir()
	out, cache := filepath.Join(dir, "out"), filepath.Join(dir, "cache")
	if _, errOut, code := run(t, "build", "--target", "generic-armv8,kunpeng920,x86_64", "--compiler", "gcc", "--waive-sysroot", "GCC 12's C++ runtime needs glibc 2.36", "--out", out, "--cache", cache); code != 0 {
		t.Fatalf("build: %s", errOut)
	}
	repo := addr + "/doris"
	dry := publish(t, "--build", out, "--repo", repo, "--dry-run")
	first := publish(t, "--build", out, "--repo", repo)
	var would int64
	for _, p := range dry.Tags {
		would += p.Upload
	}
	if first.Uploaded == 0 || would == 0 || len(first.Tags) != 5 {
		t.Fatalf("first publish: %+v (dry run would upload %d)", first, would)
	}
	t.Logf("first publish: %d blobs, %d bytes", first.Blobs, first.Uploaded)

	// Read back: the index's platforms, the kunpeng image's annotations and files.
	idx, err := remote.Index(mustRef(t, repo+"/doris-be:2.1.8"))
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	plats := map[string]string{}
	for _, d := range im.Manifests {
		plats[d.Platform.String()] = d.Annotations[image.AnnTarget]
	}
	if plats["linux/arm64/v8"] != "generic-armv8" || plats["linux/amd64"] != "x86_64" {
		t.Errorf("index platforms: %v", plats)
	}
	img, err := remote.Image(mustRef(t, repo+"/doris-be:2.1.8-kunpeng920"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := img.Manifest()
	if m.Annotations[image.AnnCPU] != "tsv110" || m.Annotations[image.AnnPGO] != "true" || !strings.HasPrefix(m.Annotations[image.AnnCompiler], "gcc ") {
		t.Errorf("kunpeng annotations: %v", m.Annotations)
	}
	ls, _ := img.Layers()
	rc, err := ls[len(ls)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	tr := tar.NewReader(rc)
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		found[h.Name] = true
	}
	rc.Close()
	for _, f := range []string{"opt/apache-doris/be/lib/doris_be", "opt/apache-doris/be/lib/libssl.so.3"} {
		if !found[f] {
			t.Errorf("kunpeng layer lacks %s", f)
		}
	}

	again := publish(t, "--build", out, "--repo", repo)
	if again.Uploaded != 0 {
		t.Errorf("re-publishing the unchanged release uploaded %d bytes", again.Uploaded)
	}

	// One target changes (kunpeng920 rebuilt with clang): only its blobs go up.
	if _, errOut, code := run(t, "build", "--target", "kunpeng920", "--compiler", "clang", "--out", out, "--cache", cache); code != 0 {
		t.Fatalf("rebuild: %s", errOut)
	}
	changed := publish(t, "--build", out, "--repo", repo)
	if changed.Uploaded == 0 || changed.Uploaded >= first.Uploaded/2 {
		t.Errorf("one-target change uploaded %d bytes (first publish %d)", changed.Uploaded, first.Uploaded)
	}
	t.Logf("one-target change: %d blobs, %d bytes", changed.Blobs, changed.Uploaded)
	img, _ = remote.Image(mustRef(t, repo+"/doris-be:2.1.8-kunpeng920"))
	m, _ = img.Manifest()
	if !strings.HasPrefix(m.Annotations[image.AnnCompiler], "clang ") {
		t.Errorf("the kunpeng920 tag did not move to the new build: %v", m.Annotations[image.AnnCompiler])
	}

	// A base image in the same registry: recorded by digest, and its layer
	// is mounted across repositories, not uploaded again.
	base, err := random.Image(400000, 1)
	if err != nil {
		t.Fatal(err)
	}
	baseRef := addr + "/base/ubuntu:22.04"
	if err := remote.Write(mustRef(t, baseRef), base); err != nil {
		t.Fatal(err)
	}
	baseDigest, _ := base.Digest()
	noBase := publish(t, "--build", out, "--repo", addr+"/nobase")
	_, errOut, code := run(t, "publish", "--format", "json", "--epoch", "1700000000", "--base", baseRef, "--build", out, "--repo", addr+"/withbase")
	if code != 0 {
		t.Fatalf("publish with base: %s", errOut)
	}
	img, err = remote.Image(mustRef(t, addr+"/withbase/doris-be:2.1.8-kunpeng920"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ = img.Manifest()
	if m.Annotations["org.opencontainers.image.base.digest"] != baseDigest.String() || len(m.Layers) != 2 {
		t.Errorf("base not recorded or not used: %v, %d layers", m.Annotations, len(m.Layers))
	}
	out2, _, _ := run(t, "publish", "--format", "json", "--epoch", "1700000000", "--base", baseRef, "--build", out, "--repo", addr+"/withbase2")
	var withBase publishReport
	json.Unmarshal([]byte(out2), &withBase)
	if d := withBase.Uploaded - noBase.Uploaded; d > 100000 {
		t.Errorf("the base layer was uploaded, not mounted: %d bytes with base, %d without", withBase.Uploaded, noBase.Uploaded)
	}

	keys := signAndVerify(t, repo+"/doris-be:2.1.8", out, 3, 3)

	// Promote the signed index from doris/ to release/: dry run first.
	pub, key := filepath.Join(keys, "cosign.pub"), filepath.Join(keys, "cosign.key")
	dst := addr + "/release/doris-be:2.1.8"
	stdout, errOut, code := run(t, "promote", "--key", pub, repo+"/doris-be:2.1.8", dst)
	if code != 0 || !strings.Contains(stdout, "dry run: nothing written") {
		t.Fatalf("promote dry run: exit %d\n%s%s", code, stdout, errOut)
	}
	if _, err := remote.Head(mustRef(t, dst)); err == nil {
		t.Fatal("the dry run wrote the destination tag")
	}
	os.Setenv("COSIGN_PASSWORD", "demo")
	defer os.Unsetenv("COSIGN_PASSWORD")
	stdout, errOut, code = run(t, "promote", "--key", pub, "--sign-key", key, "--yes", repo+"/doris-be:2.1.8", dst)
	if code != 0 || !strings.Contains(stdout, "promoted ") {
		t.Fatalf("promote: exit %d\n%s%s", code, stdout, errOut)
	}
	src, _ := remote.Head(mustRef(t, repo+"/doris-be:2.1.8"))
	got, _ := remote.Head(mustRef(t, dst))
	if got == nil || got.Digest != src.Digest {
		t.Fatalf("the destination does not hold the source digest: %v", got)
	}
	stdout, _, code = run(t, "verify", "--key", pub, dst)
	// 3 signatures, 3×3 attestations (the index's and its 2 images'), the
	// blobs of 2 images, and the tag.
	if code != 0 || strings.Count(stdout, "ok    ") != 3+9+2+1 {
		t.Errorf("verify at the destination: exit %d\n%s", code, stdout)
	}
	// A per-target image is not the multi-arch release: refused.
	_, errOut, code = run(t, "promote", "--key", pub, "--yes", repo+"/doris-be:2.1.8-x86_64", dst)
	if code != 1 || !strings.Contains(errOut, "the tag 2.1.8 does not name the image doris-be 2.1.8 image for x86_64") {
		t.Errorf("a per-target image to the multi-arch tag: exit %d %s", code, errOut)
	}
	// The release tag is immutable: another digest of the same release
	// (the index published again with another epoch) is refused.
	if _, errOut, code := run(t, "publish", "--build", out, "--repo", repo+"/again", "--epoch", "1700000001", "--base", "scratch"); code != 0 {
		t.Fatalf("publish again: exit %d %s", code, errOut)
	}
	keys2 := signAndVerify(t, repo+"/again/doris-be:2.1.8", out, 3, 3)
	_, errOut, code = run(t, "promote", "--key", filepath.Join(keys2, "cosign.pub"), "--yes", repo+"/again/doris-be:2.1.8", dst)
	if code != 1 || !strings.Contains(errOut, "immutable") {
		t.Errorf("re-pointing a release tag: exit %d %s", code, errOut)
	}

	// A layer altered in the registry's storage: signatures and
	// attestations still verify (they cover the manifest), but verify and
	// promote read every blob and refuse.
	os.Setenv("COSIGN_PASSWORD", "demo") // signAndVerify unset it
	if _, errOut, code := run(t, "sign", "--key", key, "--build", out, repo+"/doris-be:2.1.8-kunpeng920"); code != 0 {
		t.Fatalf("sign kunpeng920: %s", errOut)
	}
	img, err = remote.Image(mustRef(t, repo+"/doris-be:2.1.8-kunpeng920"))
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	ld, _ := layers[len(layers)-1].Digest()
	blob := filepath.Join(storage, "docker/registry/v2/blobs/sha256", ld.Hex[:2], ld.Hex, "data")
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		data[len(data)/2+i] ^= 0xff
	}
	os.WriteFile(blob, data, 0o644)
	stdout, _, code = run(t, "verify", "--key", pub, repo+"/doris-be:2.1.8-kunpeng920")
	if code != 1 || !strings.Contains(stdout, "FAIL  blobs of ") || !strings.Contains(stdout, ld.String()+" the manifest names") {
		t.Errorf("verify of an altered layer: exit %d\n%s", code, stdout)
	}
	relKP := addr + "/release/doris-be:2.1.8-kunpeng920"
	_, errOut, code = run(t, "promote", "--key", pub, "--yes", repo+"/doris-be:2.1.8-kunpeng920", relKP)
	if code != 1 || !strings.Contains(errOut, "altered in storage") {
		t.Errorf("promote of an altered layer: exit %d %s", code, errOut)
	}
	if _, err := remote.Head(mustRef(t, relKP)); err == nil {
		t.Error("the refused promotion wrote its destination tag")
	}
}

// signAndVerify signs and attests ref with a fresh key and checks dorisarm
// verify: every signature and attestation ok with the key, exit 1 with
// another key. want is the number of digests (an index and its manifests),
// attested the number of them with attestations (3 each): those made from
// builds, and an index with platforms made from builds.
func signAndVerify(t *testing.T, ref, out string, want, attested int) (keys string) {
	t.Helper()
	keys = t.TempDir()
	os.Setenv("COSIGN_PASSWORD", "demo")
	defer os.Unsetenv("COSIGN_PASSWORD")
	for _, dir := range []string{keys, filepath.Join(keys, "other")} {
		if _, errOut, code := run(t, "keygen", "--out", dir); code != 0 {
			t.Fatalf("keygen: %s", errOut)
		}
	}
	if _, errOut, code := run(t, "verify", "--key", filepath.Join(keys, "cosign.pub"), ref); code != 1 || !strings.Contains(errOut, "checks failed") {
		t.Errorf("verify before signing: exit %d %s", code, errOut)
	}
	// Signed without attestations: the signatures verify, the attestation checks fail.
	if _, errOut, code := run(t, "sign", "--key", filepath.Join(keys, "cosign.key"), ref); code != 0 {
		t.Fatalf("sign: %s", errOut)
	}
	stdout, _, code := run(t, "verify", "--key", filepath.Join(keys, "cosign.pub"), ref)
	if code != 1 || strings.Count(stdout, "ok    signature of ") != want || strings.Count(stdout, "missing (sign it with dorisarm sign --build)") != 3*attested {
		t.Errorf("verify without attestations: exit %d\n%s", code, stdout)
	}
	stdout, errOut, code := run(t, "sign", "--key", filepath.Join(keys, "cosign.key"), "--build", out, ref)
	if code != 0 || strings.Count(stdout, "signed ") != want || strings.Count(stdout, "attested ") != 3*attested || strings.Contains(stdout+errOut, "demo") {
		t.Fatalf("sign --build: exit %d\n%s%s", code, stdout, errOut)
	}
	stdout, errOut, code = run(t, "verify", "--key", filepath.Join(keys, "cosign.pub"), ref)
	if code != 0 || strings.Count(stdout, "ok    signature of ") != want || strings.Count(stdout, "ok    attestation ") != 3*attested {
		t.Errorf("verify: exit %d\n%s%s", code, stdout, errOut)
	}
	// Another key: every signature and attestation fails, and no manifest's
	// blobs are read (nothing vouches for their sizes), which is a failed
	// check of its own for each signed manifest.
	stdout, _, code = run(t, "verify", "--key", filepath.Join(keys, "other", "cosign.pub"), ref)
	if code != 1 || strings.Count(stdout, "FAIL") != 2*want+3*attested || strings.Count(stdout, "FAIL  blobs of ") != want || strings.Contains(stdout, "ok    blobs of ") {
		t.Errorf("verify with another key: exit %d\n%s", code, stdout)
	}
	return keys
}

func TestPublishBadInput(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
		code int
	}{
		{[]string{"publish", "--build", dir, "--repo", "127.0.0.1:1/doris"}, "holds no builds", 2},
		{[]string{"publish", "--build", dir}, "--repo is required", 2},
		{[]string{"image", "build", "--build", dir, "--out", "/tmp/x"}, "want oci:DIR", 2},
		{[]string{"image", "inspect", "oci:" + dir}, "want oci:DIR:NAME:TAG", 2},
		{[]string{"publish", "--build", dir, "--repo", "r/d", "--password-stdin"}, "needs --username", 2},
		{[]string{"sign", "127.0.0.1:1/doris/x:1"}, "give --key cosign.key", 2},
		{[]string{"sign", "--key", "k", "--keyless", "127.0.0.1:1/doris/x:1"}, "give --key cosign.key", 2},
		{[]string{"sign", "--key", "k", "127.0.0.1:1/doris/x:1"}, "set COSIGN_PASSWORD", 2},
		{[]string{"sign", "--key", "k", "--signature-format", "sigstore", "127.0.0.1:1/doris/x:1"}, `--signature-format "sigstore": give both`, 2},
		{[]string{"promote", "--key", "k.pub", "--sign-key", "k", "--signature-format", "v3", "127.0.0.1:1/a/doris-be:1", "127.0.0.1:1/a/doris-be:2"}, `--signature-format "v3"`, 2},
		{[]string{"verify", "--key", filepath.Join(dir, "none.pub"), "127.0.0.1:1/doris/x:1"}, "none.pub", 2},
		{[]string{"verify", "--key", "k.pub", "Not A Ref"}, "Not A Ref", 2},
		{[]string{"keygen", "--out", dir}, "set COSIGN_PASSWORD", 2},
		{[]string{"promote", "a/b:1", "a/c:1"}, "give --key cosign.pub, or --certificate-identity", 2},
		{[]string{"verify", "--key", "k.pub", "--certificate-identity", "x", "a/b:1"}, "not both", 2},
		{[]string{"promote", "--key", "k.pub", "a/b:1"}, "give SRC and DST, or --file", 2},
		{[]string{"promote", "--key", "k.pub", "--file", filepath.Join(dir, "none.yaml")}, "none.yaml", 2},
	}
	if os.Getenv("SIGSTORE_ID_TOKEN") == "" && os.Getenv("ACTIONS_ID_TOKEN_REQUEST_URL") == "" {
		cases = append(cases, struct {
			args []string
			want string
			code int
		}{[]string{"sign", "--keyless", "127.0.0.1:1/doris/x:1"}, "id-token: write", 2})
	}
	for _, c := range cases {
		_, errOut, code := run(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
