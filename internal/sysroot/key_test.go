package sysroot

import (
	"context"
	"os"
	"testing"

	"github.com/dorisarm/dorisarm/internal/memo"
)

// Key names a sysroot by what it is made from, without making it or
// reaching its source: nothing is written to the cache, an unreachable
// mirror or registry does not matter, and a changed pin or cap changes it.
func TestKeyWithoutMaking(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	deb := func(pkgs ...string) Spec {
		return Spec{Name: "t", Debian: &DebianSpec{Suite: "bullseye", Arch: "arm64", Packages: pkgs, Mirror: "http://deb.invalid/debian"}}
	}
	key := func(s Spec, opts ...Option) string {
		t.Helper()
		k, err := Key(ctx, s, cache, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a := key(deb("libc6", "libc6-dev"))
	if a != key(deb("libc6", "libc6-dev")) {
		t.Error("the same spec gave two keys")
	}
	if a == key(deb("libc6=2.31-13+deb11u11", "libc6-dev")) {
		t.Error("pinning a package did not change the key")
	}
	img := "registry.invalid/sysroots/debian@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if i := key(Spec{Name: "t", Image: img}); i == a || i == key(Spec{Name: "t", Image: img[:len(img)-1] + "0"}) {
		t.Error("an image sysroot's key does not follow its digest")
	}
	if _, err := ToolsFor("aarch64-linux-gnu"); err == nil {
		m := memo.Dir(t.TempDir())
		capped := deb("libc6", "libc6-dev")
		capped.Glibc, capped.Triple = "2.17", "aarch64-linux-gnu"
		c := key(capped, WithMemo(m))
		if c == a || c != key(capped, WithMemo(m)) {
			t.Error("a glibc cap does not change the key, or the remembered binutils answer another")
		}
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("Key wrote to the cache: %v", entries)
	}
}
