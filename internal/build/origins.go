package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dorisarm/dorisarm/internal/plan"
	"github.com/dorisarm/dorisarm/internal/scan"
)

// recordsSuffix names a package's flag records in flagsDir.
const recordsSuffix = ".records.json"

// packageRecords is what flagsDir keeps of the flag records a package's
// installed objects carry, as its install check read them: the digest of
// each (flagrec.Record.Digest). The scan gate tells by them which records
// of what the tree's own build links (doris_be holds the BE's records and
// those of every package archive linked into it) are a package's.
type packageRecords struct {
	Digests []string `json:"digests"`
}

// saveRecords keeps the digests of the package's records in flagsDir.
func saveRecords(dir, pkg string, digests []string) error {
	b, err := json.Marshal(packageRecords{Digests: append([]string{}, digests...)})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, pkg+recordsSuffix), b, 0o644)
}

// origins are the origins of the flag records for the scan gate: each
// package's records, as its install check kept them, are that package's
// (named by its step, thirdparty:NAME); every other record is the tree's
// own build's, whose lost tuning fails the gate unless the cell accepted
// it (--accept-lost-tuning). unknown are the sources of third-party
// objects whose records were not kept: a prebuilt --thirdparty-base, or a
// package step restored from a cache entry an older dorisarm made. nil
// for a plan that compiles nothing of the tree's own (--packages): every
// object there is a package's.
func (r *runner) origins() (o *scan.Origins, unknown []string) {
	builds := false
	for _, s := range r.in.Plan.Steps {
		builds = builds || s.Kind == plan.KindBuild
	}
	if !builds {
		return nil, nil
	}
	o = &scan.Origins{Packages: map[string]string{}, Accepted: r.in.Plan.Cell.LostTuning}
	for _, s := range r.in.Plan.Steps {
		switch s.Kind {
		case plan.KindBase:
			unknown = append(unknown, s.ID)
		case plan.KindThirdparty:
			pkg := strings.TrimPrefix(s.ID, "thirdparty:")
			var pr packageRecords
			b, err := os.ReadFile(filepath.Join(r.work, flagsDir, pkg+recordsSuffix))
			if err == nil && json.Unmarshal(b, &pr) == nil {
				for _, d := range pr.Digests {
					o.Packages[d] = s.ID
				}
				continue
			}
			// No records, and a flag read-back: it installed objects whose
			// records were not kept. Neither: it installed none.
			if _, err := os.Stat(filepath.Join(r.work, flagsDir, pkg+".json")); err == nil {
				unknown = append(unknown, s.ID)
			}
		}
	}
	return o, unknown
}

// treeLost are the gate's violations for lost tuning in the tree's own
// objects.
func treeLost(rep *scan.Report) []scan.Finding {
	var out []scan.Finding
	for _, f := range rep.Findings {
		if f.Kind == scan.KindLostTuning && f.Origin == scan.OriginTree && f.Violation() {
			out = append(out, f)
		}
	}
	return out
}

// installOrigins adds to o the records of every object in the cell's
// third-party install (the recipe's thirdparty.install_dir) that o does
// not know yet, attributed to the sources whose records were not kept
// (unknown). The gate reads it only when it would otherwise blame the
// tree's own build for lost tuning those sources may have brought; read
// says whether the install was there to read, n how many records it
// added.
func (r *runner) installOrigins(ctx context.Context, o *scan.Origins, unknown []string, pol *scan.Policy) (read bool, n int, err error) {
	dir := r.hostInstallDir()
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, 0, nil
	}
	rep, err := scan.Scan(ctx, []string{dir}, pol, scan.Options{Digests: true})
	if err != nil {
		return false, 0, fmt.Errorf("reading the flag records of the third-party install %s: %w", r.in.Recipe.Thirdparty.Install, err)
	}
	label := strings.Join(unknown, " or ")
	for _, d := range rep.Digests {
		if _, ok := o.Packages[d]; !ok {
			o.Packages[d] = label
			n++
		}
	}
	return true, n, nil
}

// maxNamed bounds the objects a gate message names.
const maxNamed = 5

// lostTuningError says why the gate failed on the tree's own objects
// below the target's -march: how many, the first few with the flags they
// were compiled with, the target's -march and the ways out.
func (r *runner) lostTuningError(rep *scan.Report, lost []scan.Finding, unknown []string) string {
	flags := map[string]*scan.FileFlags{}
	for _, f := range rep.Files {
		if f.Flags != nil {
			flags[f.Path] = f.Flags
		}
	}
	var paths []string
	seen := map[string]bool{}
	for _, f := range lost {
		if !seen[f.Path] {
			seen[f.Path] = true
			paths = append(paths, f.Path)
		}
	}
	sort.Strings(paths)
	var b strings.Builder
	march := r.in.Plan.Cell.March
	if rep.Policy != nil && rep.Policy.Flags != nil {
		march = rep.Policy.Flags.March
	}
	fmt.Fprintf(&b, "%d object(s) compiled by the tree's own build are below the target's -march=%s (lost tuning):", len(paths), march)
	for i, p := range paths {
		if i == maxNamed {
			fmt.Fprintf(&b, "\n  … and %d more", len(paths)-maxNamed)
			break
		}
		line := p
		if ff := flags[p]; ff != nil && ff.Origins[scan.OriginTree] != nil {
			of := ff.Origins[scan.OriginTree]
			line += ": " + of.Flags
			if ff.Records > 1 {
				line += fmt.Sprintf(" (%d of its %d records compiled by the tree's own build)", of.Records, ff.Records)
			}
		}
		b.WriteString("\n  " + line)
	}
	patches := plan.TreeComponent
	if r.in.Series != nil && r.in.Series.Dir != "" {
		patches = filepath.Join(r.in.Series.Dir, plan.TreeComponent)
	}
	fmt.Fprintf(&b, "\na -march the tree's build adds after the target's overrode it (as Doris 2.1 and 3.0's be/CMakeLists.txt does). Add a patch under %s that replaces it (as patches/doris/0002-be-march-from-build.patch does for Doris 2.1; `dorisarm plan` names such lines in the recipe's fixed_march files), or build with --accept-lost-tuning REASON to publish it so (recorded in the build record, its attestation and the report)", patches)
	if len(unknown) > 0 {
		fmt.Fprintf(&b, "\n(the flag records of %s were not kept, and the third-party install was not there to read them from: some of these records may be theirs; build with a fresh --cache to keep them)", strings.Join(unknown, ", "))
	}
	return b.String()
}
