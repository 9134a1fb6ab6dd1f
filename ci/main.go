// The dorisarm Dagger module: containers, cache volumes and fan-out around
// the dorisarm CLI, which holds all the logic (and is tested in this repo).
//
//	dagger call build --target=kunpeng920 --platform=linux/arm64 export --path=out
//	dagger call build-all --doris-source=../doris --targets=kunpeng920,graviton3 export --path=out
//	dagger call scan --build=out/2.1.8/kunpeng920 --target=kunpeng920 --allow=recipes/minidoris-scan-allow.yaml
//
// --source defaults to the repository holding dagger.json (without .git,
// out/, .cache/, ci/ and .github/). `dagger develop` generates
// internal/dagger (the SDK bindings) from dagger.json; it is not committed.
// The Dagger engine cannot run on the project's machines, so no function
// here has been executed there; `make test-ci-module` builds and vets this
// file against the real SDK (dagger.io/dagger at dagger.json's
// engineVersion), and cmd/dorisarm/ci_test.go checks every dorisarm command
// line in it against the CLI.
//
// How a build container is layered (each layer is shared by everything
// below it, so the slow ones are keyed by as little as possible):
//
//  1. the image for the platform (golang:1.26-bookworm: Go 1.26, Debian 12);
//  2. scripts/install-deps.sh --profile build, copied in alone: only a
//     change to that script (or the image) reruns it; apt's downloads and
//     lists live in cache volumes per platform and image, LOCKED because
//     apt takes a lock on them;
//  3. dorisarm built from the source, with Go's module and build caches in
//     cache volumes (GOMODCACHE, GOCACHE: set, not guessed from GOPATH);
//  4. the source tree, then last the target's own cache volume (dorisarm's
//     step cache and sysroots, keyed by target, compiler and platform), so
//     targets share layers 1-3 and only their builds run side by side.
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
	depsScript   = "/usr/local/share/dorisarm/install-deps.sh"
	goModCache   = "/cache/go/mod"
	goBuildCache = "/cache/go/build"
)

// platformKey is the platform the containers run on, as given or else the
// engine's default, and the same text made fit for a cache volume name: a
// call with --platform=linux/arm64 and one without it on an arm64 engine
// share their caches.
func platformKey(ctx context.Context, platform string) (dagger.Platform, string, error) {
	p := dagger.Platform(platform)
	if p == "" {
		var err error
		if p, err = dag.DefaultPlatform(ctx); err != nil {
			return "", "", fmt.Errorf("the engine's default platform: %w", err)
		}
	}
	key := string(p)
	if k, ok := strings.CutSuffix(key, "/arm64/v8"); ok {
		key = k + "/arm64" // the same platform, however it was spelled
	}
	return p, strings.NewReplacer("/", "-", ":", "-").Replace(key), nil
}

