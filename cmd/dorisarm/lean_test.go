package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What dorisarm links (issue 32). Trust decisions are made by the field's
// libraries: cosign/v2's pkg/cosign verifies, sigstore-go's pkg/root and
// pkg/tuf give the trusted root, certificate-transparency-go checks SCTs
// (through cosign). What must stay out is what those libraries' command
// lines and servers bring, which dorisarm never needs.

// requiredPackages must be linked: the libraries that make dorisarm's
// trust decisions.
var requiredPackages = []string{
	"github.com/sigstore/cosign/v2/pkg/cosign",
	"github.com/sigstore/sigstore-go/pkg/root",
	"github.com/sigstore/sigstore-go/pkg/tuf",
}

// deniedPackages are import-path prefixes that must never be linked:
// cosign's CLI packages (they bring Kubernetes, cloud SDKs, go-cmp), the
// Kubernetes client, cloud KMS providers, Rekor's generated server
// (restapi) packages, and debugging endpoints.
var deniedPackages = []string{
	"github.com/sigstore/cosign/v2/cmd/",
	"github.com/sigstore/cosign/v2/pkg/cosign/kubernetes",
	"github.com/sigstore/rekor/pkg/generated/restapi",
	"github.com/sigstore/sigstore/pkg/signature/kms/",
	"k8s.io/",
	"sigs.k8s.io/",
	"cloud.google.com/",
	"google.golang.org/api/",
	"github.com/aws/aws-sdk-go-v2/",
	"github.com/Azure/",
	"github.com/alibabacloud-go/",
	"github.com/hashicorp/vault/",
	"github.com/google/go-github/",
	"gitlab.com/",
	"github.com/buildkite/",
	"github.com/spf13/viper",
}

// Not denied, though unwanted: testing (github.com/digitorus/pkcs7 imports
// it), expvar and net/http/pprof (go-chi's middleware and Let's Encrypt's
// key checks, through the timestamp authority's verifier and cosign). They
// come with pkg/cosign and register handlers only on http.DefaultServeMux,
// which dorisarm never serves.

// maxLinkedPackages bounds how many packages (standard library included)
// cmd/dorisarm links: 727 with cosign/v2's pkg/cosign, sigstore-go's root
// and TUF client and their protobuf, gRPC (through sigstore-go) and
// go-openapi (Rekor's generated client) dependencies, when the
// hand-written TUF client, trusted-root reader and SCT verifier went. A new
// dependency that pushes past it must earn its place: raise the bound in
// the same change, saying why.
const maxLinkedPackages = 730

// TestLinkedPackages: nothing denied is linked and the count stays bounded
// (exact, unlike timings, so it cannot flake).
func TestLinkedPackages(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool")
	}
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	pkgs := strings.Fields(string(out))
	for _, p := range pkgs {
		for _, d := range deniedPackages {
			if strings.HasPrefix(p, d) {
				t.Errorf("%s is linked into dorisarm (denied: %s*); find the import with `go mod why %s`", p, d, p)
			}
		}
	}
	for _, r := range requiredPackages {
		if !slices.Contains(pkgs, r) {
			t.Errorf("%s is not linked: dorisarm's trust decisions are made by it", r)
		}
	}
	if len(pkgs) > maxLinkedPackages {
		t.Errorf("dorisarm links %d packages, more than %d: see what is new with `go list -deps ./cmd/dorisarm`", len(pkgs), maxLinkedPackages)
	}
	t.Logf("%d packages linked", len(pkgs))
}

// Budgets. The size is exact and asserted as is. Time depends on the
// machine's load (package init measured ~4 ms on the idle 2-core build box
// and 15 ms with two builds running beside the tests), so it is logged, not
// asserted: a timed test fails on a busy machine, and a heavy dependency
// coming back is caught exactly by the deny list and package count above.
// The start-up numbers to compare are make bench-scan's (bench-floor).
const (
	maxBinaryBytes = 45 << 20
	startRuns      = 9
)

