package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/image"
	"github.com/dorisarm/dorisarm/internal/recipe"
)

// releaseOptions are the flags image build and publish share.
type releaseOptions struct {
	build, recipeFile, base, source, revision, sourceURL string
	epoch                                                string
	insecure                                             bool
	indexImages                                          []string
}

func (o *releaseOptions) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.build, "build", "out", "a dorisarm build --out directory (<doris>/<target>/ builds)")
	cmd.Flags().StringVar(&o.recipeFile, "recipe", "", "the recipe naming the images (default: recipes/<the builds' recipe>.yaml)")
	cmd.Flags().StringVar(&o.base, "base", "", "base image for every target: REF, oci:DIR or scratch (default: each target's base_image in matrix.yaml)")
	cmd.Flags().StringVar(&o.epoch, "epoch", "", "seconds since 1970 for every date in the images (default: $SOURCE_DATE_EPOCH, else the --source tree's last commit)")
	cmd.Flags().StringVar(&o.source, "source", "", "the source tree whose last commit dates the images (default: the bundled sample)")
	cmd.Flags().StringVar(&o.revision, "revision", "", "org.opencontainers.image.revision (default: the --source tree's commit)")
	cmd.Flags().StringVar(&o.sourceURL, "source-url", "https://github.com/apache/doris", "org.opencontainers.image.source")
	cmd.Flags().BoolVar(&o.insecure, "insecure", false, "allow plain-HTTP registries that are not on loopback")
	cmd.Flags().StringArrayVar(&o.indexImages, "index-image", nil, "NAME:OS/ARCH=REF: put this image (REF or oci:DIR) in NAME's multi-arch index for that platform instead of a build, e.g. doris-be:linux/amd64=docker.io/apache/doris:be-2.1.8")
}

// release assembles the images of every build under --build.
func (o *releaseOptions) release(g *globals) ([]image.Tagged, error) {
	m, err := g.loadMatrix()
	if err != nil {
		return nil, err
	}
	builds, err := image.FindBuilds(o.build)
	if err != nil {
		return nil, badInput(err)
	}
	rf := o.recipeFile
	if rf == "" {
		rf = g.recipeFile(builds[0].Record.Recipe.Name)
	}
	r, err := recipe.Load(rf)
	if err != nil {
		return nil, badInput(err)
	}
	for _, b := range builds {
		if b.Record.Recipe.Name != r.Name {
			return nil, usageErr("%s was built with recipe %s, not %s (--recipe %s)", b.Dir, b.Record.Recipe.Name, r.Name, rf)
		}
	}
	src := o.source
	if src == "" {
		if src, err = g.sampleTree(); err != nil {
			return nil, err
		}
	}
	epoch, rev, err := o.dates(src)
	if err != nil {
		return nil, err
	}
	indexImage, err := o.indexImageFunc()
	if err != nil {
		return nil, err
	}
	opts := image.Options{Epoch: epoch, Revision: rev, Source: o.sourceURL, Base: o.baseFunc(), IndexImage: indexImage}
	rel, err := image.Release(m, r, builds, opts)
	if err != nil {
		return nil, badInput(err)
	}
	return rel, nil
}

// dates finds the epoch and the revision: flags, SOURCE_DATE_EPOCH, git.
func (o *releaseOptions) dates(src string) (time.Time, string, error) {
	rev := o.revision
	if rev == "" {
		if out, err := exec.Command("git", "-C", src, "log", "-1", "--format=%H", "--", ".").Output(); err == nil {
			rev = strings.TrimSpace(string(out))
		}
	}
	e := o.epoch
	if e == "" {
		e = os.Getenv("SOURCE_DATE_EPOCH")
	}
	if e == "" {
		out, err := exec.Command("git", "-C", src, "log", "-1", "--format=%ct", "--", ".").Output()
		if err != nil || strings.TrimSpace(string(out)) == "" {
			return time.Time{}, "", usageErr("no date for the images: %s is not a git checkout; set SOURCE_DATE_EPOCH or --epoch", src)
		}
		e = strings.TrimSpace(string(out))
	}
	sec, err := strconv.ParseInt(e, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, "", usageErr("epoch %q: want seconds since 1970 (SOURCE_DATE_EPOCH)", e)
	}
	return time.Unix(sec, 0).UTC(), rev, nil
}

