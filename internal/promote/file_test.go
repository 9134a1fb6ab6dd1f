package promote

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/registry"
)

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "promotions.yaml")
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	good := write("promotions:\n  - source: 127.0.0.1:5000/staging/doris-be@sha256:" + strings.Repeat("a", 64) + "\n    tags: [127.0.0.1:5000/release/doris-be:2.1.8, 127.0.0.1:5000/release/doris-be:latest]\n")
	ps, err := LoadFile(good, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || len(ps[0].Dst) != 2 || ps[0].Dst[1].TagStr() != "latest" || ps[0].Src.DigestStr() != "sha256:"+strings.Repeat("a", 64) {
		t.Errorf("loaded %+v", ps[0])
	}
	for _, c := range []struct{ text, want string }{
		{"promotions:\n  - source: r.example/doris-be:2.1.8-rc1\n    tags: [r.example/release/doris-be:2.1.8]\n", "promotions.yaml:2:13: source \"r.example/doris-be:2.1.8-rc1\" must name a digest"},
		{"promotions:\n  - source: r.example/a@sha256:" + strings.Repeat("b", 64) + "\n    tags: [r.example:5000/release/doris-be]\n", "promotions.yaml:3:11: destination \"r.example:5000/release/doris-be\" must be REPO:TAG"},
		{"promotions:\n  - source: r.example/a@sha256:" + strings.Repeat("b", 64) + "\n", "tags: at least one destination tag"},
		{"promotions:\n  - sourse: x\n", "sourse"},
		{"promotions: []\n", "at least one entry"},
	} {
		if _, err := LoadFile(write(c.text), registry.Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
	if _, err := LoadFile(filepath.Join(dir, "none.yaml"), registry.Options{}); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("missing file: %v", err)
	}
}
