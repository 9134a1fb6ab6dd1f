package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/recipe"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// releaseOptions are the flags image build and publish share.
type releaseOptions struct {
	build, recipeFile string
	src               image.Sources
}

func (o *releaseOptions) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.build, "build", "out", "a dorisarm build --out directory (<doris>/<target>/ builds)")
	cmd.Flags().StringVar(&o.recipeFile, "recipe", "", "the recipe naming the images (default: recipes/<the builds' recipe>.yaml)")
	cmd.Flags().StringVar(&o.src.Base, "base", "", "base image for every target: REF, oci:DIR or scratch (default: each target's base_image in matrix.yaml)")
	cmd.Flags().StringVar(&o.src.Epoch, "epoch", "", "seconds since 1970 for every date in the images (default: $SOURCE_DATE_EPOCH, else the --source tree's last commit)")
	cmd.Flags().StringVar(&o.src.SourceDir, "source", "", "the source tree whose last commit dates the images (default: the bundled sample)")
	cmd.Flags().StringVar(&o.src.Revision, "revision", "", "org.opencontainers.image.revision (default: the --source tree's commit)")
	cmd.Flags().StringVar(&o.src.SourceURL, "source-url", "https://github.com/apache/doris", "org.opencontainers.image.source")
	insecureFlag(cmd, &o.src.Registry)
	cmd.Flags().StringArrayVar(&o.src.IndexImages, "index-image", nil, "NAME:OS/ARCH=REF: put this image (REF or oci:DIR) in NAME's multi-arch index for that platform instead of a build, e.g. doris-be:linux/amd64=docker.io/apache/doris:be-2.1.8")
}

// release assembles the images of every build under --build.
func (o *releaseOptions) release(ctx context.Context, g *globals) ([]image.Tagged, error) {
	m, err := g.loadMatrix()
	if err != nil {
		return nil, err
	}
	builds, err := image.FindBuilds(o.build)
	if err != nil {
		return nil, err
	}
	rf := o.recipeFile
	if rf == "" {
		rf = g.data.Recipe(builds[0].Record.Recipe.Name)
	}
	r, err := recipe.Load(rf)
	if err != nil {
		return nil, err
	}
	src := o.src
	if src.SourceDir == "" {
		if src.SourceDir, err = g.data.SampleTree(); err != nil {
			return nil, err
		}
	}
	src.Getenv = os.Getenv
	opts, err := src.Options(ctx)
	if err != nil {
		return nil, err
	}
	return image.Release(m, r, builds, opts)
}

func newImageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Assemble and inspect release images",
		Example: "  dorisarm image build --build out --out oci:out/images --base scratch\n  dorisarm image inspect oci:out/images:doris-be:2.1.8"}
	o := &releaseOptions{}
	var out, format string
	buildCmd := &cobra.Command{
		Use:   "build",
		Short: "Assemble the images of every build under --build into an OCI layout",
		Long: `image build turns every build under --build (<doris>/<target>/, checked
against its build record) into images: <name>:<version>-<target> for each
target, <name>:<version> as a multi-arch index of each platform's index
target (matrix.yaml isas.*.index_target), shared images (the Java FE) once.
Layers and configs are reproducible: same outputs and epoch, same digests.`,
		Example: `  dorisarm image build --build out --out oci:out/images --base scratch
  SOURCE_DATE_EPOCH=1717000000 dorisarm image build --build out --out oci:out/images --base oci:/srv/bases/ubuntu-22.04`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loc, err := registry.ParseLocation(out)
			if err != nil || !loc.IsLayout() || loc.Name != "" {
				return usageErr("--out %q: want oci:DIR (use dorisarm publish for registries)", out)
			}
			rel, err := o.release(cmd.Context(), g)
			if err != nil {
				return err
			}
			if err := image.WriteLayout(loc.Layout, rel); err != nil {
				return err
			}
			if format == "json" {
				rows, err := releaseRows(out, rel)
				if err != nil {
					return err
				}
				return printJSON(g.stdout, rows)
			}
			return printRelease(g.stdout, rel)
		},
	}
	o.flags(buildCmd)
	buildCmd.Flags().StringVar(&out, "out", "oci:out/images", "where the images go: oci:DIR")
	formatFlag(buildCmd, &format, "table or json", "table", "json")
	cmd.AddCommand(buildCmd, newInspectCmd(g))
	return cmd
}

// releaseRow is one image or index of a release as image build prints it.
type releaseRow struct {
	Ref    string `json:"ref"`
	Kind   string `json:"kind"` // image or index
	Digest string `json:"digest"`
}

// releaseRows are rel's tags under prefix (oci:DIR or REGISTRY/PATH).
func releaseRows(prefix string, rel []image.Tagged) ([]releaseRow, error) {
	rows := []releaseRow{}
	for _, t := range rel {
		d, err := t.Digest()
		if err != nil {
			return nil, err
		}
		kind := "image"
		if t.Index != nil {
			kind = "index"
		}
		rows = append(rows, releaseRow{Ref: prefix + ":" + t.Repo + ":" + t.Tag, Kind: kind, Digest: d.String()})
	}
	return rows, nil
}

func printRelease(w io.Writer, rel []image.Tagged) error {
	rows, err := releaseRows("", rel)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.TrimPrefix(r.Ref, ":"), r.Kind, r.Digest)
	}
	return tw.Flush()
}

