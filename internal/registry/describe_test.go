package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// TestDescribe: what a registry's error answers become, read by
// go-containerregistry from a registry that answers as docker-registry
// (distribution) does, detail included: the reference, no codes, no Go map.
func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		name, ref    string
		status       int
		body         string
		want, reject []string
	}{
		{"unknown tag", "doris/doris-be:9.9.9-kunpeng920", 404,
			`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"9.9.9-kunpeng920"}}]}`,
			[]string{"has no tag 9.9.9-kunpeng920 in doris/doris-be", "check the tag", "/doris/doris-be:9.9.9-kunpeng920", "publish it first"}, nil},
		{"unknown digest", "doris/doris-be@sha256:" + strings.Repeat("ab", 32), 404,
			`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Digest":"sha256:abab"}}]}`,
			[]string{"has no manifest sha256:abab", "check the digest"}, nil},
		{"unknown repository", "nope/doris-be:2.1.8", 404,
			`{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry","detail":{"name":"nope/doris-be"}}]}`,
			[]string{"has no repository nope/doris-be", "check the repository path"}, nil},
		{"credentials", "doris/doris-be:2.1.8", 401,
			`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":[{"Type":"repository","Name":"doris/doris-be","Action":"pull"}]}]}`,
			[]string{"refused the credentials (401 Unauthorized", "docker login"}, nil},
		{"outage", "doris/doris-be:2.1.8", 503, `{"errors":[{"code":"UNAVAILABLE","message":"service unavailable"}]}`,
			[]string{"failed (503 Service Unavailable", "run again later"}, nil},
		{"bad request", "doris/doris-be:2.1.8", 400, `{"errors":[{"code":"NAME_INVALID","message":"invalid repository name","detail":{"x":1}}]}`,
			[]string{"refused GET /v2/doris/doris-be/manifests/2.1.8 (400 Bad Request): invalid repository name"}, nil},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v2/" {
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			w.Write([]byte(c.body))
		}))
		host := strings.TrimPrefix(srv.URL, "http://")
		ref, err := name.ParseReference(host + "/" + c.ref)
		if err != nil {
			t.Fatal(err)
		}
		_, err = remote.Get(ref, remote.WithContext(context.Background()), remote.WithRetryBackoff(remote.Backoff{Steps: 1}))
		srv.Close()
		var te *transport.Error
		if !errors.As(err, &te) {
			t.Fatalf("%s: not a transport.Error: %v", c.name, err)
		}
		got := Describe(te)
		for _, w := range append(c.want, "the registry "+host) {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
		for _, raw := range []string{"map[", "MANIFEST_UNKNOWN", "NAME_UNKNOWN", "UNAUTHORIZED", "UNAVAILABLE", "NAME_INVALID", "{"} {
			if strings.Contains(got, raw) {
				t.Errorf("%s: %q has the raw %q", c.name, got, raw)
			}
		}
	}
}

// TestText: a registry's answer deep in a chain, and two of them joined,
// are said in the message; the rest of the message stays.
func TestText(t *testing.T) {
	get := &http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "r:5000", Path: "/v2/doris/doris-be/manifests/9.9.9-kunpeng920"}}
	te := &transport.Error{StatusCode: 404, Request: get, Errors: []transport.Diagnostic{{Code: transport.ManifestUnknownErrorCode, Message: "manifest unknown", Detail: map[string]any{"Tag": "9.9.9-kunpeng920"}}}}
	blob := &transport.Error{StatusCode: 503, Request: &http.Request{Method: "GET", URL: &url.URL{Host: "r:5000", Path: "/v2/doris/doris-be/blobs/sha256:ab"}}}
	err := fault.Input(fmt.Errorf("r:5000/doris/doris-be:9.9.9-kunpeng920: %w", errors.Join(te, blob)))
	got := Text(err)
	if !strings.HasPrefix(got, "r:5000/doris/doris-be:9.9.9-kunpeng920: the registry r:5000 has no tag 9.9.9-kunpeng920 in doris/doris-be") ||
		!strings.Contains(got, "the registry r:5000 failed (503 Service Unavailable, GET /v2/doris/doris-be/blobs/sha256:ab)") ||
		strings.Contains(got, "map[") || strings.Contains(got, "MANIFEST_UNKNOWN") {
		t.Errorf("Text = %q", got)
	}
	if Text(nil) != "" || Text(errors.New("plain")) != "plain" {
		t.Error("Text changed what holds no registry answer")
	}
}
