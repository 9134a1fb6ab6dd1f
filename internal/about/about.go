// Package about says what a dorisarm binary is: its version and commit,
// and which data (matrix, recipes, patch series) it uses.
package about

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/dorisarm/dorisarm/internal/datafs"
	"github.com/dorisarm/dorisarm/internal/textfmt"
)

// Build is what the binary says about itself: the version (the linked-in
// one, else the module version go install or go build records), and the
// commit it was built from when the build had VCS information.
type Build struct {
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
	Go         string `json:"go"`
}

// ReadBuild reads the build info; linked is -ldflags' main.version.
func ReadBuild(linked string) Build {
	out := Build{Version: linked}
	if bi, ok := debug.ReadBuildInfo(); ok {
		out.Go = bi.GoVersion
		if out.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			out.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				out.Commit = s.Value
			case "vcs.time":
				out.CommitTime = s.Value
			case "vcs.modified":
				out.Modified = s.Value == "true"
			}
		}
	}
	if out.Version == "" {
		out.Version = "dev"
	}
	return out
}

// Report is dorisarm version's output.
type Report struct {
	Build
	Data *datafs.Info `json:"data"`
}

// WriteText prints the report for people.
func (r Report) WriteText(w io.Writer) error {
	var extra []string
	if r.Go != "" {
		extra = append(extra, r.Go)
	}
	if r.Commit != "" {
		c := "commit " + r.Commit
		if r.Modified {
			c += " (modified)"
		}
		extra = append(extra, c)
	}
	fmt.Fprintf(w, "dorisarm %s (%s)\n", r.Version, strings.Join(extra, ", "))
	d := r.Data
	fmt.Fprintf(w, "data: %s\n", d.Source)
	rows := [][]string{{"  " + d.Matrix.Name, d.Matrix.Path, d.Matrix.SHA256}}
	for _, it := range d.Recipes {
		rows = append(rows, []string{"  " + it.Name, it.Path, it.SHA256})
	}
	for _, it := range d.Patches {
		rows = append(rows, []string{"  " + it.Name + fmt.Sprintf(" (%d patches)", *it.Patches), it.Path, it.SHA256})
	}
	rows = append(rows, []string{"  sample", d.Sample, ""})
	textfmt.Table(w, rows)
	return nil
}
