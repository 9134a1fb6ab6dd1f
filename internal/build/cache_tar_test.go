package build

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestUntarMetadataAndContiguous: a PAX global header (which git archive
// writes first) restores nothing; a contiguous file ('7') is a regular file;
// an entry that climbs out of the tree is still refused.
func TestUntarMetadataAndContiguous(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "5ff839680134437dbf4678f3d0c7b371d84f4964"}})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "lib/", Mode: 0o755})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeCont, Name: "lib/libx.a", Mode: 0o644, Size: 5})
	tw.Write([]byte("!<ar>"))
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/x", Mode: 0o755, Size: 2})
	tw.Write([]byte("#!"))
	tw.Close()
	root := t.TempDir()
	if err := untar(bytes.NewReader(buf.Bytes()), openRoot(t, root)); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(root, "lib/libx.a")); err != nil || string(data) != "!<ar>" {
		t.Errorf("contiguous file: %q %v", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(root, "bin/x")); err != nil || string(data) != "#!" {
		t.Errorf("regular file: %q %v", data, err)
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 2 {
		t.Errorf("restored %v, want bin and lib only", ents)
	}

	buf.Reset()
	tw = tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "x"}})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeCont, Name: "../escape", Mode: 0o644})
	tw.Close()
	if err := untar(bytes.NewReader(buf.Bytes()), openRoot(t, t.TempDir())); err == nil {
		t.Error("an entry outside the tree was restored")
	}
}

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
