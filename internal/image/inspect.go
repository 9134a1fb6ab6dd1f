package image

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dorisarm/dorisarm/internal/registry"
)

// Inspected is what an image or an index says about itself: platforms,
// layers, sizes and dorisarm's annotations (target, CPU, flags).
type Inspected struct {
	Ref         string            `json:"ref,omitempty"`
	Kind        string            `json:"kind"` // image or index
	Digest      string            `json:"digest"`
	Platform    string            `json:"platform,omitempty"`
	Layers      int               `json:"layers,omitempty"`
	Size        int64             `json:"compressed_size,omitempty"`
	Created     string            `json:"created,omitempty"`
	Entrypoint  []string          `json:"entrypoint,omitempty"`
	WorkingDir  string            `json:"workdir,omitempty"`
	Ports       []string          `json:"ports,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Manifests   []Inspected       `json:"manifests,omitempty"`
}

// Inspect describes what registry.Open opened.
func Inspect(op registry.Opened) (Inspected, error) {
	if op.Index == nil {
		in, err := inspectImage(op.Image)
		in.Ref = op.Ref
		return in, err
	}
	d, err := op.Index.Digest()
	if err != nil {
		return Inspected{}, err
	}
	im, err := op.Index.IndexManifest()
	if err != nil {
		return Inspected{}, err
	}
	in := Inspected{Ref: op.Ref, Kind: "index", Digest: d.String(), Annotations: im.Annotations}
	for _, m := range im.Manifests {
		child, err := op.Index.Image(m.Digest)
		if err != nil {
			return Inspected{}, fmt.Errorf("%s: child %s: %w", op.Ref, m.Digest, err)
		}
		c, err := inspectImage(child)
		if err != nil {
			return Inspected{}, fmt.Errorf("%s: child %s: %w", op.Ref, m.Digest, err)
		}
		if m.Platform != nil {
			c.Platform = m.Platform.String()
		}
		// The index's descriptor annotations (target, CPU) over the image's own.
		if len(m.Annotations) > 0 && c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		maps.Copy(c.Annotations, m.Annotations)
		in.Manifests = append(in.Manifests, c)
	}
	return in, nil
}

func inspectImage(img v1.Image) (Inspected, error) {
	d, err := img.Digest()
	if err != nil {
		return Inspected{}, err
	}
	m, err := img.Manifest()
	if err != nil {
		return Inspected{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Inspected{}, err
	}
	plat := cf.OS + "/" + cf.Architecture
	if cf.Variant != "" {
		plat += "/" + cf.Variant
	}
	in := Inspected{Kind: "image", Digest: d.String(), Platform: plat, Layers: len(m.Layers), Created: cf.Created.UTC().Format(time.RFC3339),
		Entrypoint: cf.Config.Entrypoint, WorkingDir: cf.Config.WorkingDir, Ports: slices.Sorted(maps.Keys(cf.Config.ExposedPorts)), Annotations: m.Annotations}
	for _, l := range m.Layers {
		in.Size += l.Size
	}
	return in, nil
}

// Print writes in as text, indented.
func (in Inspected) Print(w io.Writer, indent string) {
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

func (in Inspected) printImage(w io.Writer, indent string) {
	fmt.Fprintf(w, "%splatform %s, %d layers, %d bytes compressed, created %s\n", indent, in.Platform, in.Layers, in.Size, in.Created)
	fmt.Fprintf(w, "%sentrypoint %v, workdir %s, ports %s\n", indent, in.Entrypoint, in.WorkingDir, strings.Join(in.Ports, " "))
	printAnnotations(w, indent, in.Annotations)
}

func printAnnotations(w io.Writer, indent string, ann map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		fmt.Fprintf(w, "%s%s=%s\n", indent, k, ann[k])
	}
}
