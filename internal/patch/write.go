package patch

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/fsutil"
)

// NewPatch is what Create writes a patch from.
type NewPatch struct {
	Name      string // NNNN-Name.patch
	Component string
	Version   string // Applies-To: Component = Version ("": any)
	Targets   string
	Source    string // the edited tree
	// Pristine is the unedited source (a directory or a .tar.gz); "": the
	// tree's git HEAD, else its archive found beside it.
	Pristine string
	Ignore   []string // more file name globs left out of the diff
	Header   Header   // Description, Evidence, Author ("": git's user)
}

var patchNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`) })

// Written is the patch Create wrote.
type Written struct {
	Patch        string `json:"patch"`
	FilesChanged int    `json:"files_changed"`
}

// WriteText prints what was written.
func (c Written) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "wrote %s (%d files changed)\n", c.Patch, c.FilesChanged)
	return err
}

// Create diffs n.Source against where it came from and writes the next
// numbered patch of n.Component in s, never over an existing file.
func (s *Series) Create(n NewPatch) (Written, error) {
	path, files, err := s.create(n)
	if err != nil {
		return Written{}, err
	}
	return Written{path, files}, nil
}

func (s *Series) create(n NewPatch) (string, int, error) {
	if !patchNameRE().MatchString(n.Name) {
		return "", 0, fault.Inputf("patch name %q: use lower-case letters, digits, dots and dashes", n.Name)
	}
	if n.Component == "" || n.Source == "" {
		return "", 0, fault.Inputf("--component and --source are required")
	}
	if err := datafs.Writable(s.Dir, "pass --patches DIR"); err != nil {
		return "", 0, err
	}
	ignore := append(append([]string{}, DefaultIgnore...), n.Ignore...)
	var changes []Change
	var err error
	switch {
	case n.Pristine != "":
		changes, err = ChangesFromPristine(n.Source, n.Pristine, ignore)
	case IsGit(n.Source):
		changes, err = ChangesFromGit(n.Source)
	default:
		var arch string
		if arch, err = FindPristineArchive(n.Source); err == nil {
			changes, err = ChangesFromPristine(n.Source, arch, ignore)
		}
	}
	if err != nil {
		return "", 0, fault.Input(err)
	}
	h := n.Header
	h.AppliesTo = n.Component
	if n.Version != "" {
		h.AppliesTo += " = " + n.Version
	}
	h.Targets = n.Targets
	if h.Author == "" {
		h.Author = gitAuthor()
	}
	h.LastUpdate = time.Now().UTC()
	text, err := Compose(h, changes)
	if err != nil {
		return "", 0, fault.Gate(err)
	}
	path := filepath.Join(s.Dir, n.Component, fmt.Sprintf("%04d-%s.patch", s.NextNumber(n.Component), n.Name))
	if _, err := Parse(path, text); err != nil {
		return "", 0, fmt.Errorf("the new patch does not validate (nothing written): %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", 0, err
	}
	return path, len(changes), writeNew(path, text)
}

// Refreshed is what RefreshFile did.
type Refreshed struct {
	Patch     string  `json:"patch"`
	Refreshed bool    `json:"refreshed"`
	Result    *Result `json:"result"`
}

// RefreshFile re-anchors the patch named name to the tree at source and
// rewrites its file when its diff changed. A patch that does not apply is
// a failed gate and its file is not touched.
func (s *Series) RefreshFile(name, source string) (Refreshed, error) {
	p, err := s.Find(name)
	if err != nil {
		return Refreshed{}, fault.Input(err)
	}
	if err := datafs.Writable(p.Path, "pass --patches DIR"); err != nil {
		return Refreshed{}, err
	}
	text, res, changed, err := Refresh(p, source, DefaultOptions())
	if err != nil {
		return Refreshed{}, fault.Input(err)
	}
	r := Refreshed{Patch: p.Path, Result: res}
	if !res.OK() {
		return r, fault.Gatef("%s does not apply to %s; fix it by hand (nothing written)", p.ID(), source)
	}
	if !changed {
		return r, nil
	}
	if _, err := Parse(p.Path, text); err != nil {
		return r, fmt.Errorf("refreshed patch does not validate (nothing written): %w", err)
	}
	if err := fsutil.WriteFileAtomic(p.Path, text, 0o644); err != nil {
		return r, err
	}
	r.Refreshed = true
	return r, nil
}

func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// gitAuthor is git's user.name <user.email>, else the login name.
func gitAuthor() string {
	get := func(key string) string {
		out, err := exec.Command("git", "config", "--get", key).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	name, email := get("user.name"), get("user.email")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if email != "" {
		return name + " <" + email + ">"
	}
	return name
}

// WriteText prints every hunk's outcome and a count; paint colours a
// hunk's status (ok: applied as written; not ok: failed).
func (r *Result) WriteText(w io.Writer, paint func(ok bool, s string) string) {
	counts := map[Status]int{}
	for _, h := range r.Hunks {
		counts[h.Status]++
		line := h.String()
		prefix := fmt.Sprintf("%s %s hunk #%d: ", h.Patch, h.File, h.Hunk)
		if rest, ok := strings.CutPrefix(line, prefix); ok && paint != nil {
			switch h.Status {
			case Failed:
				line = prefix + paint(false, rest)
			case Clean, Created, Deleted:
				line = prefix + paint(true, rest)
			}
		}
		fmt.Fprintln(w, line)
	}
	for _, s := range r.Skipped {
		fmt.Fprintln(w, "skipped "+s)
	}
	fmt.Fprintf(w, "%d hunks: %d clean, %d offset, %d fuzz, %d created, %d deleted, %d failed\n", len(r.Hunks),
		counts[Clean], counts[Offset], counts[Fuzz], counts[Created], counts[Deleted], counts[Failed])
}
