package tuf

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sigstore's public-good TUF repository: its mirror and the initial root
// a first run trusts (data/README.md says where they come from).
var (
	//go:embed data/sigstore-root.json
	sigstoreRoot []byte
	//go:embed data/sigstore-mirror.txt
	sigstoreMirror string
)

// TrustedRootTarget is the target holding Sigstore's trusted root.
const TrustedRootTarget = "trusted_root.json"

// Sigstore returns the options for Sigstore's public-good repository,
// cached under $TUF_ROOT, else ~/.sigstore/root (where cosign and
// sigstore-go cache it too), in a directory named after the mirror.
func Sigstore() (Options, error) {
	base := os.Getenv("TUF_ROOT")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Options{}, fmt.Errorf("no home directory for the TUF cache (%v): set $TUF_ROOT to a writable directory", err)
		}
		base = filepath.Join(home, ".sigstore", "root")
	}
	mirror := strings.TrimSpace(sigstoreMirror)
	return Options{Mirror: mirror, Root: sigstoreRoot, CacheDir: filepath.Join(base, mirrorDir(mirror))}, nil
}

// mirrorDir names a mirror's cache directory: the URL without its scheme,
// "/" and ":" made "-", lower case (the layout sigstore-go uses, so that
// both share one cache).
func mirrorDir(mirror string) string {
	s := strings.TrimPrefix(strings.TrimPrefix(mirror, "https://"), "http://")
	s = strings.NewReplacer("/", "-", ":", "-").Replace(s)
	return strings.ToLower(s)
}
