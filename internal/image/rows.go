package image

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/registry"
)

// Row is one image or index of a release as dorisarm image build lists it.
type Row struct {
	Ref    string `json:"ref"`
	Kind   string `json:"kind"` // image or index
	Digest string `json:"digest"`
}

// Rows list a release.
type Rows []Row

// ReleaseRows lists rel's tags (NAME:TAG), under prefix (oci:DIR or
// REGISTRY/PATH) when it is not "".
func ReleaseRows(prefix string, rel []Tagged) (Rows, error) {
	rows := Rows{}
	for _, t := range rel {
		d, err := t.Digest()
		if err != nil {
			return nil, err
		}
		kind := "image"
		if t.Index != nil {
			kind = "index"
		}
		ref := t.Repo + ":" + t.Tag
		if prefix != "" {
			ref = prefix + ":" + ref
		}
		rows = append(rows, Row{Ref: ref, Kind: kind, Digest: d.String()})
	}
	return rows, nil
}

// WriteText prints the rows as aligned columns: ref, kind, digest.
func (rs Rows) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Ref, r.Kind, r.Digest)
	}
	return tw.Flush()
}

// Written is a release written to an OCI layout, or with DryRun what
// would be.
type Written struct {
	Layout registry.Location
	DryRun bool
	Rows   Rows // NAME:TAG
}

// PublishLayout writes rel to the OCI layout loc (not with dryRun) and
// lists what it wrote.
func PublishLayout(loc registry.Location, rel []Tagged, dryRun bool) (*Written, error) {
	if !dryRun {
		if err := WriteLayout(loc.Layout, rel); err != nil {
			return nil, err
		}
	}
	rows, err := ReleaseRows("", rel)
	if err != nil {
		return nil, err
	}
	return &Written{Layout: loc, DryRun: dryRun, Rows: rows}, nil
}

// WriteText prints the rows and, for a dry run, that nothing was written.
func (wr *Written) WriteText(w io.Writer) error {
	if err := wr.Rows.WriteText(w); err != nil || !wr.DryRun {
		return err
	}
	_, err := fmt.Fprintf(w, "dry run: %d tags; nothing written to %s\n", len(wr.Rows), wr.Layout.Layout)
	return err
}

// MarshalJSON is the rows, each ref under the layout (oci:DIR:NAME:TAG).
func (wr *Written) MarshalJSON() ([]byte, error) {
	rows := Rows{}
	for _, r := range wr.Rows {
		r.Ref = wr.Layout.String() + ":" + r.Ref
		rows = append(rows, r)
	}
	return json.Marshal(rows)
}

// Destination reads where publish puts a release: REGISTRY/PATH or oci:DIR.
func Destination(repo string) (registry.Location, error) {
	if repo == "" {
		return registry.Location{}, fault.Inputf("--repo is required: REGISTRY/PATH or oci:DIR")
	}
	loc, err := registry.ParseLocation(repo)
	if err != nil || loc.Name != "" {
		return registry.Location{}, fault.Inputf("--repo %q: want REGISTRY/PATH or oci:DIR", repo)
	}
	return loc, nil
}

// Published is what PublishTo did: a *Written or a *Report.
type Published interface{ WriteText(io.Writer) error }

// PublishTo puts rel in the OCI layout loc (PublishLayout) or pushes it
// under the registry prefix loc (Publish; its failures are failed gates).
func PublishTo(ctx context.Context, loc registry.Location, rel []Tagged, o PublishOptions) (Published, error) {
	if loc.IsLayout() {
		return PublishLayout(loc, rel, o.DryRun)
	}
	rep, err := Publish(ctx, loc.Ref, rel, o)
	if err != nil {
		return nil, fault.Gate(err)
	}
	return rep, nil
}

// WriteText prints what a publish pushed (or, dry run, would push): one
// line a tag, then the totals.
func (rep *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var wouldUpload int64
	for _, p := range rep.Tags {
		fmt.Fprintf(tw, "%s\t%s\t%d bytes\t%d to upload\n", p.Ref, p.Digest, p.Size, p.Upload)
		wouldUpload += p.Upload
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var err error
	if rep.DryRun {
		_, err = fmt.Fprintf(w, "dry run: %d tags, %d blob bytes to upload; nothing pushed\n", len(rep.Tags), wouldUpload)
	} else {
		_, err = fmt.Fprintf(w, "published %d tags: uploaded %d blobs, %d bytes\n", len(rep.Tags), rep.UploadedBlobs, rep.Uploaded)
	}
	return err
}

// WriteText prints in as text.
func (in Inspected) WriteText(w io.Writer) error {
	in.Print(w, "")
	return nil
}