func newPublishCmd(g *globals) *cobra.Command {
	o := &releaseOptions{}
	var repo, username, format string
	var passwordStdin, dryRun bool
	var jobs int
	cmd := &cobra.Command{
		Use:   "publish",
		Short: "Publish the images of every build under --build to a registry or an OCI layout",
		Long: `publish assembles the release as image build does and pushes it under --repo:
every blob and manifest by digest first, tags last, so a failed publish moves
no tag. Blobs the registry already has are not uploaded; 5xx and connection
errors are retried with backoff. Credentials come from the docker config
(~/.docker/config.json) or --username/--password-stdin. Plain HTTP is used
for loopback registries; --insecure allows it elsewhere.`,
		Example: `  dorisarm publish --build out --repo 127.0.0.1:5000/doris --epoch 1717000000 --base scratch
  dorisarm publish --build out --repo registry.example.com/doris --dry-run
  dorisarm publish --build out --repo oci:out/images`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" {
				return usageErr("--repo is required: REGISTRY/PATH or oci:DIR")
			}
			loc, err := registry.ParseLocation(repo)
			if err != nil || loc.Name != "" {
				return usageErr("--repo %q: want REGISTRY/PATH or oci:DIR", repo)
			}
			if err := readPassword(cmd, &o.src.Registry, username, passwordStdin); err != nil {
				return err
			}
			rel, err := o.release(cmd.Context(), g)
			if err != nil {
				return err
			}
			if loc.IsLayout() {
				if !dryRun {
					if err := image.WriteLayout(loc.Layout, rel); err != nil {
						return err
					}
				}
				if err := printRelease(g.stdout, rel); err != nil || !dryRun {
					return err
				}
				fmt.Fprintf(g.stdout, "dry run: %d tags; nothing written to %s\n", len(rel), loc.Layout)
				return nil
			}
			ro := o.src.Registry
			ro.Jobs = jobs
			rep, err := image.Publish(cmd.Context(), repo, rel, image.PublishOptions{Registry: ro, DryRun: dryRun})
			if err != nil {
				return fault.Gate(err)
			}
			if format == "json" {
				return printJSON(g.stdout, rep)
			}
			printPublished(g.stdout, rep)
			return nil
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&repo, "repo", "", "REGISTRY/PATH (e.g. 127.0.0.1:5000/doris) or oci:DIR")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be pushed (refs, digests, sizes, bytes to upload)")
	cmd.Flags().StringVar(&username, "username", "", "registry user (with --password-stdin)")
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the registry password from standard input")
	cmd.Flags().IntVar(&jobs, "jobs", 4, "blobs uploaded at once")
	formatFlag(cmd, &format, "table or json", "table", "json")
	return cmd
}

func newInspectCmd(g *globals) *cobra.Command {
	var ro registry.Options
	var format string
	cmd := &cobra.Command{
		Use:   "inspect REF",
		Short: "Print what an image or index says about itself: platforms, target, CPU, flags, digests",
		Example: `  dorisarm image inspect 127.0.0.1:5000/doris/doris-be:2.1.8
  dorisarm image inspect oci:out/images:doris-be:2.1.8-kunpeng920
  dorisarm image inspect oci:out/images:doris-be:2.1.8 -o json | jq '.manifests[].annotations["io.dorisarm.target"]'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			loc, err := registry.ParseLocation(args[0])
			if err != nil {
				return fault.Input(err)
			}
			op, err := ro.Open(cmd.Context(), loc)
			if err != nil {
				return fault.Input(err)
			}
			in, err := image.Inspect(op)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(g.stdout, in)
			}
			in.Print(g.stdout, "")
			return nil
		},
	}
	insecureFlag(cmd, &ro)
	formatFlag(cmd, &format, "text or json", "text", "json")
	return cmd
}

func printPublished(w io.Writer, rep *image.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var wouldUpload int64
	for _, p := range rep.Tags {
		fmt.Fprintf(tw, "%s\t%s\t%d bytes\t%d to upload\n", p.Ref, p.Digest, p.Size, p.Upload)
		wouldUpload += p.Upload
	}
	tw.Flush()
	if rep.DryRun {
		fmt.Fprintf(w, "dry run: %d tags, %d blob bytes to upload; nothing pushed\n", len(rep.Tags), wouldUpload)
	} else {
		fmt.Fprintf(w, "published %d tags: uploaded %d blobs, %d bytes\n", len(rep.Tags), rep.UploadedBlobs, rep.Uploaded)
	}
}

// insecureFlag registers --insecure on ro.
func insecureFlag(cmd *cobra.Command, ro *registry.Options) {
	cmd.Flags().BoolVar(&ro.Insecure, "insecure", false, "allow plain-HTTP registries that are not on loopback")
}

// readPassword sets ro's credentials from --username and --password-stdin.
func readPassword(cmd *cobra.Command, ro *registry.Options, username string, stdin bool) error {
	if !stdin {
		return nil
	}
	if username == "" {
		return usageErr("--password-stdin needs --username")
	}
	pw, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
	if err != nil {
		return err
	}
	ro.Auth = &authn.Basic{Username: username, Password: strings.TrimRight(string(pw), "\r\n")}
	return nil
}

// textWriter is what a command prints: as text, or with -o json as JSON.
type textWriter interface{ WriteText(io.Writer) error }

// printAs prints v as JSON when format is json, else as its text.
func printAs(w io.Writer, format string, v textWriter) error {
	if format == "json" {
		return printJSON(w, v)
	}
	return v.WriteText(w)
}