// TestStartupCost builds dorisarm, asserts its size and logs its package
// init (GODEBUG=inittrace=1) and the wall time of `dorisarm version`.
func TestStartupCost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool")
	}
	bin := filepath.Join(t.TempDir(), "dorisarm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > maxBinaryBytes {
		t.Errorf("the binary is %.1f MB, more than %d MB", float64(st.Size())/(1<<20), maxBinaryBytes>>20)
	}
	var inits, walls []time.Duration
	for range startRuns {
		stderr := initTrace(t)
		d, n, err := initTime(stderr.Bytes())
		if err != nil || n == 0 {
			t.Fatalf("reading the init trace (%d lines): %v", n, err)
		}
		inits = append(inits, d)
		start := time.Now()
		if err := exec.Command(bin, "version").Run(); err != nil {
			t.Fatal(err)
		}
		walls = append(walls, time.Since(start))
	}
	initMed, wallMed := median(inits), median(walls)
	t.Logf("binary %.1f MB; median of %d runs: package init %v, `dorisarm version` %v wall (issue 32's budgets: 45 MB, `version` 30 ms on the idle build box)",
		float64(st.Size())/(1<<20), startRuns, initMed.Round(10*time.Microsecond), wallMed.Round(10*time.Microsecond))
}

// initTime sums the "N ms clock" of every line of a GODEBUG=inittrace=1
// trace ("init PKG @T ms, N ms clock, B bytes, A allocs").
func initTime(trace []byte) (time.Duration, int, error) {
	var sum float64
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(trace))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 7 || f[0] != "init" || f[6] != "clock," {
			continue
		}
		ms, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			return 0, n, err
		}
		sum += ms
		n++
	}
	return time.Duration(sum * float64(time.Millisecond)), n, sc.Err()
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func TestInitTime(t *testing.T) {
	trace := "init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs\n" +
		"init runtime @0.1 ms, 0.25 ms clock, 0 bytes, 0 allocs\n" +
		"something else\n" +
		"init github.com/asaskevich/govalidator @10 ms, 1.5 ms clock, 951560 bytes, 6202 allocs\n"
	d, n, err := initTime([]byte(trace))
	if err != nil || n != 3 || d != 1750*time.Microsecond {
		t.Errorf("initTime: %v over %d lines, %v", d, n, err)
	}
}

// maxOwnInitAllocs bounds the allocations of each of dorisarm's own
// packages' init (GODEBUG=inittrace=1): the smallest regexp.MustCompile
// makes 29, so a regular expression, template or table built at package
// level shows here. Counts are exact, so this cannot flake.
const maxOwnInitAllocs = 24

// initTrace runs dorisarm version with GODEBUG=inittrace=1 and returns
// what it wrote on stderr (a line per package init).
func initTrace(t *testing.T) *bytes.Buffer {
	t.Helper()
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("dorisarm version: %v\n%s", err, stderr.String())
	}
	return &stderr
}

// TestOwnInitIsLight: dorisarm's packages do their set-up on first use
// (sync.OnceValue), not in package init, which every command pays.
func TestOwnInitIsLight(t *testing.T) {
	stderr := initTrace(t)
	own := 0
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		// init PKG @T ms, N ms clock, B bytes, A allocs
		f := strings.Fields(sc.Text())
		if len(f) < 11 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/dorisarm/dorisarm") {
			continue
		}
		own++
		allocs, err := strconv.Atoi(f[9])
		if err != nil {
			t.Fatalf("reading %q: %v", sc.Text(), err)
		}
		if allocs > maxOwnInitAllocs {
			t.Errorf("%s: package init makes %d allocations (at most %d): build its regexps, templates and tables on first use (sync.OnceValue)", f[1], allocs, maxOwnInitAllocs)
		}
	}
	if own < 5 {
		t.Fatalf("only %d of dorisarm's packages in the init trace:\n%s", own, stderr.String())
	}
}
