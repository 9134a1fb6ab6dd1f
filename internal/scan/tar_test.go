package scan

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTarMetadataAndContiguousMembers: a release archive made by git archive
// starts with a PAX global header ('g', named pax_global_header, holding the
// commit id). It is metadata, not a member; a contiguous file ('7') is a
// regular file and is scanned like one.
func TestTarMetadataAndContiguousMembers(t *testing.T) {
	obj := x86Object(t)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range []struct {
		h    tar.Header
		data []byte
	}{
		{tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "5ff839680134437dbf4678f3d0c7b371d84f4964"}}, nil},
		{tar.Header{Typeflag: tar.TypeDir, Name: "pkg-1.0/", Mode: 0o755}, nil},
		{tar.Header{Typeflag: tar.TypeCont, Name: "pkg-1.0/lib/x86.o", Mode: 0o644, Size: int64(len(obj))}, obj},
	} {
		if err := tw.WriteHeader(&e.h); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.data)
	}
	tw.Close()
	gz.Close()
	tgz := filepath.Join(t.TempDir(), "pkg-1.0.tar.gz")
	os.WriteFile(tgz, buf.Bytes(), 0o644)

	r := scan(t, policy(t, "kunpeng920"), tgz)
	if !hasViolation(r, KindForeignArch, "pkg-1.0.tar.gz!/pkg-1.0/lib/x86.o") {
		t.Errorf("the contiguous member was not scanned: %+v", r.Findings)
	}
	for _, f := range r.Files {
		if strings.Contains(f.Path, "pax_global_header") {
			t.Errorf("the global header was scanned as a file: %+v", f)
		}
	}
	for _, f := range r.Findings {
		if strings.Contains(f.Path, "pax_global_header") || f.Kind == KindUnreadable {
			t.Errorf("finding: %+v", f)
		}
	}
}
