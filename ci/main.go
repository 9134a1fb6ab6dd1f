// The dorisarm Dagger module: containers, cache volumes and fan-out around
// the dorisarm CLI, which holds all the logic (and is tested in this repo).
//
//	dagger call build --source=. --doris-source=../doris --target=kunpeng920 export --path=out
//	dagger call build-all --source=. --doris-source=../doris --targets=kunpeng920,graviton3 export --path=out
//	dagger call scan --source=. --build=out --target=kunpeng920 --allow=recipes/minidoris-scan-allow.yaml
//
// `dagger develop` generates internal/dagger (the SDK bindings) from
// dagger.json; it is not committed. The Dagger engine cannot run on the
// project's machines, so this file is kept small enough to review by eye, and
// cmd/dorisarm/ci_test.go checks every dorisarm command line in it against
// the CLI.
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"dagger/dorisarm/internal/dagger"
)

// Dorisarm builds Apache Doris for ARM servers.
type Dorisarm struct{}

const (
	// defaultImage has Go 1.26 on Debian 12, what scripts/install-deps.sh expects.
	defaultImage = "golang:1.26-bookworm"
	work         = "/work/dorisarm"
	tree         = "/work/doris"
	cacheDir     = "/cache/dorisarm"
	outDir       = "/out"
)

// container is the build container for a target: the platform's image (a
// native linux/arm64 one on arm64 runners, or the default platform with the
// cross toolchain), dorisarm built from source, caches mounted per target and
// compiler.
func (m *Dorisarm) container(source *dagger.Directory, target, platform, image, compiler string) *dagger.Container {
	if image == "" {
		image = defaultImage
	}
	opts := dagger.ContainerOpts{}
	if platform != "" {
		opts.Platform = dagger.Platform(platform)
	}
	key := strings.Join([]string{"dorisarm", target, compiler, platform}, "-")
	return dag.Container(opts).From(image).
		WithMountedCache("/var/cache/apt", dag.CacheVolume("dorisarm-apt-"+platform)).
		WithMountedCache("/root/go/pkg/mod", dag.CacheVolume("dorisarm-gomod")).
		WithMountedCache(cacheDir, dag.CacheVolume(key), dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModeLocked}).
		WithDirectory(work, source).
		WithWorkdir(work).
		WithExec([]string{"bash", "scripts/install-deps.sh"}).
		WithExec([]string{"go", "build", "-o", "/usr/local/bin/dorisarm", "./cmd/dorisarm"})
}

// Build builds one target and returns <out>/<doris>/<target>/. Without
// dorisSource it builds the bundled sample.
func (m *Dorisarm) Build(
	ctx context.Context,
	source *dagger.Directory,
	// +optional
	dorisSource *dagger.Directory,
	target string,
	// +optional
	dorisVersion string,
	// +optional
	mirror *dagger.Directory,
	// +optional
	platform string,
	// +optional
	image string,
	// +optional
	compiler string,
	// +optional
	pgoProfile *dagger.File,
) (*dagger.Directory, error) {
	ctr := m.container(source, target, platform, image, compiler)
	args := []string{"dorisarm", "build", "--target", target, "--out", outDir, "--cache", cacheDir}
	if dorisSource != nil {
		ctr = ctr.WithDirectory(tree, dorisSource)
		args = append(args, "--source", tree)
	}
	if dorisVersion != "" {
		args = append(args, "--doris", dorisVersion)
	}
	if mirror != nil {
		ctr = ctr.WithDirectory("/mirror", mirror)
		args = append(args, "--mirror", "/mirror")
	}
	if compiler != "" {
		args = append(args, "--compiler", compiler)
	}
	if pgoProfile != nil {
		ctr = ctr.WithFile("/pgo.profdata", pgoProfile)
		args = append(args, "--pgo-profile", "/pgo.profdata")
	}
	return ctr.WithExec(args).Directory(outDir), nil
}

// BuildAll builds targets concurrently and merges their outputs.
func (m *Dorisarm) BuildAll(
	ctx context.Context,
	source *dagger.Directory,
	// +optional
	dorisSource *dagger.Directory,
	targets []string,
	// +optional
	mirror *dagger.Directory,
	// +optional
	platform string,
) (*dagger.Directory, error) {
	outs, err := m.buildEach(ctx, source, dorisSource, targets, mirror, platform)
	if err != nil {
		return nil, err
	}
	merged := dag.Directory()
	for _, d := range outs {
		merged = merged.WithDirectory(".", d)
	}
	return merged, nil
}

