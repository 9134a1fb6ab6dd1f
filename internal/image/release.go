package image

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dorisarm/dorisarm/internal/build"
	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
	"github.com/dorisarm/dorisarm/internal/recipe"
)

// Annotation keys of dorisarm's own, beside the org.opencontainers.image ones.
const (
	AnnTarget   = "io.dorisarm.target"
	AnnCPU      = "io.dorisarm.cpu"
	AnnMarch    = "io.dorisarm.march"
	AnnCompiler = "io.dorisarm.compiler"
	AnnPGO      = "io.dorisarm.pgo"
	AnnPGONone  = "io.dorisarm.pgo.none"
	AnnLTO      = "io.dorisarm.lto"
	AnnPatches  = "io.dorisarm.patches.digest"
	// AnnBuild is the build's content digest (build.Record.ContentDigest:
	// plan keys and outputs), stable across rebuilds of the same outputs.
	AnnBuild = "io.dorisarm.build.digest"
	// AnnShared marks a shared image (one for every target: the Java FE)
	// and its index with the TreeID of the directory it holds, the same in
	// every build it was made from: attestations find those builds by it.
	AnnShared  = "io.dorisarm.shared.tree"
	AnnBase    = "org.opencontainers.image.base.name"
	AnnBaseDig = "org.opencontainers.image.base.digest"
)

// Build is one published build found under a build directory.
type Build struct {
	Dir    string
	Record *build.Record
}

// FindBuilds returns every build under out (<out>/<doris>/<target>/), each
// checked against its record, in a stable order.
func FindBuilds(out string) ([]Build, error) {
	bs, err := findBuilds(out)
	return bs, fault.Input(err)
}

func findBuilds(out string) ([]Build, error) {
	recs, err := filepath.Glob(filepath.Join(out, "*", "*", build.RecordFile))
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s holds no builds (<doris>/<target>/%s): run dorisarm build --out %s first", out, build.RecordFile, out)
	}
	// A partial build (--keep-going, some packages failed) is never a release.
	recs = slices.DeleteFunc(recs, func(r string) bool { return strings.HasSuffix(filepath.Dir(r), build.PartialSuffix) })
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s holds only partial builds (<target>%s: some packages failed): fix them and build again", out, build.PartialSuffix)
	}
	sort.Strings(recs)
	// Every directory beside a build must be a build too: a target directory
	// without its record is a build that failed or was copied in by hand.
	versions := map[string]bool{}
	for _, r := range recs {
		versions[filepath.Dir(filepath.Dir(r))] = true
	}
	for v := range versions {
		ents, err := os.ReadDir(v)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || strings.HasSuffix(e.Name(), build.PartialSuffix) {
				continue
			}
			if _, err := os.Stat(filepath.Join(v, e.Name(), build.RecordFile)); err != nil {
				return nil, fmt.Errorf("%s has no build record (%s): rebuild it with dorisarm build, or remove it", filepath.Join(v, e.Name()), build.RecordFile)
			}
		}
	}
	var bs []Build
	for _, r := range recs {
		dir := filepath.Dir(r)
		rec, err := build.Verify(dir)
		if err != nil {
			return nil, err
		}
		bs = append(bs, Build{Dir: dir, Record: rec})
	}
	return bs, nil
}

// Options are what a release's images are made with.
type Options struct {
	// Epoch dates every layer entry and config (SOURCE_DATE_EPOCH).
	Epoch time.Time
	// Base gives the base image for a platform and target's configured base
	// reference; nil means empty (scratch) bases.
	Base func(platform v1.Platform, ref string) (v1.Image, string, error)
	// Revision and Source fill org.opencontainers.image.revision/source.
	Revision, Source string
	// IndexImage names an image of the user's for a platform of an image's
	// multi-arch index (e.g. doris-be, linux/amd64 from an official x86
	// release); nil image: none, the platform's index target is used.
	IndexImage func(name string, platform v1.Platform) (v1.Image, string, error)
}

// AnnImported marks an index entry that is an image the user named, not one
// of the release's builds.
const AnnImported = "io.dorisarm.imported-from"

// Tagged is one image or index of a release with its tag (e.g.
// doris-be:2.1.8-kunpeng920, doris-be:2.1.8).
type Tagged struct {
	Repo  string // image name: doris-be
	Tag   string
	Image v1.Image
	Index v1.ImageIndex
}

// Release makes the images of every build under out: for each recipe image
// and Doris version, <name>:<version>-<target> for each non-shared image of
// each target of the index ISA's kind, <name>:<version> as a multi-arch index
// of each ISA's index target, and <name>:<version> directly for shared images.
// Its errors are bad input: builds that do not make a release together.
func Release(m *matrix.Matrix, r *recipe.Recipe, builds []Build, o Options) ([]Tagged, error) {
	rel, err := release(m, r, builds, o)
	return rel, fault.Input(err)
}

