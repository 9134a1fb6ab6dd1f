package image

import (
	"context"

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
