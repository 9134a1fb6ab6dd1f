package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/about"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/registry"
	"github.com/dorisarm/dorisarm/internal/report"
)

func newReportCmd(g *globals) *cobra.Command {
	var release, images, recipeFile, mdFile, htmlFile, format string
	var ro registry.Options
	var tf trustFlags
	cmd := &cobra.Command{
		Use:   "report --release DIR|REF",
		Short: "Write a release report: per target CPU, flags, compiler, PGO/LTO, patches, ISA use, glibc, images, signatures, cache, time",
		Long: `report describes a release, per target: CPU, -march and -mtune/-mcpu,
compiler and version, PGO/LTO, patches applied, ISA extensions used versus
allowed, the glibc the build needs versus the target OS's, the image digest
and size with its signature and attestation status, the cache hit rate and
the build time.

--release DIR reads the build records under a dorisarm build --out
directory; --images names where its images are (a registry prefix such as
127.0.0.1:5000/release, or oci:DIR) and --key (or a certificate identity)
checks their signatures and attestations.

--release REF (REGISTRY/PATH/NAME:VERSION, e.g. 127.0.0.1:5000/release/doris-be:2.1.8)
reads the release from the registry alone: each per-target image of that
version, its verified SLSA provenance and scan attestations, and the matrix
for what each target allows (and, with --recipe, the recipe's other images
of that version). It needs --key or a certificate identity.

Markdown goes to stdout (or --markdown FILE) and, when $GITHUB_STEP_SUMMARY
is set, is appended to it; --html FILE writes a self-contained page.
Exit status 1 when something the report checked failed: a scan, a glibc
ceiling, a signature, an attestation, or an image that is missing or from
another build.`,
		Example: `  dorisarm report --release out/demo --html out/demo/report.html
  dorisarm report --release out --images 127.0.0.1:5000/release --key keys/cosign.pub --markdown report.md --html report.html
  dorisarm report --release 127.0.0.1:5000/release/doris-be:2.1.8 --key keys/cosign.pub --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := report.Request{Release: release, Images: images, RecipeFile: recipeFile, Registry: ro, Matrix: g.loadMatrix,
				RecipeImages: func(name string) ([]string, error) { return recipe.ImageNames(g.data.Recipe(name)) }}
			var err error
			if req.Trust, err = tf.optional(g.stderr); err != nil {
				return err
			}
			rep, err := report.Make(cmd.Context(), req)
			if err != nil {
				return err
			}
			at, err := reportTime(os.Getenv)
			if err != nil {
				return err
			}
			rep.Stamp(about.ReadBuild(version).Version, at)
			md, err := rep.Write(report.Files{Markdown: mdFile, HTML: htmlFile, StepSummary: os.Getenv("GITHUB_STEP_SUMMARY")})
			switch {
			case err != nil:
				return err
			case format == "json":
				err = printJSON(g.stdout, rep)
			case mdFile == "":
				_, err = g.stdout.Write(md)
			}
			for _, f := range []string{mdFile, htmlFile} {
				if f != "" {
					fmt.Fprintf(g.stderr, "wrote %s\n", f)
				}
			}
			return errors.Join(err, rep.Err())
		},
	}
	cmd.Flags().StringVar(&release, "release", "", "a dorisarm build --out directory, or REGISTRY/PATH/NAME:VERSION")
	cmd.Flags().StringVar(&images, "images", "", "with --release DIR: where the images are, REGISTRY/PATH or oci:DIR")
	cmd.Flags().StringVar(&recipeFile, "recipe", "", "the recipe whose images: the release has (default: the builds' recipe; with --release REF, only REF's image)")
	inputFlags(cmd, false, "recipe")
	cmd.Flags().StringVar(&mdFile, "markdown", "", "write the Markdown here instead of stdout")
	cmd.Flags().StringVar(&htmlFile, "html", "", "write a self-contained HTML page here")
	registryFlags(cmd, &ro)
	formatFlag(cmd, &format, "markdown or json (the report as data)", "markdown", "json")
	tf.add(cmd)
	return cmd
}

// reportTime is when a report says it was made: $SOURCE_DATE_EPOCH where
// set (a report made again from the same release is the same bytes), now
// otherwise.
func reportTime(getenv func(string) string) (time.Time, error) {
	v := getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Now(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, usageErr("SOURCE_DATE_EPOCH=%q: give seconds since 1970", v)
	}
	return time.Unix(n, 0), nil
}