func release(m *matrix.Matrix, r *recipe.Recipe, builds []Build, o Options) ([]Tagged, error) {
	for _, b := range builds {
		if b.Record.Recipe.Name != r.Name {
			return nil, fmt.Errorf("%s was built with recipe %s, not %s (--recipe %s)", b.Dir, b.Record.Recipe.Name, r.Name, r.File)
		}
	}
	if len(r.Images) == 0 {
		return nil, fmt.Errorf("recipe %s names no images (images: in %s)", r.Name, r.File)
	}
	byVersion := map[string][]Build{}
	var versions []string
	for _, b := range builds {
		if _, ok := m.Targets[b.Record.Cell.Target]; !ok {
			return nil, fmt.Errorf("%s is a build for target %q, which %s does not define", b.Dir, b.Record.Cell.Target, m.File)
		}
		v := b.Record.Cell.Doris
		if _, ok := byVersion[v]; !ok {
			versions = append(versions, v)
		}
		byVersion[v] = append(byVersion[v], b)
	}
	sort.Strings(versions)
	var out []Tagged
	names := make([]string, 0, len(r.Images))
	for n := range r.Images {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, v := range versions {
		for _, name := range names {
			spec := r.Images[name]
			ts, err := releaseImage(m, name, spec, v, byVersion[v], o)
			if err != nil {
				return nil, err
			}
			out = append(out, ts...)
		}
	}
	return out, nil
}

func releaseImage(m *matrix.Matrix, name string, spec *recipe.ImageSpec, version string, builds []Build, o Options) ([]Tagged, error) {
	var out []Tagged
	var adds []mutate.IndexAddendum
	isas := make([]string, 0, len(m.ISAs))
	for n := range m.ISAs {
		isas = append(isas, n)
	}
	sort.Strings(isas)
	byTarget := map[string]Build{}
	for _, b := range builds {
		byTarget[b.Record.Cell.Target] = b
	}
	sharedTree := ""
	if spec.Shared {
		// One image for every target, checked to be the same everywhere
		// and made, for each ISA, from the first build of that ISA.
		first, err := TreeID(filepath.Join(builds[0].Dir, spec.From))
		if err != nil {
			return nil, err
		}
		sharedTree = first.String()
		for _, b := range builds[1:] {
			id, err := TreeID(filepath.Join(b.Dir, spec.From))
			if err != nil {
				return nil, err
			}
			if id != first {
				return nil, fmt.Errorf("image %s is shared by all targets, but %s/ of %s differs from %s's; rebuild them from the same source", name, spec.From, b.Record.Cell.Target, builds[0].Record.Cell.Target)
			}
		}
		for _, isa := range isas {
			b, ok := builds[0], false
			for _, c := range builds {
				if c.Record.Cell.ISA == isa {
					b, ok = c, true
					break
				}
			}
			if !ok {
				continue
			}
			img, err := targetImage(m, name, spec, b, o, sharedTree)
			if err != nil {
				return nil, err
			}
			adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: platform(m.ISAs[isa])}})
		}
	} else {
		// The index reuses the per-target images: each layer is read and
		// compressed for its digest once, not once per tag.
		perTarget := map[string]v1.Image{}
		for _, b := range builds {
			img, err := targetImage(m, name, spec, b, o, "")
			if err != nil {
				return nil, err
			}
			perTarget[b.Record.Cell.Target] = img
			out = append(out, Tagged{Repo: name, Tag: version + "-" + b.Record.Cell.Target, Image: img})
		}
		for _, isa := range isas {
			if o.IndexImage != nil {
				img, ref, err := o.IndexImage(name, *platform(m.ISAs[isa]))
				if err != nil {
					return nil, fmt.Errorf("%s:%s %s: %w", name, version, platform(m.ISAs[isa]), err)
				}
				if img != nil {
					adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: platform(m.ISAs[isa]), Annotations: map[string]string{AnnImported: ref}}})
					continue
				}
			}
			b, ok := byTarget[m.ISAs[isa].IndexTarget]
			if !ok {
				continue
			}
			img := perTarget[b.Record.Cell.Target]
			ann := map[string]string{AnnTarget: b.Record.Cell.Target, AnnCPU: b.Record.Cell.CPU}
			adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: platform(m.ISAs[isa]), Annotations: ann}})
		}
	}
	if len(adds) > 0 {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		idx = mutate.AppendManifests(idx, adds...)
		ann := map[string]string{
			"org.opencontainers.image.title":   name,
			"org.opencontainers.image.version": version,
			"org.opencontainers.image.created": o.Epoch.UTC().Format(time.RFC3339),
		}
		if sharedTree != "" {
			ann[AnnShared] = sharedTree
		}
		idx = mutate.Annotations(idx, ann).(v1.ImageIndex)
		out = append(out, Tagged{Repo: name, Tag: version, Index: idx})
	}
	return out, nil
}

