package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/fsutil"
	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/report"
	"github.com/dorisarm/dorisarm/internal/sign"
)

func newReportCmd(g *globals) *cobra.Command {
	var release, images, recipeFile, mdFile, htmlFile, format string
	var insecure bool
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
			if err := checkFormat(format, "markdown", "json"); err != nil {
				return err
			}
			if release == "" {
				return usageErr("--release is required: a dorisarm build --out directory, or REGISTRY/PATH/NAME:VERSION")
			}
			var trust *sign.Trust
			if tf.t != (sign.Trust{}) {
				t, err := tf.trust()
				if err != nil {
					return err
				}
				trust = &t
			}
			ropts := []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
			ctx := cmd.Context()
			var rep *report.Report
			if st, err := os.Stat(release); err == nil && st.IsDir() {
				bs, err := image.FindBuilds(release)
				if err != nil {
					return fault.Input(err)
				}
				var recs []*build.Record
				for _, b := range bs {
					recs = append(recs, b.Record)
				}
				o := report.Options{Trust: trust, Remote: ropts}
				if images != "" {
					if o.Store, err = report.OpenStore(images, insecure, ropts...); err != nil {
						return fault.Input(err)
					}
					if recipeFile == "" {
						recipeFile = g.recipeFile(recs[0].Recipe.Name)
					}
					if o.Images, err = imageNames(recipeFile); err != nil {
						return fault.Input(err)
					}
				} else if trust != nil {
					return usageErr("--key or a certificate identity checks images: give --images too")
				}
				if rep, err = report.FromBuilds(ctx, release, recs, o); err != nil {
					return err
				}
			} else {
				if images != "" {
					return usageErr("--images goes with --release DIR; --release %s already names the registry", release)
				}
				if strings.HasPrefix(release, "oci:") || !strings.Contains(release, "/") {
					return usageErr("--release %s: not a directory of builds, nor REGISTRY/PATH/NAME:VERSION", release)
				}
				if last := release[strings.LastIndex(release, "/"):]; !strings.Contains(last, ":") {
					return usageErr("--release %s: no such directory, and not REGISTRY/PATH/NAME:VERSION either (run dorisarm build --out DIR first, or name an image tag)", release)
				}
				nopts := []name.Option{}
				if insecure {
					nopts = append(nopts, name.Insecure)
				}
				tag, err := name.NewTag(release, nopts...)
				if err != nil || !strings.Contains(release[strings.LastIndex(release, "/"):], ":") {
					return usageErr("--release %s: want a build directory or REGISTRY/PATH/NAME:VERSION (e.g. 127.0.0.1:5000/release/doris-be:2.1.8)", release)
				}
				repo := tag.Context().RepositoryStr()
				prefix, img := tag.Context().RegistryStr(), repo
				if i := strings.LastIndex(repo, "/"); i >= 0 {
					prefix, img = prefix+"/"+repo[:i], repo[i+1:]
				}
				st, err := report.OpenStore(prefix, insecure, ropts...)
				if err != nil {
					return fault.Input(err)
				}
				var names []string
				if recipeFile != "" {
					if names, err = imageNames(recipeFile); err != nil {
						return fault.Input(err)
					}
				}
				m, err := g.loadMatrix()
				if err != nil {
					return err
				}
				o := report.Options{Store: st, Images: unionNames(img, names), Trust: trust, Remote: ropts}
				if rep, err = report.FromRegistry(ctx, m, tag.TagStr(), o); err != nil {
					return fault.Input(err)
				}
			}
			var md bytes.Buffer
			if err := rep.Markdown(&md); err != nil {
				return err
			}
			if mdFile != "" {
				if err := writeReport(mdFile, md.Bytes()); err != nil {
					return err
				}
			}
			if htmlFile != "" {
				var h bytes.Buffer
				if err := rep.HTML(&h); err != nil {
					return err
				}
				if err := writeReport(htmlFile, h.Bytes()); err != nil {
					return err
				}
			}
			if p := os.Getenv("GITHUB_STEP_SUMMARY"); p != "" {
				f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				if err != nil {
					return fmt.Errorf("$GITHUB_STEP_SUMMARY: %v", err)
				}
				_, werr := f.Write(md.Bytes())
				if err := f.Close(); werr == nil {
					werr = err
				}
				if werr != nil {
					return fmt.Errorf("$GITHUB_STEP_SUMMARY: %v", werr)
				}
			}
			switch {
			case format == "json":
				if err := printJSON(g.stdout, rep); err != nil {
					return err
				}
			case mdFile == "":
				g.stdout.Write(md.Bytes())
			}
			for _, f := range []string{mdFile, htmlFile} {
				if f != "" {
					fmt.Fprintf(g.stderr, "wrote %s\n", f)
				}
			}
			if bad := failures(rep); len(bad) > 0 {
				return fault.Gate(fmt.Errorf("the release has %d problem(s): %s", len(bad), strings.Join(bad, "; ")))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&release, "release", "", "a dorisarm build --out directory, or REGISTRY/PATH/NAME:VERSION")
	cmd.Flags().StringVar(&images, "images", "", "with --release DIR: where the images are, REGISTRY/PATH or oci:DIR")
	cmd.Flags().StringVar(&recipeFile, "recipe", "", "the recipe whose images: the release has (default: the builds' recipe; with --release REF, only REF's image)")
	cmd.Flags().StringVar(&mdFile, "markdown", "", "write the Markdown here instead of stdout")
	cmd.Flags().StringVar(&htmlFile, "html", "", "write a self-contained HTML page here")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow plain-HTTP registries that are not on loopback")
	formatFlag(cmd, &format, "markdown", "markdown or json (the report as data)")
	tf.add(cmd)
	return cmd
}

// imageNames are the image names of a recipe's images: section.
func imageNames(file string) ([]string, error) {
	r, err := recipe.Load(file)
	if err != nil {
		return nil, err
	}
	if len(r.Images) == 0 {
		return nil, fmt.Errorf("%s names no images (images:): pass the recipe the release was built with", file)
	}
	names := make([]string, 0, len(r.Images))
	for n := range r.Images {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func unionNames(first string, rest []string) []string {
	out := []string{first}
	for _, n := range rest {
		if n != first {
			out = append(out, n)
		}
	}
	return out
}

// failures are the report's failed checks, one line each.
func failures(r *report.Report) []string {
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
			for _, s := range []report.Status{t.Image.Signature, t.Image.Attestations} {
				if s.State == report.Failed {
					bad = append(bad, fmt.Sprintf("%s: %s", who, s.Detail))
				}
			}
		}
		for _, p := range t.Problems {
			bad = append(bad, who+": "+p)
		}
	}
	for _, s := range r.Shared {
		if s.Signature.State == report.Failed {
			bad = append(bad, s.Ref+": "+s.Signature.Detail)
		}
	}
	return append(bad, r.Problems...)
}

// writeReport writes a report file whole, making its directory.
func writeReport(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, data, 0o644)
}
