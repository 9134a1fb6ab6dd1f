package image

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	dregistry "github.com/dorisarm/dorisarm/internal/registry"
)

// A registry that refuses one tag write (an immutable tag) after others
// went through: the tags already moved are put back, and the error says so.
func TestPublishRefusedTagPutsTheOthersBack(t *testing.T) {
	old := sampleRelease(t, t.TempDir(), three)
	changed := map[string]string{}
	for k, v := range three {
		changed[k] = v + ", rebuilt"
	}
	rel := sampleRelease(t, t.TempDir(), changed)
	last := rel[len(rel)-1]
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var refuse atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() && r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/"+last.Repo+"/manifests/"+last.Tag) {
			http.Error(w, `{"errors":[{"code":"DENIED","message":"tag is immutable"}]}`, http.StatusForbidden)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	o := PublishOptions{Registry: dregistry.Options{Auth: authn.Anonymous}}
	ctx := context.Background()
	digestOf := func(repo, tg string) string {
		ref, _ := name.NewTag(host + "/" + repo + "/" + tg)
		d, err := remote.Get(ref)
		if err != nil {
			return ""
		}
		return d.Digest.String()
	}

	// Tags that existed: each goes back to what it was.
	if _, err := Publish(ctx, host+"/doris", old, o); err != nil {
		t.Fatal(err)
	}
	was := map[string]string{}
	for _, x := range old {
		was[x.Repo+":"+x.Tag] = digestOf("doris", x.Repo+":"+x.Tag)
	}
	refuse.Store(true)
	_, err := Publish(ctx, host+"/doris", rel, o)
	if err == nil || !strings.Contains(err.Error(), "refused the write (Forbidden)") || !strings.Contains(err.Error(), "put back: ") || strings.Contains(err.Error(), "STILL MOVED") {
		t.Fatalf("refused tag: %v", err)
	}
	for _, x := range old {
		if got := digestOf("doris", x.Repo+":"+x.Tag); got != was[x.Repo+":"+x.Tag] {
			t.Errorf("%s:%s is %s after the failed publish, was %s", x.Repo, x.Tag, got, was[x.Repo+":"+x.Tag])
		}
	}

	// Tags that were new: removed again (this registry deletes tags).
	_, err = Publish(ctx, host+"/fresh", rel, o)
	if err == nil || !strings.Contains(err.Error(), "removed: it was new") {
		t.Fatalf("refused tag in a fresh repository: %v", err)
	}
	for _, x := range rel {
		if got := digestOf("fresh", x.Repo+":"+x.Tag); got != "" {
			t.Errorf("%s:%s exists after the failed publish (%s)", x.Repo, x.Tag, got)
		}
	}
}
