package image

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/fault"
)

// rerecord writes the record of the published build dir again from what
// it holds, as the build's gate does (schema 2: links and directories too).
func rerecord(t *testing.T, dir string) {
	t.Helper()
	rec, err := build.ReadRecord(filepath.Join(dir, build.RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, build.RecordFile))
	if rec.Outputs, err = build.DigestTree(dir); err != nil {
		t.Fatal(err)
	}
	rec.Schema = build.RecordSchema
	data, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(dir, build.RecordFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// linkedBuild is a published kunpeng920 build whose be/ holds a link
// inside it (lib64 -> lib) and an empty directory, recorded as the gate
// records them, after change (which may add what the build itself wrote).
func linkedBuild(t *testing.T, change func(be string) error) string {
	t.Helper()
	m, _ := loadData(t)
	out := t.TempDir()
	fakeBuild(t, m, out, "kunpeng920", map[string]string{"be/lib/doris_be": "be", "fe/lib/doris-fe.jar": "fe"})
	dir := build.Dir(out, "2.1.8", "kunpeng920")
	be := filepath.Join(dir, "be")
	if err := os.Symlink("lib", filepath.Join(be, "lib64")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(be, "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if change != nil {
		if err := change(be); err != nil {
			t.Fatal(err)
		}
	}
	rerecord(t, dir)
	return out
}

// beImage is the kunpeng920 doris-be image of the builds under out.
func beImage(t *testing.T, out string) (v1.Image, error) {
	t.Helper()
	m, r := loadData(t)
	bs, err := FindBuilds(out)
	if err != nil {
		return nil, err
	}
	rel, err := Release(m, r, bs, Options{Epoch: time.Unix(1700000000, 0)})
	if err != nil {
		return nil, err
	}
	return byRef(rel)["doris-be:2.1.8-kunpeng920"].Image, nil
}

// layerEntries reads the image's last layer: each entry's name with its
// type flag and link target, or the error reading it.
func layerEntries(img v1.Image) (map[string]string, error) {
	ls, err := img.Layers()
	if err != nil {
		return nil, err
	}
	rc, err := ls[len(ls)-1].Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out[h.Name] = string(h.Typeflag) + " " + h.Linkname
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return out, err
		}
	}
}

// The layer carries what the record lists, links with their targets and
// empty directories included.
func TestLayerCarriesLinksAndDirs(t *testing.T) {
	img, err := beImage(t, linkedBuild(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	got, err := layerEntries(img)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"opt/apache-doris/be/lib64":          string(rune(tar.TypeSymlink)) + " lib",
		"opt/apache-doris/be/log/":           string(rune(tar.TypeDir)) + " ",
		"opt/apache-doris/be/lib/doris_be":   string(rune(tar.TypeReg)) + " ",
		"opt/apache-doris/be/lib/":           string(rune(tar.TypeDir)) + " ",
		"opt/apache-doris/be/":               string(rune(tar.TypeDir)) + " ",
		"opt/apache-doris/":                  string(rune(tar.TypeDir)) + " ",
		"opt/apache-doris/be/lib/libplanted": "",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	if len(got) != 7 {
		t.Errorf("layer entries: %v", got)
	}
}

// A link planted in a published build after the build: image build
// refuses the build (bad input), naming the link, before any image.
func TestImageRefusesPlantedLink(t *testing.T) {
	out := linkedBuild(t, nil)
	be := filepath.Join(build.Dir(out, "2.1.8", "kunpeng920"), "be")
	if err := os.Symlink("/etc/shadow", filepath.Join(be, "lib", "libplanted.so")); err != nil {
		t.Fatal(err)
	}
	_, err := beImage(t, out)
	if err == nil || !strings.Contains(err.Error(), "be/lib/libplanted.so (a link to /etc/shadow) is not in the build record") || !fault.IsInput(err) {
		t.Errorf("got %v", err)
	}
	// Retargeted instead: refused as well.
	os.Remove(filepath.Join(be, "lib", "libplanted.so"))
	os.Remove(filepath.Join(be, "lib64"))
	if err := os.Symlink("/usr/lib64", filepath.Join(be, "lib64")); err != nil {
		t.Fatal(err)
	}
	if _, err := beImage(t, out); err == nil || !strings.Contains(err.Error(), "be/lib64 points to /usr/lib64, the build record says lib") {
		t.Errorf("a retargeted link: %v", err)
	}
}

// A link the build itself wrote (so the record lists it) that is absolute
// or resolves outside the build is refused by image build, naming it; a
// relative one that stays inside the build is carried.
func TestImageRefusesLinksOutOfTheBuild(t *testing.T) {
	for _, c := range []struct {
		name, link, target, want string
	}{
		{"absolute", "lib/libplanted.so", "/etc/shadow", "link be/lib/libplanted.so -> /etc/shadow points to an absolute path"},
		{"climbs out", "lib/libplanted.so", "../../../../../etc/shadow", "link be/lib/libplanted.so -> ../../../../../etc/shadow climbs above the root"},
		// Each alone stays in the build; followed together they leave it.
		{"through a link", "lib/up", "../..", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := linkedBuild(t, func(be string) error {
				if err := os.Symlink(c.target, filepath.Join(be, filepath.FromSlash(c.link))); err != nil {
					return err
				}
				if c.want == "" {
					return os.Symlink("up/../etc", filepath.Join(be, "lib", "conf"))
				}
				return nil
			})
			want := c.want
			if want == "" {
				want = "link be/lib/conf -> up/../etc climbs above the root"
			}
			_, err := beImage(t, out)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "an image must not carry it") || !fault.IsInput(err) {
				t.Errorf("got %v, want %q", err, want)
			}
		})
	}
}

// The layer is what the record lists also when the build changes between
// the check of its record and the layer being read: a file changed then
// fails the layer's reading, naming it.
func TestLayerChecksBytesAsWritten(t *testing.T) {
	out := linkedBuild(t, nil)
	img, err := beImage(t, out)
	if err != nil {
		t.Fatal(err)
	}
	be := filepath.Join(build.Dir(out, "2.1.8", "kunpeng920"), "be")
	if err := os.WriteFile(filepath.Join(be, "lib", "doris_be"), []byte("BE"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := layerEntries(img); err == nil || !strings.Contains(err.Error(), "lib/doris_be changed since it was checked against its build record") {
		t.Errorf("a file changed under the layer: %v", err)
	}
	os.WriteFile(filepath.Join(be, "lib", "doris_be"), []byte("be"), 0o755)
	os.Remove(filepath.Join(be, "lib64"))
	os.Symlink("/usr/lib64", filepath.Join(be, "lib64"))
	if _, err := layerEntries(img); err == nil || !strings.Contains(err.Error(), "lib64 points to /usr/lib64 since it was checked against its build record, which says lib") {
		t.Errorf("a link retargeted under the layer: %v", err)
	}
}