// buildEach runs the targets' builds side by side; the result holds each
// target's output directory in the order of targets.
func (m *Dorisarm) buildEach(ctx context.Context, source, dorisSource *dagger.Directory, targets []string, mirror *dagger.Directory, platform string) ([]*dagger.Directory, error) {
	outs := make([]*dagger.Directory, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := m.Build(ctx, source, dorisSource, t, "", mirror, platform, "", "", nil)
			if err == nil {
				// Evaluate here so the builds really run side by side.
				_, err = d.Sync(ctx)
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", t, err)
			}
			outs[i] = d
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return outs, nil
}

// Scan scans a build directory with a target's policy and returns the report
// as Markdown (the CI step summary); a violation fails the call. allow holds
// reviewed exceptions (the sample's is recipes/minidoris-scan-allow.yaml).
func (m *Dorisarm) Scan(
	ctx context.Context,
	source *dagger.Directory,
	build *dagger.Directory,
	target string,
	// +optional
	allow *dagger.File,
) (string, error) {
	ctr := m.container(source, target, "", "", "").WithDirectory("/scan", build)
	args := []string{"dorisarm", "scan", "--target", target, "--format", "markdown"}
	if allow != nil {
		ctr = ctr.WithFile("/allow.yaml", allow)
		args = append(args, "--allow", "/allow.yaml")
	}
	return ctr.WithExec(append(args, "/scan")).Stdout(ctx)
}

// Release builds the targets side by side, scans each build with its own
// target's policy and, given repo, publishes the release images there
// (REGISTRY/PATH; credentials from registryConfig, a docker config.json)
// and signs and attests them: with signingKey (a cosign.key, its password
// in signingPassword) or, with keyless, the CI's OIDC identity (idToken).
// Promotion stays a separate, reviewed step (dorisarm promote).
func (m *Dorisarm) Release(
	ctx context.Context,
	source *dagger.Directory,
	// +optional
	dorisSource *dagger.Directory,
	targets []string,
	// +optional
	mirror *dagger.Directory,
	// +optional
	allow *dagger.File,
	// +optional
	repo string,
	// +optional
	registryConfig *dagger.Secret,
	// +optional
	base string,
	// +optional
	epoch string,
	// the Doris version of the release (its image tags), needed to sign
	// +optional
	version string,
	// +optional
	signingKey *dagger.Secret,
	// +optional
	signingPassword *dagger.Secret,
	// +optional
	keyless bool,
	// +optional
	idToken *dagger.Secret,
) (string, error) {
	outs, err := m.buildEach(ctx, source, dorisSource, targets, mirror, "")
	if err != nil {
		return "", err
	}
	var report strings.Builder
	for i, t := range targets {
		md, err := m.Scan(ctx, source, outs[i], t, allow)
		if err != nil {
			return "", fmt.Errorf("%s: %w", t, err)
		}
		report.WriteString(md)
	}
	if repo == "" {
		return report.String(), nil
	}
	merged := dag.Directory()
	for _, d := range outs {
		merged = merged.WithDirectory(".", d)
	}
	ctr := m.container(source, "release", "", "", "").WithDirectory(outDir, merged)
	if registryConfig != nil {
		ctr = ctr.WithMountedSecret("/root/.docker/config.json", registryConfig)
	}
	args := []string{"dorisarm", "publish", "--build", outDir, "--repo", repo}
	if dorisSource != nil {
		ctr = ctr.WithDirectory(tree, dorisSource)
		args = append(args, "--source", tree)
	}
	if base != "" {
		args = append(args, "--base", base)
	}
	if epoch != "" { // else the source tree's last commit (needs its .git)
		args = append(args, "--epoch", epoch)
	}
	ctr = ctr.WithExec(args)
	pub, err := ctr.Stdout(ctx)
	if err != nil {
		return "", err
	}
	report.WriteString("\n```\n" + pub + "```\n")
	if signingKey == nil && !keyless {
		return report.String(), nil
	}
	if version == "" {
		return "", fmt.Errorf("version is required to sign: the Doris version of the release (e.g. 2.1.8)")
	}
	for _, image := range []string{"doris-be", "doris-fe"} {
		sargs := []string{"dorisarm", "sign", "--build", outDir}
		sctr := ctr
		if keyless {
			sargs = append(sargs, "--keyless")
			if idToken != nil {
				sctr = sctr.WithSecretVariable("SIGSTORE_ID_TOKEN", idToken)
			}
		} else {
			sctr = sctr.WithMountedSecret("/run/secrets/cosign.key", signingKey)
			if signingPassword != nil {
				sctr = sctr.WithSecretVariable("COSIGN_PASSWORD", signingPassword)
			} else {
				sctr = sctr.WithEnvVariable("COSIGN_PASSWORD", "")
			}
			sargs = append(sargs, "--key", "/run/secrets/cosign.key")
		}
		signed, err := sctr.WithExec(append(sargs, repo+"/"+image+":"+version)).Stdout(ctx)
		if err != nil {
			return "", err
		}
		report.WriteString("\n```\n" + signed + "```\n")
	}
	return report.String(), nil
}
