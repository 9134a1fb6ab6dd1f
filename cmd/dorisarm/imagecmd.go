package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// releaseFlags registers the flags image build and publish share.
func releaseFlags(cmd *cobra.Command, req *image.Request) {
	cmd.Flags().StringVar(&req.Builds, "build", "out", "a dorisarm build --out directory (<doris>/<target>/ builds)")
	cmd.Flags().StringVar(&req.RecipeFile, "recipe", "", "the recipe naming the images (default: recipes/<the builds' recipe>.yaml)")
	inputFlags(cmd, false, "recipe")
	cmd.Flags().StringVar(&req.Sources.Base, "base", "", "base image for every target: REF, oci:DIR or scratch (default: each target's base_image in matrix.yaml)")
	cmd.Flags().StringVar(&req.Sources.Epoch, "epoch", "", "seconds since 1970 for every date in the images (default: $SOURCE_DATE_EPOCH, else the --source tree's last commit)")
	cmd.Flags().StringVar(&req.Sources.SourceDir, "source", "", "the source tree whose last commit dates the images (default: the bundled sample)")
	cmd.Flags().StringVar(&req.Sources.Revision, "revision", "", "org.opencontainers.image.revision (default: the --source tree's commit)")
	cmd.Flags().StringVar(&req.Sources.SourceURL, "source-url", "https://github.com/apache/doris", "org.opencontainers.image.source")
	registryFlags(cmd, &req.Sources.Registry)
	cmd.Flags().StringArrayVar(&req.Sources.IndexImages, "index-image", nil, "NAME:OS/ARCH=REF: put this image (REF or oci:DIR) in NAME's multi-arch index for that platform instead of a build, e.g. doris-be:linux/amd64=docker.io/apache/doris:be-2.1.8")
}

// withData gives req what it reads from the data directory and the environment.
func withData(g *globals, req *image.Request) {
	req.RecipeFor, req.SampleTree, req.Matrix, req.Sources.Getenv = g.data.Recipe, g.data.SampleTree, g.loadMatrix, os.Getenv
}

func newImageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Assemble and inspect release images",
		Example: "  dorisarm image build --build out --out oci:out/images --base scratch\n  dorisarm image inspect oci:out/images:doris-be:2.1.8"}
	var req image.Request
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
			withData(g, &req)
			wr, err := image.BuildLayout(cmd.Context(), req, out)
			if err != nil {
				return err
			}
			return printAs(g.stdout, format, wr)
		},
	}
	releaseFlags(buildCmd, &req)
	buildCmd.Flags().StringVar(&out, "out", "oci:out/images", "where the images go: oci:DIR")
	formatFlag(buildCmd, &format, "table or json", "table", "json")
	cmd.AddCommand(buildCmd, newInspectCmd(g))
	return cmd
}

func newPublishCmd(g *globals) *cobra.Command {
	var req image.PublishRequest
	var format string
	var passwordStdin bool
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
			if req.Jobs < 1 {
				return usageErr("--jobs %d: give how many blobs may upload at once, 1 or more", req.Jobs)
			}
			if passwordStdin {
				req.Password = cmd.InOrStdin()
			}
			withData(g, &req.Request)
			res, err := image.PublishRelease(cmd.Context(), req)
			if err != nil {
				return err
			}
			if _, layout := res.(*image.Written); layout {
				return res.WriteText(g.stdout) // the table, whatever --output says
			}
			return printAs(g.stdout, format, res)
		},
	}
	releaseFlags(cmd, &req.Request)
	cmd.Flags().StringVar(&req.Repo, "repo", "", "REGISTRY/PATH (e.g. 127.0.0.1:5000/doris) or oci:DIR")
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "print what would be pushed (refs, digests, sizes, bytes to upload)")
	cmd.Flags().StringVar(&req.Username, "username", "", "registry user (with --password-stdin)")
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the registry password from standard input")
	cmd.Flags().IntVar(&req.Jobs, "jobs", 4, "blobs uploaded at once")
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
			in, err := image.InspectLocation(cmd.Context(), args[0], ro)
			if err != nil {
				return err
			}
			return printAs(g.stdout, format, in)
		},
	}
	registryFlags(cmd, &ro)
	formatFlag(cmd, &format, "text or json", "text", "json")
	return cmd
}