// toolbox is the image with what a build needs installed (layers 1-3
// above) and dorisarm on PATH; nothing in it depends on the target.
func (m *Dorisarm) toolbox(ctx context.Context, source *dagger.Directory, platform, image string) (*dagger.Container, string, error) {
	if image == "" {
		image = defaultImage
	}
	p, key, err := platformKey(ctx, platform)
	if err != nil {
		return nil, "", err
	}
	imageKey := strings.NewReplacer("/", "-", ":", "-", "@", "-").Replace(image)
	locked := dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModeLocked}
	ctr := dag.Container(dagger.ContainerOpts{Platform: p}).From(image).
		WithEnvVariable("DEBIAN_FRONTEND", "noninteractive").
		// Debian images delete every downloaded package after install
		// (docker-clean); keep them, in the cache volume below.
		WithExec([]string{"sh", "-c", `rm -f /etc/apt/apt.conf.d/docker-clean && echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' > /etc/apt/apt.conf.d/keep-cache`}).
		WithMountedCache("/var/cache/apt", dag.CacheVolume("dorisarm-apt-archives-"+key+"-"+imageKey), locked).
		WithMountedCache("/var/lib/apt/lists", dag.CacheVolume("dorisarm-apt-lists-"+key+"-"+imageKey), locked).
		WithFile(depsScript, source.File("scripts/install-deps.sh")).
		WithExec([]string{"bash", depsScript, "--profile", "build"}).
		// Unmounted again: a LOCKED volume left mounted would make every
		// later step, the targets' builds too, wait for the others.
		WithoutMount("/var/cache/apt").
		WithoutMount("/var/lib/apt/lists").
		WithEnvVariable("GOMODCACHE", goModCache).
		WithEnvVariable("GOCACHE", goBuildCache)
	// dorisarm itself, built where the Go caches are mounted; only the
	// binary goes on.
	bin := ctr.
		WithMountedCache(goModCache, dag.CacheVolume("dorisarm-go-mod")).
		WithMountedCache(goBuildCache, dag.CacheVolume("dorisarm-go-build-"+key)).
		WithDirectory("/src", source).
		WithWorkdir("/src").
		WithExec([]string{"go", "build", "-o", "/usr/local/bin/dorisarm", "./cmd/dorisarm"}).
		File("/usr/local/bin/dorisarm")
	return ctr.WithFile("/usr/local/bin/dorisarm", bin), key, nil
}

// container is the build container for a target: the toolbox, the source
// tree, and last the target's cache volume.
func (m *Dorisarm) container(ctx context.Context, source *dagger.Directory, target, platform, image, compiler string) (*dagger.Container, error) {
	ctr, key, err := m.toolbox(ctx, source, platform, image)
	if err != nil {
		return nil, err
	}
	vol := strings.Join([]string{"dorisarm", target, compiler, key}, "-")
	return ctr.
		WithDirectory(work, source).
		WithWorkdir(work).
		WithMountedCache(cacheDir, dag.CacheVolume(vol), dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModeLocked}), nil
}