// baseFunc resolves base images: --base for every target, else the
// target's base_image; scratch means none.
func (o *releaseOptions) baseFunc() func(v1.Platform, string) (v1.Image, string, error) {
	cache := map[string]v1.Image{}
	return func(p v1.Platform, ref string) (v1.Image, string, error) {
		if o.base != "" {
			ref = o.base
		}
		if ref == "" || ref == "scratch" {
			return nil, "", nil
		}
		key := ref + " " + p.String()
		if img, ok := cache[key]; ok {
			return img, ref, nil
		}
		img, err := loadImage(ref, p, o.insecure)
		if err != nil {
			return nil, "", err
		}
		cache[key] = img
		return img, ref, nil
	}
}

// indexImageFunc resolves --index-image NAME:OS/ARCH=REF entries.
func (o *releaseOptions) indexImageFunc() (func(string, v1.Platform) (v1.Image, string, error), error) {
	refs := map[string]string{}
	for _, e := range o.indexImages {
		key, ref, ok := strings.Cut(e, "=")
		nm, plat, ok2 := strings.Cut(key, ":")
		if !ok || !ok2 || ref == "" || !strings.Contains(plat, "/") {
			return nil, usageErr("--index-image %q: want NAME:OS/ARCH=REF, e.g. doris-be:linux/amd64=docker.io/apache/doris:be-2.1.8", e)
		}
		refs[nm+":"+plat] = ref
	}
	return func(name string, p v1.Platform) (v1.Image, string, error) {
		ref, ok := refs[name+":"+p.OS+"/"+p.Architecture]
		if !ok {
			return nil, "", nil
		}
		img, err := loadImage(ref, p, o.insecure)
		return img, ref, err
	}, nil
}

