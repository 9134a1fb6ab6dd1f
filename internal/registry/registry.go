// Package registry is how dorisarm names and reaches images: one Options
// (plain HTTP, credentials, transport) made once from the command line, and
// one Location grammar — oci:DIR[:NAME:TAG] for an OCI layout, anything else
// a registry reference — used by every command that reads or writes images.
package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// Options say how to reach registries. The zero value uses the docker
// config's credentials (~/.docker/config.json and its helpers) and plain
// HTTP for loopback registries only.
type Options struct {
	// Insecure allows plain HTTP to registries that are not on loopback.
	Insecure bool
	// Auth, when set, is used for every registry instead of the keychain.
	Auth authn.Authenticator
	// Transport, when set, carries every request (tests, counting).
	Transport http.RoundTripper
	// Jobs is how many blobs move at once (0: ggcr's default).
	Jobs int
	// Backoff, when set, replaces ggcr's retry schedule for transient
	// errors (5xx, connection resets).
	Backoff *remote.Backoff
	// Stall is how long a registry may send nothing before a request
	// fails (0: DefaultStall); see guard.
	Stall time.Duration
	// MinRate is the slowest average a response body may arrive at, in
	// bytes per second, after a first stall period (0: DefaultMinRate); a
	// read that keeps moving but slower fails too. See guard.
	MinRate int64
}

func (o Options) nameOptions() []name.Option {
	if o.Insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}

// ReadPassword sets o's credentials to username and the password read from
// r, as --password-stdin does: up to 1 MiB, without its line end.
func (o *Options) ReadPassword(username string, r io.Reader) error {
	if username == "" {
		return fault.Inputf("--password-stdin needs --username")
	}
	pw, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return err
	}
	o.Auth = &authn.Basic{Username: username, Password: strings.TrimRight(string(pw), "\r\n")}
	return nil
}

// Reference parses a registry reference (REGISTRY/PATH:TAG or @DIGEST).
func (o Options) Reference(s string) (name.Reference, error) {
	r, err := name.ParseReference(s, o.nameOptions()...)
	if err != nil {
		return nil, fmt.Errorf("%s: not an image reference (REGISTRY/PATH:TAG or @sha256:…): %w", s, err)
	}
	return r, nil
}

// Tag parses REGISTRY/PATH:TAG.
func (o Options) Tag(s string) (name.Tag, error) {
	t, err := name.NewTag(s, append(o.nameOptions(), name.StrictValidation)...)
	if err != nil {
		return name.Tag{}, fmt.Errorf("%s: want REGISTRY/PATH:TAG: %w", s, err)
	}
	return t, nil
}

// Repository parses REGISTRY/PATH (no tag, no digest).
func (o Options) Repository(s string) (name.Repository, error) {
	if strings.Contains(s, "@") || strings.Contains(s[strings.LastIndex(s, "/")+1:], ":") {
		return name.Repository{}, fmt.Errorf("%s: want a repository, REGISTRY/PATH, without a tag or digest", s)
	}
	r, err := name.NewRepository(strings.TrimSuffix(s, "/"), o.nameOptions()...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("%s: want a repository, REGISTRY/PATH: %w", s, err)
	}
	return r, nil
}

// Prefix checks a repository prefix, REGISTRY or REGISTRY/PATH without a
// tag or digest, under which images are named (PREFIX/doris-be); a
// registry's root is one. It returns the prefix in canonical form, without
// a trailing slash.
func (o Options) Prefix(s string) (string, error) {
	s = strings.TrimSuffix(s, "/")
	i := strings.LastIndex(s, "/")
	r, err := name.NewRepository(s+"/x", o.nameOptions()...)
	if err != nil || strings.Contains(s, "@") || i >= 0 && strings.Contains(s[i+1:], ":") {
		return "", fmt.Errorf("%s: want a repository prefix without a tag (e.g. 127.0.0.1:5000/release)", s)
	}
	return strings.TrimSuffix(r.String(), "/x"), nil
}

// Remote is the option list for go-containerregistry's remote package:
// ctx (so Ctrl-C stops every request), credentials, the transport under the
// guard (manifests checked against their digests, stalls bounded), jobs and
// retries, then extra.
func (o Options) Remote(ctx context.Context, extra ...remote.Option) []remote.Option {
	ro := []remote.Option{remote.WithContext(ctx)}
	if o.Auth != nil {
		ro = append(ro, remote.WithAuth(o.Auth))
	} else {
		ro = append(ro, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	ro = append(ro, remote.WithTransport(o.transport()))
	if o.Jobs > 0 {
		ro = append(ro, remote.WithJobs(o.Jobs))
	}
	if o.Backoff != nil {
		ro = append(ro, remote.WithRetryBackoff(*o.Backoff))
	}
	return append(ro, extra...)
}

// Location is where images are: an OCI layout directory (Layout, with an
// optional Name, NAME:TAG, picking one entry by its ref name) or a registry
// reference or repository prefix (Ref, as written).
type Location struct {
	Layout string
	Name   string
	Ref    string
}

// ErrLocation marks a location that cannot be parsed.
var ErrLocation = errors.New("bad image location")

// ParseLocation reads oci:DIR, oci:DIR:NAME:TAG or a registry reference.
// A layout directory cannot contain ':'.
func ParseLocation(s string) (Location, error) {
	rest, ok := strings.CutPrefix(s, "oci:")
	if !ok {
		if s == "" {
			return Location{}, fmt.Errorf("%w: empty; want oci:DIR[:NAME:TAG] or REGISTRY/PATH[:TAG]", ErrLocation)
		}
		return Location{Ref: s}, nil
	}
	dir, nm, named := strings.Cut(rest, ":")
	if dir == "" {
		return Location{}, fmt.Errorf("%w: %s: no directory; want oci:DIR or oci:DIR:NAME:TAG", ErrLocation, s)
	}
	if named {
		if n, t, ok := strings.Cut(nm, ":"); !ok || n == "" || t == "" {
			return Location{}, fmt.Errorf("%w: %s: want oci:DIR:NAME:TAG (e.g. oci:out/images:doris-be:2.1.8)", ErrLocation, s)
		}
	}
	return Location{Layout: dir, Name: nm}, nil
}

// IsLayout reports whether l is an OCI layout.
func (l Location) IsLayout() bool { return l.Layout != "" }

// String is l as the user writes it.
func (l Location) String() string {
	if !l.IsLayout() {
		return l.Ref
	}
	if l.Name == "" {
		return "oci:" + l.Layout
	}
	return "oci:" + l.Layout + ":" + l.Name
}

// NotFound says whether err is a registry's 404: no such tag, manifest,
// blob or repository.
func NotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}