// Build builds one target and returns <out>/<doris>/<target>/. Without
// dorisSource it builds the bundled sample.
//
// The container runs on platform (default: the engine's). Targets of the
// other ISA are cross-compiled in it: on an arm64 runner the x86_64 target
// (the linux/amd64 side of the multi-arch images) is built with the x86-64
// cross compilers or clang, and its smoke runs go through qemu-x86_64, just
// as the ARM targets are cross-compiled on an x86 machine.
func (m *Dorisarm) Build(
	ctx context.Context,
	// the dorisarm repository (matrix.yaml, recipes/, patches/, the sample)
	// +defaultPath="/"
	// +ignore=[".git", "out", ".cache", "ci", ".github"]
	source *dagger.Directory,
	// an Apache Doris source tree (default: the bundled sample)
	// +optional
	// +ignore=[".git"]
	dorisSource *dagger.Directory,
	target string,
	// +optional
	dorisVersion string,
	// +optional
	mirror *dagger.Directory,
	// e.g. linux/arm64 (default: the engine's platform)
	// +optional
	platform string,
	// +optional
	image string,
	// +optional
	compiler string,
	// +optional
	pgoProfile *dagger.File,
	// a registry repository shared by every runner's builds (REGISTRY/PATH):
	// steps missing from the cache volume are restored from it
	// +optional
	cacheRepo string,
	// also offer every step result to cacheRepo (trusted branches only)
	// +optional
	pushCache bool,
	// a docker config.json with credentials for cacheRepo
	// +optional
	registryConfig *dagger.Secret,
	// the keyless identity cacheRepo's entries must be signed by (e.g. the
	// main branch's build workflow): nothing unsigned enters a build
	// +optional
	cacheIdentity string,
	// the OIDC issuer of cacheIdentity (default GitHub Actions')
	// +optional
	cacheIssuer string,
	// take and push cacheRepo's entries unsigned (a private registry only)
	// +optional
	cacheTrustUnsigned bool,
	// an OIDC token for audience sigstore: pushCache signs each entry
	// keyless with it (GitHub's expire minutes after they are fetched:
	// prefer actionsTokenUrl and actionsToken)
	// +optional
	cacheIdToken *dagger.Secret,
	// GitHub Actions' ACTIONS_ID_TOKEN_REQUEST_URL and
	// ACTIONS_ID_TOKEN_REQUEST_TOKEN (env:ACTIONS_ID_TOKEN_REQUEST_URL):
	// a token is fetched for each certificate, however long the build
	// +optional
	actionsTokenUrl *dagger.Secret,
	// +optional
	actionsToken *dagger.Secret,
) (*dagger.Directory, error) {
	ctr, err := m.container(ctx, source, target, platform, image, compiler)
	if err != nil {
		return nil, err
	}
	args := []string{"dorisarm", "build", "--target", target, "--out", outDir, "--cache", cacheDir}
	if cacheRepo != "" {
		// After the cache volume: the layers above stay shared by every target.
		if registryConfig != nil {
			ctr = ctr.WithMountedSecret("/root/.docker/config.json", registryConfig)
		}
		args = append(args, "--cache-from", cacheRepo)
		switch {
		case cacheIdentity != "":
			if cacheIssuer == "" {
				cacheIssuer = "https://token.actions.githubusercontent.com"
			}
			args = append(args, "--cache-identity", cacheIdentity, "--cache-issuer", cacheIssuer)
		case cacheTrustUnsigned:
			args = append(args, "--cache-trust-unsigned")
		default:
			return nil, fmt.Errorf("cacheRepo %s: pass cacheIdentity (whose signatures its entries must carry) or cacheTrustUnsigned", cacheRepo)
		}
		if pushCache {
			args = append(args, "--cache-to", cacheRepo)
			switch {
			case actionsTokenUrl != nil && actionsToken != nil:
				ctr = withActionsToken(ctr, actionsTokenUrl, actionsToken)
				args = append(args, "--cache-keyless")
			case cacheIdToken != nil:
				ctr = ctr.WithSecretVariable("SIGSTORE_ID_TOKEN", cacheIdToken)
				args = append(args, "--cache-keyless")
			case !cacheTrustUnsigned:
				return nil, fmt.Errorf("pushCache: pass actionsTokenUrl and actionsToken (or cacheIdToken): entries are signed keyless; or cacheTrustUnsigned")
			}
		}
	}
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
	// Build steps run in a bubblewrap sandbox of their own (PID, network
	// and mount namespaces; dorisarm refuses to run them otherwise): as
	// root it needs CAP_SYS_ADMIN, which a default exec lacks, and the
	// engine's seccomp profile refuses unprivileged user namespaces.
	return ctr.WithExec(args, dagger.ContainerWithExecOpts{InsecureRootCapabilities: true}).Directory(outDir), nil
}