func platform(isa *matrix.ISA) *v1.Platform {
	return &v1.Platform{OS: isa.OCI.OS, Architecture: isa.OCI.Architecture, Variant: isa.OCI.Variant}
}

// targetImage is the image of one build: base, one layer of the build's
// spec.From directory, the spec's configuration, and annotations saying
// what is inside. A shared image (sharedTree, its tree's TreeID) carries no
// target-specific annotations, only that tree's identity.
func targetImage(m *matrix.Matrix, name string, spec *recipe.ImageSpec, b Build, o Options, sharedTree string) (v1.Image, error) {
	rec := b.Record
	isa, ok := m.ISAs[rec.Cell.ISA]
	if !ok {
		return nil, fmt.Errorf("%s: isa %q of the build record is not in the matrix", b.Dir, rec.Cell.ISA)
	}
	plat := platform(isa)
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	baseRef, baseDigest := "", ""
	if t, ok := m.Targets[rec.Cell.Target]; ok && o.Base != nil {
		img, ref, err := o.Base(*plat, t.BaseImage)
		if err != nil {
			return nil, fmt.Errorf("base image for %s: %w", rec.Cell.Target, err)
		}
		if img != nil {
			d, err := img.Digest()
			if err != nil {
				return nil, fmt.Errorf("base image %s: %w", ref, err)
			}
			base, baseRef, baseDigest = img, ref, d.String()
		}
	}
	src := filepath.Join(b.Dir, spec.From)
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s: the build has no %s/ for image %s", b.Dir, spec.From, name)
	}
	layer, err := buildLayer(b, spec.From, spec.Path, o.Epoch)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Epoch}, CreatedBy: "dorisarm image build: " + spec.From + "/ -> " + spec.Path,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: o.Epoch}
	cf.Config.Entrypoint = spec.Entrypoint
	cf.Config.Cmd = spec.Cmd
	cf.Config.Env = mergeEnv(cf.Config.Env, spec.Env)
	cf.Config.User = spec.User
	cf.Config.WorkingDir = spec.Workdir
	if len(spec.Ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range spec.Ports {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	ann := map[string]string{
		"org.opencontainers.image.title":   name,
		"org.opencontainers.image.version": rec.Cell.Doris,
		"org.opencontainers.image.created": o.Epoch.UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		ann["org.opencontainers.image.revision"] = o.Revision
	}
	if o.Source != "" {
		ann["org.opencontainers.image.source"] = o.Source
	}
	if baseRef != "" {
		ann[AnnBase], ann[AnnBaseDig] = baseRef, baseDigest
	}
	if sharedTree != "" {
		ann[AnnShared] = sharedTree
	} else {
		ann[AnnTarget] = rec.Cell.Target
		ann[AnnCPU] = rec.Cell.CPU
		ann[AnnMarch] = rec.Cell.March
		ann[AnnCompiler] = rec.Compiler.Name + " " + rec.Compiler.Version
		ann[AnnPGO] = strconv.FormatBool(rec.Cell.PGO)
		if rec.Cell.PGONone != "" {
			ann[AnnPGONone] = rec.Cell.PGONone
		}
		if rec.Cell.LTO != "" {
			ann[AnnLTO] = rec.Cell.LTO
		}
		ann[AnnPatches] = patchSetDigest(rec)
		ann[AnnBuild] = rec.ContentDigest()
	}
	labels := map[string]string{}
	for k, v := range cf.Config.Labels {
		labels[k] = v
	}
	for k, v := range ann {
		labels[k] = v
	}
	cf.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, ann).(v1.Image), nil
}

// patchSetDigest identifies the patches a build applied: sha256 over their
// sorted "id sha256" lines.
func patchSetDigest(rec *build.Record) string {
	lines := make([]string, 0, len(rec.Patches))
	for _, p := range rec.Patches {
		lines = append(lines, p.ID+" "+p.SHA256)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// mergeEnv sets the spec's NAME=value pairs over the base image's.
func mergeEnv(base, set []string) []string {
	out := append([]string{}, base...)
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, old := range out {
			if ok, _, _ := strings.Cut(old, "="); ok == k {
				out[i], replaced = kv, true
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}

// TreeID identifies a directory's files, modes and links (the digest of
// its layer tar, uncompressed, with fixed dates).
func TreeID(dir string) (v1.Hash, error) {
	l, err := Layer(dir, "/x", time.Unix(0, 0))
	if err != nil {
		return v1.Hash{}, err
	}
	return l.DiffID()
}
