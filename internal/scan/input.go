package scan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// RefScheme marks an input as a registry reference explicitly.
const RefScheme = "docker://"

// inputKind is what a command-line input is.
type inputKind int

const (
	inLayout inputKind = iota
	inRemote
	inDir
	inFile
)

// resolved is a checked input: for files and directories, root is the
// resolved directory that thin-archive members must stay inside.
// judgedKinds is what the scanner judges, for the error that says an input
// held none of it.
const judgedKinds = "it judges ELF programs, libraries and objects, PE and Mach-O images, LLVM bitcode, and jars and ar, tar and zip archives, compressed or not, that hold them"

// nothing says what an input of this kind that held nothing to judge is:
// files of it were read, none of them code the scanner judges.
func (k inputKind) nothing(files int) string {
	switch {
	case (k == inLayout || k == inRemote) && files == 0:
		return "holds no image to scan (is it the right layout or reference?)"
	case k == inLayout || k == inRemote:
		return fmt.Sprintf("holds %d file(s) in its images, none of them code the scanner judges (%s): nothing was checked, so it is not clean either (is it the right image?)", files, judgedKinds)
	case k == inDir && files == 0:
		return "holds no file to scan: nothing was checked (is it the right directory?)"
	case k == inDir:
		return fmt.Sprintf("holds %d file(s), none of them code the scanner judges (%s): nothing was checked, so it is not clean either (is it the right directory?)", files, judgedKinds)
	}
	return fmt.Sprintf("is not code the scanner judges, nor an archive that holds some (%s): nothing was checked, so it is not clean either", judgedKinds)
}

type resolved struct {
	arg, path, root string
	kind            inputKind
}

// resolveInput decides what an input is, before anything is read. A path
// that does not exist is an error unless the argument is clearly an image
// reference (docker://REF, or HOST/REPO with a tag or digest where HOST has
// a dot, a port or is localhost): a typo must not be sent to a registry with
// the user's credentials. Only directories and regular files are read; a
// FIFO or device would block or never end.
func resolveInput(in string) (resolved, error) {
	if strings.HasPrefix(in, "oci:") {
		return resolved{arg: in, path: strings.TrimPrefix(in, "oci:"), kind: inLayout}, nil
	}
	if ref, ok := strings.CutPrefix(in, RefScheme); ok {
		if _, err := name.ParseReference(ref); err != nil {
			return resolved{}, fmt.Errorf("%w %s: not an image reference: %w", ErrInput, in, err)
		}
		return resolved{arg: in, path: ref, kind: inRemote}, nil
	}
	st, err := os.Stat(in) // follows symbolic links: a link to a directory is that directory
	if err != nil {
		if os.IsNotExist(err) && isRegistryRef(in) {
			return resolved{arg: in, path: in, kind: inRemote}, nil
		}
		if os.IsNotExist(err) {
			return resolved{}, fmt.Errorf("%w %s: no such file or directory (an image in a registry is written %sREF or HOST/REPO:TAG)", ErrInput, in, RefScheme)
		}
		return resolved{}, fmt.Errorf("%w %s: %w", ErrInput, in, err)
	}
	real, err := filepath.EvalSymlinks(in)
	if err != nil {
		return resolved{}, fmt.Errorf("%w %s: %w", ErrInput, in, err)
	}
	switch {
	case st.IsDir():
		return resolved{arg: in, path: real, root: real, kind: inDir}, nil
	case st.Mode().IsRegular():
		return resolved{arg: in, path: real, root: filepath.Dir(real), kind: inFile}, nil
	}
	return resolved{}, fmt.Errorf("%w %s: not a regular file or directory (%s); scan reads files, directories, oci:DIR and image references", ErrInput, in, st.Mode().Type())
}

// isRegistryRef: HOST/REPO[:TAG|@DIGEST] with an explicit registry host and
// an explicit tag or digest.
func isRegistryRef(in string) bool {
	host, rest, ok := strings.Cut(in, "/")
	if !ok || rest == "" {
		return false
	}
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return false
	}
	last := rest[strings.LastIndex(rest, "/")+1:]
	if !strings.Contains(rest, "@") && !strings.Contains(last, ":") {
		return false
	}
	_, err := name.ParseReference(in, name.StrictValidation)
	return err == nil
}

// within reports whether p (cleaned, absolute or relative to the same
// base) lies inside root.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