// BuildAll builds targets concurrently and merges their outputs.
func (m *Dorisarm) BuildAll(
	ctx context.Context,
	// +defaultPath="/"
	// +ignore=[".git", "out", ".cache", "ci", ".github"]
	source *dagger.Directory,
	// +optional
	// +ignore=[".git"]
	dorisSource *dagger.Directory,
	targets []string,
	// +optional
	mirror *dagger.Directory,
	// +optional
	platform string,
	// +optional
	cacheRepo string,
	// +optional
	pushCache bool,
	// +optional
	registryConfig *dagger.Secret,
	// +optional
	cacheIdentity string,
	// +optional
	cacheIssuer string,
	// +optional
	cacheTrustUnsigned bool,
	// +optional
	cacheIdToken *dagger.Secret,
	// +optional
	actionsTokenUrl *dagger.Secret,
	// +optional
	actionsToken *dagger.Secret,
) (*dagger.Directory, error) {
	outs, err := m.buildEach(ctx, source, dorisSource, targets, mirror, platform, remoteCache{cacheRepo, pushCache, registryConfig, cacheIdentity, cacheIssuer, cacheTrustUnsigned, cacheIdToken, actionsTokenUrl, actionsToken})
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
// remoteCache is the registry cache the builds share (none when repo is "").
type remoteCache struct {
	repo          string
	push          bool
	config        *dagger.Secret
	identity      string
	issuer        string
	trustUnsigned bool
	idToken       *dagger.Secret
	actionsURL    *dagger.Secret
	actionsToken  *dagger.Secret
}

// withActionsToken gives ctr GitHub Actions' token endpoint: dorisarm's
// keyless signer fetches a token for each certificate from it.
func withActionsToken(ctr *dagger.Container, url, token *dagger.Secret) *dagger.Container {
	return ctr.WithSecretVariable("ACTIONS_ID_TOKEN_REQUEST_URL", url).WithSecretVariable("ACTIONS_ID_TOKEN_REQUEST_TOKEN", token)
}

func (m *Dorisarm) buildEach(ctx context.Context, source, dorisSource *dagger.Directory, targets []string, mirror *dagger.Directory, platform string, rc remoteCache) ([]*dagger.Directory, error) {
	outs := make([]*dagger.Directory, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := m.Build(ctx, source, dorisSource, t, "", mirror, platform, "", "", nil, rc.repo, rc.push, rc.config, rc.identity, rc.issuer, rc.trustUnsigned, rc.idToken, rc.actionsURL, rc.actionsToken)
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
	// +defaultPath="/"
	// +ignore=[".git", "out", ".cache", "ci", ".github"]
	source *dagger.Directory,
	build *dagger.Directory,
	target string,
	// +optional
	allow *dagger.File,
	// +optional
	platform string,
) (string, error) {
	ctr, _, err := m.toolbox(ctx, source, platform, "")
	if err != nil {
		return "", err
	}
	ctr = ctr.WithDirectory(work, source).WithWorkdir(work).WithDirectory("/scan", build)
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
//
// The source trees reach the module without .git, so the images' dates and
// revision label are passed in: epoch (seconds, e.g. git log -1
// --format=%ct) and revision (the commit). Publishing refuses to guess them.
func (m *Dorisarm) Release(
	ctx context.Context,
	// +defaultPath="/"
	// +ignore=[".git", "out", ".cache", "ci", ".github"]
	source *dagger.Directory,
	// +optional
	// +ignore=[".git"]
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
	// the images' date, seconds since 1970 (required with repo)
	// +optional
	epoch string,
	// the commit the images are labelled with (org.opencontainers.image.revision)
	// +optional
	revision string,
	// the Doris version of the release (its image tags), needed to sign
	// +optional
	version string,
	// +optional
	signingKey *dagger.Secret,
	// +optional
	signingPassword *dagger.Secret,
	// +optional
	keyless bool,
	// an OIDC token for audience sigstore (GitHub's expire minutes after
	// they are fetched: prefer actionsTokenUrl and actionsToken)
	// +optional
	idToken *dagger.Secret,
	// GitHub Actions' ACTIONS_ID_TOKEN_REQUEST_URL and
	// ACTIONS_ID_TOKEN_REQUEST_TOKEN: with keyless, each certificate (of
	// the images and of the cache entries pushed) gets a token fetched
	// for it, however long the build before it took
	// +optional
	actionsTokenUrl *dagger.Secret,
	// +optional
	actionsToken *dagger.Secret,
	// e.g. linux/arm64 (default: the engine's platform)
	// +optional
	platform string,
	// the shared step cache (see Build); registryConfig's credentials are used
	// +optional
	cacheRepo string,
	// +optional
	pushCache bool,
	// whose signatures the shared cache's entries must carry (see Build)
	// +optional
	cacheIdentity string,
	// +optional
	cacheIssuer string,
	// +optional
	cacheTrustUnsigned bool,
) (string, error) {
	if repo != "" && epoch == "" {
		return "", fmt.Errorf("epoch is required to publish: the source reaches the module without .git; pass --epoch=$(git log -1 --format=%%ct) (and --revision=$(git rev-parse HEAD))")
	}
	if repo != "" && (signingKey != nil || keyless) && version == "" {
		return "", fmt.Errorf("version is required to sign: the Doris version of the release (e.g. 2.1.8)")
	}
	outs, err := m.buildEach(ctx, source, dorisSource, targets, mirror, platform, remoteCache{cacheRepo, pushCache, registryConfig, cacheIdentity, cacheIssuer, cacheTrustUnsigned, idToken, actionsTokenUrl, actionsToken})
	if err != nil {
		return "", err
	}
	var report strings.Builder
	for i, t := range targets {
		md, err := m.Scan(ctx, source, outs[i], t, allow, platform)
		if err != nil {
			return "", fmt.Errorf("%s: %w", t, err)
		}
		report.WriteString(md)
	}
	if repo == "" {
		return report.String(), nil
	}
	ctr, pub, err := m.publishImages(ctx, source, dorisSource, outs, platform, registryConfig, repo, epoch, revision, base)
	if err != nil {
		return "", err
	}
	report.WriteString("\n```\n" + pub + "```\n")
	if signingKey == nil && !keyless {
		return report.String(), nil
	}
	signed, err := signImages(ctx, ctr, repo+"/", version, keyless, signingKey, signingPassword, idToken, actionsTokenUrl, actionsToken)
	if err != nil {
		return "", err
	}
	report.WriteString(signed)
	return report.String(), nil
}

// publishImages publishes the builds' images to repo with dorisarm
// publish, in the module's toolbox; it returns the container (the builds
// and credentials in it, for signing) and what publish printed.
func (m *Dorisarm) publishImages(ctx context.Context, source, dorisSource *dagger.Directory, outs []*dagger.Directory, platform string, registryConfig *dagger.Secret, repo, epoch, revision, base string) (*dagger.Container, string, error) {
	merged := dag.Directory()
	for _, d := range outs {
		merged = merged.WithDirectory(".", d)
	}
	ctr, _, err := m.toolbox(ctx, source, platform, "")
	if err != nil {
		return nil, "", err
	}
	ctr = ctr.WithDirectory(work, source).WithWorkdir(work).WithDirectory(outDir, merged)
	if registryConfig != nil {
		ctr = ctr.WithMountedSecret("/root/.docker/config.json", registryConfig)
	}
	args := []string{"dorisarm", "publish", "--build", outDir, "--repo", repo, "--epoch", epoch}
	if dorisSource != nil {
		ctr = ctr.WithDirectory(tree, dorisSource)
		args = append(args, "--source", tree)
	}
	if revision != "" {
		args = append(args, "--revision", revision)
	}
	if base != "" {
		args = append(args, "--base", base)
	}
	ctr = ctr.WithExec(args)
	pub, err := ctr.Stdout(ctx)
	if err != nil {
		return nil, "", err
	}
	return ctr, pub, nil
}

// signImages signs and attests the release's images in ctr (where they
// were published): keyless with a fresh GitHub Actions token per
// certificate (or a given OIDC token), or with a key.
func signImages(ctx context.Context, ctr *dagger.Container, repo, version string, keyless bool, signingKey, signingPassword, idToken, actionsTokenUrl, actionsToken *dagger.Secret) (string, error) {
	var report strings.Builder
	for _, image := range []string{"doris-be", "doris-fe"} {
		sargs := []string{"dorisarm", "sign", "--build", outDir}
		sctr := ctr
		if keyless {
			sargs = append(sargs, "--keyless")
			switch {
			case actionsTokenUrl != nil && actionsToken != nil:
				sctr = withActionsToken(sctr, actionsTokenUrl, actionsToken)
			case idToken != nil:
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
		signed, err := sctr.WithExec(append(sargs, repo+image+":"+version)).Stdout(ctx)
		if err != nil {
			return "", err
		}
		report.WriteString("\n```\n" + signed + "```\n")
	}
	return report.String(), nil
}