// loadImage opens the image for platform p of ref: oci:DIR or a registry
// reference.
func loadImage(ref string, p v1.Platform, insecure bool) (v1.Image, error) {
	if dir, ok := strings.CutPrefix(ref, "oci:"); ok {
		return imageFromLayout(dir, p)
	}
	var nopts []name.Option
	if insecure {
		nopts = append(nopts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nopts...)
	if err != nil {
		return nil, err
	}
	img, err := remote.Image(r, remote.WithPlatform(p), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return nil, fmt.Errorf("%v (offline? use oci:DIR, or --base scratch)", err)
	}
	return img, nil
}

// imageFromLayout picks the image for platform p out of an OCI layout.
func imageFromLayout(dir string, p v1.Platform) (v1.Image, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("oci:%s: %v", dir, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	var find func(idx v1.ImageIndex) (v1.Image, error)
	find = func(idx v1.ImageIndex) (v1.Image, error) {
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, d := range im.Manifests {
			if d.MediaType.IsIndex() {
				child, err := idx.ImageIndex(d.Digest)
				if err != nil {
					return nil, err
				}
				if img, err := find(child); err == nil && img != nil {
					return img, nil
				}
				continue
			}
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, err
			}
			cf, err := img.ConfigFile()
			if err != nil {
				return nil, err
			}
			if cf.OS == p.OS && cf.Architecture == p.Architecture {
				return img, nil
			}
		}
		return nil, nil
	}
	img, err := find(idx)
	if err == nil && img == nil {
		err = fmt.Errorf("oci:%s has no image for %s", dir, p.String())
	}
	return img, err
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
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			dir, ok := strings.CutPrefix(out, "oci:")
			if !ok || dir == "" {
				return usageErr("--out %q: want oci:DIR (use dorisarm publish for registries)", out)
			}
			rel, err := o.release(g)
			if err != nil {
				return err
			}
			if err := image.WriteLayout(dir, rel); err != nil {
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
	formatFlag(buildCmd, &format, "table", "table or json")
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
			if format != "table" && format != "json" {
				return checkFormat(format, "table", "json")
			}
			var auth authn.Authenticator
			if passwordStdin {
				if username == "" {
					return usageErr("--password-stdin needs --username")
				}
				pw, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return err
				}
				auth = &authn.Basic{Username: username, Password: strings.TrimRight(string(pw), "\r\n")}
			}
			rel, err := o.release(g)
			if err != nil {
				return err
			}
			if dir, ok := strings.CutPrefix(repo, "oci:"); ok {
				if dryRun {
					if err := printRelease(g.stdout, rel); err != nil {
						return err
					}
					fmt.Fprintf(g.stdout, "dry run: %d tags; nothing written to %s\n", len(rel), dir)
					return nil
				}
				if err := image.WriteLayout(dir, rel); err != nil {
					return err
				}
				return printRelease(g.stdout, rel)
			}
			rep, err := image.Publish(cmd.Context(), repo, rel, image.PublishOptions{Auth: auth, Insecure: o.insecure, Jobs: jobs, DryRun: dryRun})
			if err != nil {
				return &exitError{code: exitCheck, err: err}
			}
			if format == "json" {
				return printJSON(g.stdout, rep)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			var wouldUpload int64
			for _, p := range rep.Tags {
				fmt.Fprintf(tw, "%s\t%s\t%d bytes\t%d to upload\n", p.Ref, p.Digest, p.Size, p.Upload)
				wouldUpload += p.Upload
			}
			tw.Flush()
			if dryRun {
				fmt.Fprintf(g.stdout, "dry run: %d tags, %d blob bytes to upload; nothing pushed\n", len(rep.Tags), wouldUpload)
			} else {
				fmt.Fprintf(g.stdout, "published %d tags: uploaded %d blobs, %d bytes\n", len(rep.Tags), rep.UploadedBlobs, rep.Uploaded)
			}
			return nil
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&repo, "repo", "", "REGISTRY/PATH (e.g. 127.0.0.1:5000/doris) or oci:DIR")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be pushed (refs, digests, sizes, bytes to upload)")
	cmd.Flags().StringVar(&username, "username", "", "registry user (with --password-stdin)")
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the registry password from standard input")
	cmd.Flags().IntVar(&jobs, "jobs", 4, "blobs uploaded at once")
	formatFlag(cmd, &format, "table", "table or json")
	return cmd
}

func newInspectCmd(g *globals) *cobra.Command {
	var insecure bool
	var format string
	cmd := &cobra.Command{
		Use:   "inspect REF",
		Short: "Print what an image or index says about itself: platforms, target, CPU, flags, digests",
		Example: `  dorisarm image inspect 127.0.0.1:5000/doris/doris-be:2.1.8
  dorisarm image inspect oci:out/images:doris-be:2.1.8-kunpeng920
  dorisarm image inspect oci:out/images:doris-be:2.1.8 -o json | jq '.manifests[].annotations["io.dorisarm.target"]'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			idx, img, ref, err := openRef(args[0], insecure)
			if err != nil {
				return badInput(err)
			}
			var in inspected
			if idx != nil {
				in, err = inspectIndex(ref, idx)
			} else {
				in, err = inspectImage(img)
				in.Ref = ref
			}
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(g.stdout, in)
			}
			in.print(g.stdout, "")
			return nil
		},
	}
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow plain-HTTP registries that are not on loopback")
	formatFlag(cmd, &format, "text", "text or json")
	return cmd
}

// inspected is what image inspect shows of an image or an index.
type inspected struct {
	Ref         string            `json:"ref,omitempty"`
	Kind        string            `json:"kind"`
	Digest      string            `json:"digest"`
	Platform    string            `json:"platform,omitempty"`
	Layers      int               `json:"layers,omitempty"`
	Size        int64             `json:"compressed_size,omitempty"`
	Created     string            `json:"created,omitempty"`
	Entrypoint  []string          `json:"entrypoint,omitempty"`
	WorkingDir  string            `json:"workdir,omitempty"`
	Ports       []string          `json:"ports,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Manifests   []inspected       `json:"manifests,omitempty"`
}

func inspectIndex(ref string, idx v1.ImageIndex) (inspected, error) {
	d, err := idx.Digest()
	if err != nil {
		return inspected{}, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return inspected{}, err
	}
	in := inspected{Ref: ref, Kind: "index", Digest: d.String(), Annotations: im.Annotations}
	for _, m := range im.Manifests {
		child, err := idx.Image(m.Digest)
		if err != nil {
			return inspected{}, err
		}
		c, err := inspectImage(child)
		if err != nil {
			return inspected{}, err
		}
		if m.Platform != nil {
			c.Platform = m.Platform.String()
		}
		// The index's descriptor annotations (target, CPU) over the image's own.
		for k, v := range m.Annotations {
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[k] = v
		}
		in.Manifests = append(in.Manifests, c)
	}
	return in, nil
}

func inspectImage(img v1.Image) (inspected, error) {
	d, err := img.Digest()
	if err != nil {
		return inspected{}, err
	}
	m, err := img.Manifest()
	if err != nil {
		return inspected{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return inspected{}, err
	}
	plat := cf.OS + "/" + cf.Architecture
	if cf.Variant != "" {
		plat += "/" + cf.Variant
	}
	in := inspected{Kind: "image", Digest: d.String(), Platform: plat, Layers: len(m.Layers), Created: cf.Created.UTC().Format(time.RFC3339),
		Entrypoint: cf.Config.Entrypoint, WorkingDir: cf.Config.WorkingDir, Ports: sortedKeys(cf.Config.ExposedPorts), Annotations: m.Annotations}
	for _, l := range m.Layers {
		in.Size += l.Size
	}
	return in, nil
}

func (in inspected) print(w io.Writer, indent string) {
	if in.Ref != "" {
		fmt.Fprintf(w, "%s%s\n", indent, in.Ref)
	}
	if in.Kind == "index" {
		fmt.Fprintf(w, "%sindex %s\n", indent, in.Digest)
		printAnnotations(w, indent+"  ", in.Annotations)
		for _, m := range in.Manifests {
			fmt.Fprintf(w, "%s  %s  %s\n", indent, m.Platform, m.Digest)
			m.printImage(w, indent+"    ")
		}
		return
	}
	fmt.Fprintf(w, "%simage %s\n", indent, in.Digest)
	in.printImage(w, indent+"  ")
}

func (in inspected) printImage(w io.Writer, indent string) {
	fmt.Fprintf(w, "%splatform %s, %d layers, %d bytes compressed, created %s\n", indent, in.Platform, in.Layers, in.Size, in.Created)
	fmt.Fprintf(w, "%sentrypoint %v, workdir %s, ports %s\n", indent, in.Entrypoint, in.WorkingDir, strings.Join(in.Ports, " "))
	printAnnotations(w, indent, in.Annotations)
}

// openRef opens oci:DIR:NAME:TAG (an OCI layout entry by ref name) or a
// registry reference.
func openRef(s string, insecure bool) (v1.ImageIndex, v1.Image, string, error) {
	if rest, ok := strings.CutPrefix(s, "oci:"); ok {
		dir, want, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, nil, "", fmt.Errorf("%s: want oci:DIR:NAME:TAG (e.g. oci:out/images:doris-be:2.1.8)", s)
		}
		lp, err := layout.FromPath(dir)
		if err != nil {
			return nil, nil, "", fmt.Errorf("%s: %v", s, err)
		}
		top, err := lp.ImageIndex()
		if err != nil {
			return nil, nil, "", err
		}
		im, err := top.IndexManifest()
		if err != nil {
			return nil, nil, "", err
		}
		var names []string
		for _, d := range im.Manifests {
			n := d.Annotations[image.RefName]
			names = append(names, n)
			if n != want {
				continue
			}
			if d.MediaType.IsIndex() {
				idx, err := top.ImageIndex(d.Digest)
				return idx, nil, s, err
			}
			img, err := top.Image(d.Digest)
			return nil, img, s, err
		}
		sort.Strings(names)
		return nil, nil, "", fmt.Errorf("%s: no %s in the layout (it has %s)", s, want, strings.Join(names, ", "))
	}
	var nopts []name.Option
	if insecure {
		nopts = append(nopts, name.Insecure)
	}
	ref, err := name.ParseReference(s, nopts...)
	if err != nil {
		return nil, nil, "", err
	}
	desc, err := remote.Get(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return nil, nil, "", err
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		return idx, nil, ref.String(), err
	}
	img, err := desc.Image()
	return nil, img, ref.String(), err
}

func printAnnotations(w io.Writer, indent string, ann map[string]string) {
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s%s=%s\n", indent, k, ann[k])
	}
}
