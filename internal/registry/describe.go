package registry

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// Describe says what a registry's error answer means and what to do about
// it, naming the registry, the repository and the tag, digest or blob the
// request was for. It stands in for go-containerregistry's text, which is
// the registry's own codes and details as Go prints them
// ("MANIFEST_UNKNOWN: manifest unknown; map[Tag:9.9.9-kunpeng920]").
func Describe(te *transport.Error) string {
	host, repo, kind, ref, method := "", "", "", "", ""
	if r := te.Request; r != nil && r.URL != nil {
		host, method = r.URL.Host, r.Method
		repo, kind, ref = splitV2(r.URL.Path)
	}
	registry := "the registry"
	if host != "" {
		registry += " " + host
	}
	status := fmt.Sprintf("%d %s", te.StatusCode, http.StatusText(te.StatusCode))
	what := "the request"
	if method != "" {
		what = method + " " + te.Request.URL.Path
	}
	switch {
	case te.StatusCode == http.StatusNotFound && repo != "" && has(te, transport.NameUnknownErrorCode):
		return fmt.Sprintf("%s has no repository %s: check the repository path (%s/%s), or publish to it first", registry, repo, host, repo)
	case te.StatusCode == http.StatusNotFound && kind == "manifests" && strings.Contains(ref, ":"):
		return fmt.Sprintf("%s has no manifest %s in %s: check the digest (%s/%s@%s); it may never have been pushed there, or have been deleted", registry, ref, repo, host, repo, ref)
	case te.StatusCode == http.StatusNotFound && kind == "manifests":
		return fmt.Sprintf("%s has no tag %s in %s: check the tag (%s/%s:%s), or publish it first (dorisarm publish prints the tags it pushes)", registry, ref, repo, host, repo, ref)
	case te.StatusCode == http.StatusNotFound && kind == "blobs":
		return fmt.Sprintf("%s has no blob %s in %s, which the image names: the image is incomplete there; publish it again", registry, ref, repo)
	case te.StatusCode == http.StatusUnauthorized:
		return fmt.Sprintf("%s refused the credentials (%s, %s): run docker login %s, or pass --username and --password-stdin", registry, status, what, host)
	case te.StatusCode == http.StatusForbidden && (method == http.MethodPut || method == http.MethodPost || method == http.MethodPatch || method == http.MethodDelete):
		return fmt.Sprintf("%s refused the write (%s, %s): the credentials may lack push rights there (docker login %s, or --username and --password-stdin), or the tag is protected (immutable tags)", registry, status, what, host)
	case te.StatusCode == http.StatusForbidden:
		return fmt.Sprintf("%s refused access (%s, %s): the credentials may lack rights to %s (docker login %s, or --username and --password-stdin)", registry, status, what, repo, host)
	case te.StatusCode == http.StatusTooManyRequests:
		return fmt.Sprintf("%s is limiting requests (%s, %s): wait, then run again (or log in: registries allow more to known users)", registry, status, what)
	case te.StatusCode >= 500 || te.StatusCode == http.StatusRequestTimeout:
		return fmt.Sprintf("%s failed (%s, %s): the registry is down or overloaded; run again later", registry, status, what)
	}
	var said []string
	for _, d := range te.Errors {
		if d.Message != "" {
			said = append(said, d.Message)
		}
	}
	msg := fmt.Sprintf("%s refused %s (%s)", registry, what, status)
	if len(said) > 0 {
		msg += ": " + strings.Join(said, "; ")
	}
	return msg
}

// splitV2 reads a registry API path, /v2/REPO/KIND/REF (KIND manifests,
// blobs, tags or referrers), into its parts.
func splitV2(p string) (repo, kind, ref string) {
	p, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		return "", "", ""
	}
	for _, k := range []struct{ sep, kind string }{{"/manifests/", "manifests"}, {"/blobs/uploads/", "uploads"}, {"/blobs/", "blobs"}, {"/tags/", "tags"}, {"/referrers/", "referrers"}} {
		if i := strings.LastIndex(p, k.sep); i >= 0 {
			return p[:i], k.kind, p[i+len(k.sep):]
		}
	}
	return strings.TrimSuffix(p, "/"), "", ""
}

func has(te *transport.Error, code transport.ErrorCode) bool {
	for _, d := range te.Errors {
		if d.Code == code {
			return true
		}
	}
	return false
}

// Text is err's message with every registry error answer in it said as
// Describe says it: what a command prints of an error that may hold one.
func Text(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	seen := map[*transport.Error]bool{}
	fault.Walk(err, func(e error) bool {
		if te, ok := e.(*transport.Error); ok && !seen[te] {
			seen[te] = true
			msg = strings.ReplaceAll(msg, te.Error(), Describe(te))
		}
		return false
	})
	return msg
}
