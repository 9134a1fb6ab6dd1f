package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/sign"
)

// Request is what a report is made from.
type Request struct {
	// Release is a dorisarm build --out directory, or REGISTRY/PATH/NAME:VERSION.
	Release string
	// Images, with a build directory, is where its images are: a registry
	// prefix (REGISTRY/PATH) or oci:DIR.
	Images string
	// RecipeFile names the release's images (its images:); "": the
	// builds' recipe's (RecipeImages), or only Release's image.
	RecipeFile string
	// RecipeImages names the images of a recipe by its name.
	RecipeImages func(recipe string) ([]string, error)
	// Matrix loads the build matrix (a report from a registry needs it).
	Matrix func() (*matrix.Matrix, error)
	// Trust checks signatures and attestations; nil: not checked.
	Trust    *sign.Trust
	Registry registry.Options
}

// Make reads the release req names and reports it.
func Make(ctx context.Context, req Request) (*Report, error) {
	var names []string
	if req.RecipeFile != "" {
		var err error
		if names, err = recipe.ImageNames(req.RecipeFile); err != nil {
			return nil, err
		}
	}
	if req.Release == "" {
		return nil, fault.Inputf("--release is required: a dorisarm build --out directory, or REGISTRY/PATH/NAME:VERSION")
	}
	if st, err := os.Stat(req.Release); err == nil && st.IsDir() {
		return fromDir(ctx, req, names)
	}
	if req.Images != "" {
		return nil, fault.Inputf("--images goes with --release DIR; --release %s already names the registry", req.Release)
	}
	return fromRef(ctx, req, names)
}

func fromDir(ctx context.Context, req Request, names []string) (*Report, error) {
	bs, err := image.FindBuilds(req.Release)
	if err != nil {
		return nil, fault.Input(err)
	}
	var recs []*build.Record
	for _, b := range bs {
		recs = append(recs, b.Record)
	}
	o := Options{Trust: req.Trust, Registry: req.Registry}
	switch {
	case req.Images != "":
		if o.Store, err = OpenStore(req.Images, req.Registry); err != nil {
			return nil, fault.Input(err)
		}
		o.Images = names
		if o.Images == nil {
			if o.Images, err = req.RecipeImages(recs[0].Recipe.Name); err != nil {
				return nil, fault.Input(err)
			}
		}
	case req.Trust != nil:
		return nil, fault.Inputf("--key or a certificate identity checks images: give --images too")
	}
	return FromBuilds(ctx, req.Release, recs, o)
}

func fromRef(ctx context.Context, req Request, names []string) (*Report, error) {
	rel := req.Release
	if strings.HasPrefix(rel, "oci:") || !strings.Contains(rel, "/") {
		return nil, fault.Inputf("--release %s: not a directory of builds, nor REGISTRY/PATH/NAME:VERSION", rel)
	}
	if last := rel[strings.LastIndex(rel, "/"):]; !strings.Contains(last, ":") {
		return nil, fault.Inputf("--release %s: no such directory, and not REGISTRY/PATH/NAME:VERSION either (run dorisarm build --out DIR first, or name an image tag)", rel)
	}
	tag, err := req.Registry.Tag(rel)
	if err != nil {
		return nil, fault.Inputf("--release %s: want a build directory or REGISTRY/PATH/NAME:VERSION (e.g. 127.0.0.1:5000/release/doris-be:2.1.8)", rel)
	}
	repo := tag.Context().RepositoryStr()
	prefix, img := tag.Context().RegistryStr(), repo
	if i := strings.LastIndex(repo, "/"); i >= 0 {
		prefix, img = prefix+"/"+repo[:i], repo[i+1:]
	}
	st, err := OpenStore(prefix, req.Registry)
	if err != nil {
		return nil, fault.Input(err)
	}
	m, err := req.Matrix()
	if err != nil {
		return nil, err
	}
	images := []string{img}
	for _, n := range names {
		if n != img {
			images = append(images, n)
		}
	}
	rep, err := FromRegistry(ctx, m, tag.TagStr(), Options{Store: st, Images: images, Trust: req.Trust, Registry: req.Registry})
	return rep, fault.Input(err)
}

// Failures are the report's failed checks, one line each: what makes
// `dorisarm report` exit 1.
func (r *Report) Failures() []string {
	var bad []string
	for _, t := range r.Targets {
		who := t.Doris + "/" + t.Target
		if t.Scanned && !t.Clean {
			bad = append(bad, fmt.Sprintf("%s: scan found %d violation(s)", who, t.Violations))
		}
		if !t.GlibcOK() {
			bad = append(bad, fmt.Sprintf("%s: needs glibc %s, the OS has %s", who, t.Glibc, t.GlibcMax))
		}
		if t.Image != nil {
			for _, s := range []Status{t.Image.Signature, t.Image.Attestations} {
				if s.State == Failed {
					bad = append(bad, fmt.Sprintf("%s: %s", who, s.Detail))
				}
			}
		}
		for _, p := range t.Problems {
			bad = append(bad, who+": "+p)
		}
	}
	for _, s := range r.Shared {
		if s.Signature.State == Failed {
			bad = append(bad, s.Ref+": "+s.Signature.Detail)
		}
	}
	return append(bad, r.Problems...)
}

// Err is nil for a release with no failures, else a failed gate listing
// them.
func (r *Report) Err() error {
	bad := r.Failures()
	if len(bad) == 0 {
		return nil
	}
	return fault.Gatef("the release has %d problem(s): %s", len(bad), strings.Join(bad, "; "))
}

// Files are where a report is written besides stdout.
type Files struct {
	Markdown, HTML string
	// StepSummary is $GITHUB_STEP_SUMMARY: the Markdown is appended to it.
	StepSummary string
}

// Write renders r into the files f names, each whole (a failed write
// leaves the old file), and returns the Markdown.
func (r *Report) Write(f Files) ([]byte, error) {
	var md bytes.Buffer
	if err := r.Markdown(&md); err != nil {
		return nil, err
	}
	if f.Markdown != "" {
		if err := writeWhole(f.Markdown, md.Bytes()); err != nil {
			return nil, err
		}
	}
	if f.HTML != "" {
		var h bytes.Buffer
		if err := r.HTML(&h); err != nil {
			return nil, err
		}
		if err := writeWhole(f.HTML, h.Bytes()); err != nil {
			return nil, err
		}
	}
	if f.StepSummary != "" {
		if err := appendFile(f.StepSummary, md.Bytes()); err != nil {
			return nil, fmt.Errorf("$GITHUB_STEP_SUMMARY: %w", err)
		}
	}
	return md.Bytes(), nil
}

func writeWhole(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, data, 0o644)
}

func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if err := f.Close(); werr == nil {
		werr = err
	}
	return werr
}
