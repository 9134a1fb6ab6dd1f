package image

import (
	"context"
	"io"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// Request is a release as dorisarm image build and publish ask for it.
type Request struct {
	// Builds is a dorisarm build --out directory (<doris>/<target>/ builds).
	Builds string
	// RecipeFile is the recipe naming the images; "": RecipeFor the
	// builds' recipe.
	RecipeFile string
	RecipeFor  func(name string) string
	// SampleTree is the source tree that dates the images when
	// Sources.SourceDir is "".
	SampleTree func() (string, error)
	Matrix     func() (*matrix.Matrix, error)
	Sources    Sources
}

// Assemble makes the images of every build under req.Builds (Release),
// with options resolved from req.Sources.
func Assemble(ctx context.Context, req Request) ([]Tagged, error) {
	m, err := req.Matrix()
	if err != nil {
		return nil, err
	}
	builds, err := FindBuilds(req.Builds)
	if err != nil {
		return nil, err
	}
	rf := req.RecipeFile
	if rf == "" {
		rf = req.RecipeFor(builds[0].Record.Recipe.Name)
	}
	r, err := recipe.Load(rf)
	if err != nil {
		return nil, err
	}
	src := req.Sources
	if src.SourceDir == "" {
		if src.SourceDir, err = req.SampleTree(); err != nil {
			return nil, err
		}
	}
	opts, err := src.Options(ctx)
	if err != nil {
		return nil, err
	}
	return Release(m, r, builds, opts)
}

// BuildLayout assembles req's release (Assemble) into the OCI layout out,
// which must be oci:DIR, as dorisarm image build does.
func BuildLayout(ctx context.Context, req Request, out string) (*Written, error) {
	loc, err := registry.ParseLocation(out)
	if err != nil || !loc.IsLayout() || loc.Name != "" {
		return nil, fault.Inputf("--out %q: want oci:DIR (use dorisarm publish for registries)", out)
	}
	rel, err := Assemble(ctx, req)
	if err != nil {
		return nil, err
	}
	return PublishLayout(loc, rel, false)
}

// PublishRequest is a release and where it goes, as dorisarm publish asks.
type PublishRequest struct {
	Request
	// Repo is REGISTRY/PATH or oci:DIR (Destination).
	Repo   string
	DryRun bool
	// Jobs is how many blobs are uploaded at once.
	Jobs int
	// Password, when set, is read for Username's registry password
	// (--password-stdin), before anything else reaches a registry.
	Username string
	Password io.Reader
}

// PublishRelease checks where req goes, assembles the release (Assemble)
// and publishes it there (PublishTo).
func PublishRelease(ctx context.Context, req PublishRequest) (Published, error) {
	loc, err := Destination(req.Repo)
	if err != nil {
		return nil, err
	}
	if req.Password != nil {
		if err := req.Sources.Registry.ReadPassword(req.Username, req.Password); err != nil {
			return nil, err
		}
	}
	rel, err := Assemble(ctx, req.Request)
	if err != nil {
		return nil, err
	}
	ro := req.Sources.Registry
	ro.Jobs = req.Jobs
	return PublishTo(ctx, loc, rel, PublishOptions{Registry: ro, DryRun: req.DryRun})
}

// InspectLocation opens loc (oci:DIR[:NAME:TAG] or a registry reference)
// and describes it; a location that does not parse or open is bad input.
func InspectLocation(ctx context.Context, loc string, ro registry.Options) (Inspected, error) {
	l, err := registry.ParseLocation(loc)
	if err != nil {
		return Inspected{}, fault.Input(err)
	}
	op, err := ro.Open(ctx, l)
	if err != nil {
		return Inspected{}, fault.Input(err)
	}
	return Inspect(op)
}
