package build

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
)

// RecordSchema is the schema of the records this dorisarm writes. Schema 1
// listed regular files only; 2 lists every entry of the output: files
// (with their modes), symbolic links (with their targets) and directories.
const RecordSchema = 2

// Types of output entries besides regular files (OutputFile.Type "").
const (
	TypeLink = "link"
	TypeDir  = "dir"
)

// OutputFile is one entry of a build's output: a regular file with its
// size and digest, a symbolic link with its target, or a directory. Mode
// is the permission bits (octal, as an image layer carries them); a
// schema 1 record has none.
type OutputFile struct {
	Path   string `json:"path"`
	Type   string `json:"type,omitempty"`
	Target string `json:"target,omitempty"`
	Mode   string `json:"mode,omitempty"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// kind names the entry's type in messages.
func (o OutputFile) kind() string {
	switch o.Type {
	case "":
		return "file"
	case TypeDir:
		return "directory"
	case TypeLink:
		return "link"
	}
	return fmt.Sprintf("%q", o.Type)
}

// String is the entry as messages name it: a directory with a slash, a
// link with its target.
func (o OutputFile) String() string {
	switch o.Type {
	case TypeDir:
		return o.Path + "/"
	case TypeLink:
		return o.Path + " -> " + o.Target
	}
	return o.Path
}

// DigestTree lists every entry under root by path relative to root,
// sorted: regular files with their modes, sizes and SHA-256, symbolic
// links with their targets, directories with their modes. Anything else
// (a pipe, a socket, a device) is an error naming it: a build publishes
// files, links and directories only.
func DigestTree(root string) ([]OutputFile, error) {
	var out []OutputFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		o, err := Describe(p, filepath.ToSlash(rel), info)
		if err == nil && o.Type == "" {
			o.SHA256, err = fileSHA256(p, o.Size)
		}
		out = append(out, o)
		return err
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// Describe is the record entry of the file at p (rel, its path in the
// output) as info says, without a regular file's digest.
func Describe(p, rel string, info fs.FileInfo) (OutputFile, error) {
	o := OutputFile{Path: rel}
	mode := fmt.Sprintf("%04o", info.Mode().Perm())
	switch t := info.Mode().Type(); {
	case t == 0:
		o.Mode, o.Size = mode, info.Size()
	case t == fs.ModeDir:
		o.Type, o.Mode = TypeDir, mode
	case t == fs.ModeSymlink:
		target, err := os.Readlink(p)
		if err != nil {
			return o, err
		}
		o.Type, o.Target = TypeLink, target
	default:
		return o, fmt.Errorf("%s is a %s: a build's output holds files, directories and links only", rel, typeName(t))
	}
	return o, nil
}

// typeName names a file type that is not a file, directory or link.
func typeName(t fs.FileMode) string {
	switch {
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "device"
	}
	return "file of mode " + t.String()
}

// fileSHA256 hashes the regular file at p, which must still be size
// bytes long and still not a link.
func fileSHA256(p string, size int64) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", err
	}
	if n != size {
		return "", fmt.Errorf("%s changed while it was read", p)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Entries is what the record says the output holds. A schema 1 record
// listed regular files only: its output holds those, the directories
// they are in and nothing else (no link, no empty directory).
func (r *Record) Entries() []OutputFile {
	if r.Schema >= 2 {
		return r.Outputs
	}
	out := append([]OutputFile{}, r.Outputs...)
	dirs := map[string]bool{}
	for _, o := range r.Outputs {
		for d := path.Dir(o.Path); d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			out = append(out, OutputFile{Path: d, Type: TypeDir})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Mismatch says how got differs from want, the record's entry at the
// same path, or "" when it does not. A mode or digest the record lacks
// (schema 1) or got lacks (Describe's, not yet read) is not compared.
func Mismatch(want, got OutputFile) string {
	switch {
	case want.Type != got.Type:
		return fmt.Sprintf("%s is a %s, the build record says a %s", got, got.kind(), want.kind())
	case want.Type == TypeLink && want.Target != got.Target:
		return fmt.Sprintf("%s points to %s, the build record says %s", got.Path, got.Target, want.Target)
	case want.Mode != "" && got.Mode != "" && want.Mode != got.Mode:
		return fmt.Sprintf("%s has mode %s, the build record says %s", got, got.Mode, want.Mode)
	case want.Type != "":
		return ""
	case want.SHA256 != "" && got.SHA256 != "" && want.SHA256 != got.SHA256:
		return fmt.Sprintf("%s changed since it was built (sha256 %s, the record says %s)", got.Path, got.SHA256, want.SHA256)
	case want.Size != got.Size:
		return fmt.Sprintf("%s changed since it was built (%d bytes, the record says %d)", got.Path, got.Size, want.Size)
	}
	return ""
}

// checkEntries compares what dir holds (got, DigestTree's) with what rec
// lists, leaving out the record itself.
func (r *Record) checkEntries(dir string, got []OutputFile) error {
	want := map[string]OutputFile{}
	for _, o := range r.Entries() {
		switch o.Type {
		case "", TypeDir, TypeLink:
		default:
			return fmt.Errorf("%s: the build record lists %s as a %q, which is no type of output entry", dir, o.Path, o.Type)
		}
		want[o.Path] = o
	}
	for _, g := range got {
		if g.Path == RecordFile {
			continue
		}
		w, ok := want[g.Path]
		if !ok {
			return fmt.Errorf("%s: %s is not in the build record%s; rebuild with dorisarm build", dir, unlisted(g), r.schemaNote(g))
		}
		if m := Mismatch(w, g); m != "" {
			return fmt.Errorf("%s: %s; rebuild with dorisarm build", dir, m)
		}
		delete(want, g.Path)
	}
	missing := make([]string, 0, len(want))
	for p := range want {
		missing = append(missing, p)
	}
	sort.Strings(missing)
	for _, p := range missing {
		return fmt.Errorf("%s: %s is in the build record but missing; rebuild with dorisarm build", dir, want[p])
	}
	return nil
}

// unlisted names an entry the record does not list, with what it is.
func unlisted(o OutputFile) string {
	switch o.Type {
	case TypeLink:
		return fmt.Sprintf("%s (a link to %s)", o.Path, o.Target)
	case TypeDir:
		return fmt.Sprintf("%s (a directory)", o.Path)
	}
	return o.Path
}

// schemaNote says why a schema 1 record cannot vouch for a link or an
// empty directory.
func (r *Record) schemaNote(o OutputFile) string {
	if r.Schema >= 2 || o.Type == "" {
		return ""
	}
	return " (a schema 1 record, from an older dorisarm, lists regular files only)"
}
