package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dorisarm/dorisarm/internal/sample"
)

func TestShare(t *testing.T) {
	for _, c := range []struct{ budget, n, cells, jobs int }{
		{2, 3, 2, 1}, {64, 3, 3, 21}, {1, 3, 1, 1}, {8, 1, 1, 8}, {0, 1, 1, 2}, {4, 0, 1, 4}, {3, 2, 2, 1},
	} {
		if cells, jobs := Share(c.budget, c.n); cells != c.cells || jobs != c.jobs {
			t.Errorf("Share(%d, %d) = %d cells × %d jobs, want %d × %d", c.budget, c.n, cells, jobs, c.cells, c.jobs)
		}
	}
}

// rendezvous holds the first package step of the first n cells to reach
// one until n of them are in one at once: the test fails unless cells
// really run at the same time (a serial RunAll would wait out the
// timeout with one cell inside).
type rendezvous struct {
	mu      sync.Mutex
	n       int
	arrived map[string]bool
	all     chan struct{}
	met     bool
}

func (r *rendezvous) wait(cell string) {
	r.mu.Lock()
	if r.arrived[cell] || len(r.arrived) >= r.n {
		r.mu.Unlock()
		return
	}
	r.arrived[cell] = true
	if len(r.arrived) == r.n {
		close(r.all)
	}
	r.mu.Unlock()
	select {
	case <-r.all:
		r.mu.Lock()
		r.met = true
		r.mu.Unlock()
	case <-time.After(10 * time.Second):
	}
}

// TestRunAllSharesTargetFreeSteps: three targets with a budget of two
// jobs run two cells at once, one job each; every step whose key does
// not depend on the target (fetch, unpack, the tree's patches) runs in
// exactly one cell and is restored from the cache in the others, and each
// cell's own steps run in that cell.
func TestRunAllSharesTargetFreeSteps(t *testing.T) {
	t.Parallel()
	targets := []string{"kunpeng920", "graviton3", "generic-armv8"}
	out, cache := t.TempDir(), t.TempDir()
	rv := &rendezvous{n: 2, arrived: map[string]bool{}, all: make(chan struct{})}
	fx := &fakeExec{}
	exec := func(ctx context.Context, c Command) error {
		if strings.HasPrefix(c.Step, "thirdparty:") {
			// c.Dir is where the step sees its tree; on this machine it is
			// <cache>/work/<target>-<doris>/pkgs/<name>/src
			rel, _ := filepath.Rel(filepath.Join(cache, "work"), c.Outside(c.Dir))
			rv.wait(strings.SplitN(rel, string(filepath.Separator), 2)[0])
		}
		return fx.exec(ctx, c)
	}
	var ins []Input
	users := map[string][]string{} // cache key → the cells whose plans have it
	keyOf := map[string]string{}   // target + step → key
	for _, tg := range targets {
		in := fastInput(t, tg, "")
		ins = append(ins, in)
		for _, s := range in.Plan.Steps {
			if s.Kind.Cacheable() {
				users[s.Key] = append(users[s.Key], tg)
				keyOf[tg+" "+s.ID] = s.Key
			}
		}
	}
	var shared []string
	for tg := range keyOf {
		if len(users[keyOf[tg]]) > 1 {
			shared = append(shared, tg)
		}
	}
	slices.Sort(shared)
	if !slices.ContainsFunc(shared, func(s string) bool { return strings.Contains(s, " unpack:") }) {
		t.Fatalf("no unpack step has one key in two cells (shared: %v): nothing to share", shared)
	}
	var done []string
	outs, err := RunAll(context.Background(), ins, Options{Out: out, Cache: cache, Jobs: 2, Exec: exec}, func(o Outcome) {
		done = append(done, o.Target)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rv.met {
		t.Error("no two cells ran a package step at the same time: the cells ran one after another")
	}
	if len(outs) != len(targets) || len(done) != len(targets) {
		t.Fatalf("%d outcomes, %d done calls, want %d", len(outs), len(done), len(targets))
	}
	ran := map[string][]string{} // cache key → the cells whose record says its step ran
	for i, o := range outs {
		if o.Target != targets[i] || o.State != "built" {
			t.Errorf("outcome %d: %s %s (%s), want %s built", i, o.Target, o.State, o.Error, targets[i])
		}
		rec, err := Verify(Dir(out, sample.Version, o.Target))
		if err != nil {
			t.Fatal(err)
		}
		if rec.Jobs != 1 {
			t.Errorf("%s: the record says %d jobs; the budget of 2 over two cells at once is 1 each", o.Target, rec.Jobs)
		}
		for _, id := range rec.Cache.Misses {
			k := keyOf[o.Target+" "+id]
			ran[k] = append(ran[k], o.Target)
		}
	}
	for k, cells := range users {
		if len(ran[k]) != 1 {
			t.Errorf("the step of key %s (in %v) ran in %v: want exactly one cell", k[:12], cells, ran[k])
		}
	}
	t.Logf("steps with a key two cells share, each run once: %v", shared)
}

// dirRemote is a remote cache that serves the entries of another local
// cache, as cacheoci would after verifying them, and counts its pulls.
type dirRemote struct {
	from  *Cache
	mu    sync.Mutex
	pulls map[string]int
	// late: a key's first pull fails (the registry times out: the
	// prefetch), and in its second the entry lands in the local cache
	// while the pull downloads (another build stored it first), so the
	// pull brings nothing.
	late  bool
	tries map[string]int
}

func (d *dirRemote) Pull(ctx context.Context, c *Cache, key string) (*RemoteEntry, error) {
	if d.late {
		d.mu.Lock()
		d.tries[key]++
		first := d.tries[key] == 1
		d.mu.Unlock()
		if first {
			return nil, errors.New("registry timeout")
		}
	}
	src := d.from.EntryDir(key)
	if _, err := os.Stat(filepath.Join(src, "meta.json")); err != nil {
		return nil, nil
	}
	tmp, err := c.TempDir()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"meta.json", "files.tar"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		if err == nil {
			if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
				return nil, err
			}
		}
	}
	if adopted, err := c.Adopt(key, tmp); err != nil || !adopted || d.late {
		return nil, err
	}
	d.mu.Lock()
	d.pulls[key]++
	d.mu.Unlock()
	return &RemoteEntry{Artifact: "registry.test/cache@sha256:" + key[len(key)-64:], Signer: "key sha256:test"}, nil
}

func (d *dirRemote) Push(context.Context, *Cache, string, string) error { return nil }

// TestPulledProvenanceAcrossCells: two targets built from a remote cache
// share their target-free steps. One cell pulls such a step and the
// other then finds it in the local cache; both records must still say it
// came from the registry, under whose signature, not from this machine
// (a later attempt at a target, planned again after a rejected compiler,
// shares the same log: buildcmd hands one Pulls to every RunAll).
func TestPulledProvenanceAcrossCells(t *testing.T) {
	t.Parallel()
	targets := []string{"kunpeng920", "graviton3"}
	var ins []Input
	for _, tg := range targets {
		ins = append(ins, fastInput(t, tg, ""))
	}
	fx := &fakeExec{}
	filled := t.TempDir()
	if _, err := RunAll(context.Background(), ins, Options{Out: t.TempDir(), Cache: filled, Jobs: 2, Exec: fx.exec}, nil); err != nil {
		t.Fatal(err)
	}
	remote := &dirRemote{from: &Cache{Dir: filled}, pulls: map[string]int{}}
	out := t.TempDir()
	outs, err := RunAll(context.Background(), ins, Options{Out: out, Cache: t.TempDir(), Jobs: 2, Exec: fx.exec, CacheFrom: remote}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sharedSeen := false
	for _, o := range outs {
		rec, err := Verify(Dir(out, sample.Version, o.Target))
		if err != nil {
			t.Fatal(err)
		}
		pulled := map[string]bool{}
		for _, p := range rec.Cache.Pulled {
			if !strings.HasPrefix(p.Artifact, "registry.test/cache@sha256:") || p.Signer != "key sha256:test" {
				t.Errorf("%s: %s recorded as pulled from %q signed by %q", o.Target, p.Step, p.Artifact, p.Signer)
			}
			pulled[p.Step] = true
		}
		if len(rec.Cache.Misses) != 0 {
			t.Errorf("%s: misses %v with every entry in the remote", o.Target, rec.Cache.Misses)
		}
		for _, id := range rec.Cache.Hits {
			if !pulled[id] {
				t.Errorf("%s: %s is a hit the record does not trace to the registry it came from", o.Target, id)
			}
			if strings.HasPrefix(id, "unpack:") {
				sharedSeen = true
			}
		}
	}
	if !sharedSeen {
		t.Fatal("no unpack step among the hits: nothing shared to check")
	}
	for k, n := range remote.pulls {
		if n != 1 {
			t.Errorf("entry %s pulled %d times", k[:12], n)
		}
	}
}

// TestPullsForgetWhatIsGone: an entry this build pulled and another
// process pruned since is pulled again (not run while the remote has it),
// and one the build then made itself is never recorded as pulled by a
// later cell of the build.
func TestPullsForgetWhatIsGone(t *testing.T) {
	t.Parallel()
	fx := &fakeExec{}
	filled := t.TempDir()
	if _, err := RunAll(context.Background(), []Input{fastInput(t, "kunpeng920", ""), fastInput(t, "graviton3", "")},
		Options{Out: t.TempDir(), Cache: filled, Jobs: 2, Exec: fx.exec}, nil); err != nil {
		t.Fatal(err)
	}
	remote := &dirRemote{from: &Cache{Dir: filled}, pulls: map[string]int{}}
	pulls := &Pulls{} // one build: buildcmd shares it across attempts
	local := t.TempDir()
	run := func(target string) *Record {
		t.Helper()
		out := t.TempDir()
		if _, err := RunAll(context.Background(), []Input{fastInput(t, target, "")},
			Options{Out: out, Cache: local, Jobs: 2, Exec: fx.exec, CacheFrom: remote, Pulls: pulls}, nil); err != nil {
			t.Fatal(err)
		}
		rec, err := Verify(Dir(out, sample.Version, target))
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	prune := func() {
		t.Helper()
		for _, d := range []string{"steps", "work"} {
			if err := os.RemoveAll(filepath.Join(local, d)); err != nil {
				t.Fatal(err)
			}
		}
	}

	first := run("kunpeng920")
	if len(first.Cache.Pulled) == 0 || len(first.Cache.Misses) != 0 {
		t.Fatalf("first attempt: %d pulled, misses %v: want everything pulled", len(first.Cache.Pulled), first.Cache.Misses)
	}
	prune()
	again := run("kunpeng920")
	if len(again.Cache.Misses) != 0 || len(again.Cache.Pulled) != len(first.Cache.Pulled) {
		t.Errorf("after a prune, with the remote holding every entry: %d pulled (%d before), misses %v: want each pulled again",
			len(again.Cache.Pulled), len(first.Cache.Pulled), again.Cache.Misses)
	}
	for k, n := range remote.pulls {
		if n != 2 {
			t.Errorf("entry %s pulled %d times over a prune: want 2", k[:12], n)
		}
	}

	prune()
	remote.from = &Cache{Dir: t.TempDir()} // the remote lost them too: the steps run here
	local1 := run("kunpeng920")
	if len(local1.Cache.Pulled) != 0 || len(local1.Cache.Misses) == 0 {
		t.Fatalf("with an empty remote: %d pulled, %d misses: want every step run here", len(local1.Cache.Pulled), len(local1.Cache.Misses))
	}
	g := run("graviton3")
	for _, p := range g.Cache.Pulled {
		t.Errorf("graviton3 records %s as pulled from %s; kunpeng920 made it on this machine", p.Step, p.Artifact)
	}
	if len(g.Cache.Hits) == 0 {
		t.Error("graviton3 found none of kunpeng920's target-free steps in the cache: nothing checked")
	}
}

// TestPullsWaiterSharesTheOutcome: a cell waiting on another cell's pull of
// the same key gets that pull's error (its step warns and runs, as the
// puller's does), and nothing failed is remembered: the next pull tries
// again. What is remembered is the entry with the files it was pulled
// with: once the local cache holds other files under the key (pruned and
// made again by another process), the pull no longer speaks for them.
func TestPullsWaiterSharesTheOutcome(t *testing.T) {
	const key = "5f0c0ffee0000000000000000000000000000000000000000000000000000001"
	c := &Cache{Dir: t.TempDir()}
	c.Init()
	put := func(content string) string {
		t.Helper()
		tree := t.TempDir()
		if err := os.WriteFile(filepath.Join(tree, "f"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := c.Put(Meta{Key: key, Step: "fetch:X"}, tree, []string{"f"}); err != nil {
			t.Fatal(err)
		}
		m, ok := c.Get(key)
		if !ok {
			t.Fatal("entry not stored")
		}
		return m.TarSHA256
	}

	p := &Pulls{}
	started, release := make(chan struct{}), make(chan struct{})
	errRegistry := errors.New("registry timeout")
	go p.pull(key, c, func() (*RemoteEntry, error) {
		close(started)
		<-release
		return nil, errRegistry
	})
	<-started
	type outcome struct {
		e   *RemoteEntry
		err error
	}
	waiter := make(chan outcome)
	go func() {
		e, _, err := p.pull(key, c, func() (*RemoteEntry, error) {
			t.Error("the waiter pulled the key itself while another pull of it was in flight")
			return nil, nil
		})
		waiter <- outcome{e, err}
	}()
	// The waiter must be waiting before the first pull ends.
	for waiting := false; !waiting; {
		p.mu.Lock()
		waiting = p.inflight[key].waiters == 1
		p.mu.Unlock()
		runtime.Gosched()
	}
	close(release)
	got := <-waiter
	if !errors.Is(got.err, errRegistry) || got.e != nil {
		t.Errorf("waiter got (%v, %v): want the pull's error", got.e, got.err)
	}

	again := false
	want := &RemoteEntry{Artifact: "registry.test/cache@sha256:x"}
	var pulledFiles string
	e, files, err := p.pull(key, c, func() (*RemoteEntry, error) {
		again = true
		pulledFiles = put("the registry's bytes") // what a pull adopts
		return want, nil
	})
	if !again || err != nil || e != want || files != pulledFiles {
		t.Fatalf("after a failed pull: tried again %v, got (%v, %q, %v)", again, e, files, err)
	}
	if got := p.get(key, pulledFiles); got != want {
		t.Errorf("the pulled entry, still in the cache: %v, want it traced to %s", got, want.Artifact)
	}
	if err := c.Discard(key); err != nil {
		t.Fatal(err)
	}
	local := put("made here")
	if got := p.get(key, local); got != nil {
		t.Errorf("an entry made here after the pulled one was pruned reads as pulled from %s", got.Artifact)
	}
}

// TestPullOvertakenByAnotherBuild: when another build stores a step's
// entry while this one's pull downloads it, the pull brings nothing, and
// the step restores the stored entry as a local hit: it neither runs nor
// is recorded as pulled.
func TestPullOvertakenByAnotherBuild(t *testing.T) {
	t.Parallel()
	fx := &fakeExec{}
	filled := t.TempDir()
	if _, err := Run(context.Background(), fastInput(t, "kunpeng920", ""), Options{Out: t.TempDir(), Cache: filled, Exec: fx.exec}); err != nil {
		t.Fatal(err)
	}
	fx.reset()
	remote := &dirRemote{from: &Cache{Dir: filled}, pulls: map[string]int{}, late: true, tries: map[string]int{}}
	out := t.TempDir()
	if _, err := Run(context.Background(), fastInput(t, "kunpeng920", ""), Options{Out: out, Cache: t.TempDir(), Exec: fx.exec, CacheFrom: remote, Pulls: &Pulls{}}); err != nil {
		t.Fatal(err)
	}
	rec, err := Verify(Dir(out, sample.Version, "kunpeng920"))
	if err != nil {
		t.Fatal(err)
	}
	in := fastInput(t, "kunpeng920", "")
	for _, id := range fx.commands() {
		if slices.Contains(cacheable(in.Plan), id) {
			t.Errorf("%s ran again, though another build stored its entry", id)
		}
	}
	if len(rec.Cache.Pulled) != 0 || len(rec.Cache.Misses) != 0 || len(rec.Cache.Hits) == 0 {
		t.Errorf("record: %d pulled, misses %v, %d hits: want every step a local hit", len(rec.Cache.Pulled), rec.Cache.Misses, len(rec.Cache.Hits))
	}
}

// pushLog is a remote cache that records what a build offers it.
type pushLog struct {
	mu     sync.Mutex
	pushed map[string]string // key: the files digest offered
}

func (p *pushLog) Pull(context.Context, *Cache, string) (*RemoteEntry, error) { return nil, nil }

func (p *pushLog) Push(_ context.Context, c *Cache, key, files string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pushed == nil {
		p.pushed = map[string]string{}
	}
	p.pushed[key] = files
	return nil
}

// TestOnlyWhatThisBuildMadeIsPushed: --cache-to is offered the entries
// this process's steps stored, each with the digest they were stored
// with, never a local hit an earlier process left (it may have been
// planted, or taken under --cache-trust-unsigned): those are listed in
// the record as not pushed.
func TestOnlyWhatThisBuildMadeIsPushed(t *testing.T) {
	t.Parallel()
	fx := &fakeExec{}
	ins := []Input{fastInput(t, "kunpeng920", "")}
	cache := t.TempDir()
	first := &pushLog{}
	out := t.TempDir()
	if _, err := RunAll(context.Background(), ins, Options{Out: out, Cache: cache, Jobs: 2, Exec: fx.exec, CacheTo: first}, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := Verify(Dir(out, sample.Version, "kunpeng920"))
	if err != nil {
		t.Fatal(err)
	}
	c := &Cache{Dir: cache}
	if len(first.pushed) == 0 || len(first.pushed) != len(rec.Cache.Misses) {
		t.Fatalf("a cold build pushed %d entries for %d steps it ran", len(first.pushed), len(rec.Cache.Misses))
	}
	for k, files := range first.pushed {
		if m, ok := c.Get(k); !ok || m.TarSHA256 != files || !c.Built(k) {
			t.Errorf("entry %s pushed with files %s; the cache holds %+v (built mark: %v)", k[:12], files, m, c.Built(k))
		}
	}
	// Another process, the same cache: every step is a local hit.
	second := &pushLog{}
	out2 := t.TempDir()
	if _, err := RunAll(context.Background(), ins, Options{Out: out2, Cache: cache, Jobs: 2, Exec: fx.exec, CacheTo: second}, nil); err != nil {
		t.Fatal(err)
	}
	if len(second.pushed) != 0 {
		t.Errorf("local hits of an earlier process were pushed: %d entries", len(second.pushed))
	}
	rec2, err := Verify(Dir(out2, sample.Version, "kunpeng920"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec2.Cache.NotPushed) != len(rec2.Cache.Hits) || len(rec2.Cache.Hits) == 0 {
		t.Errorf("record lists %d not pushed of %d hits", len(rec2.Cache.NotPushed), len(rec2.Cache.Hits))
	}
}

// TestRestoreChecksWhatThisBuildStored: an entry a step of this build
// stored and something then replaced with other, self-consistent bytes
// (meta.json rewritten to match, as a hostile step could before steps ran
// sandboxed) is not restored: the build discards it and runs the step.
func TestRestoreChecksWhatThisBuildStored(t *testing.T) {
	t.Parallel()
	fx := &fakeExec{}
	ins := []Input{fastInput(t, "kunpeng920", "")}
	cache := t.TempDir()
	pulls := &Pulls{}
	if _, err := RunAll(context.Background(), ins, Options{Out: t.TempDir(), Cache: cache, Jobs: 2, Exec: fx.exec, Pulls: pulls}, nil); err != nil {
		t.Fatal(err)
	}
	c := &Cache{Dir: cache}
	var victim string
	for _, s := range ins[0].Plan.Steps {
		if strings.HasPrefix(s.ID, "thirdparty:") {
			victim = s.Key
			break
		}
	}
	m, ok := c.Get(victim)
	if !ok {
		t.Fatal("no entry for the package step")
	}
	// A self-consistent replacement: other files, meta.json to match.
	planted := t.TempDir()
	os.WriteFile(filepath.Join(planted, "evil"), []byte("x"), 0o644)
	other := &Cache{Dir: t.TempDir()}
	other.Init()
	if err := other.Put(Meta{Key: victim, Step: m.Step}, planted, []string{"evil"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"meta.json", "files.tar"} {
		b, _ := os.ReadFile(filepath.Join(other.EntryDir(victim), f))
		os.WriteFile(filepath.Join(c.EntryDir(victim), f), b, 0o644)
	}
	out := t.TempDir()
	if _, err := RunAll(context.Background(), ins, Options{Out: out, Cache: cache, Jobs: 2, Exec: fx.exec, Pulls: pulls}, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := Verify(Dir(out, sample.Version, "kunpeng920"))
	if err != nil {
		t.Fatal(err)
	}
	warned := rec.Warnings
	if !slices.ContainsFunc(warned, func(w string) bool { return strings.Contains(w, "not the") && strings.Contains(w, "this build stored") }) {
		t.Errorf("no warning of the replaced entry: %q", warned)
	}
	if !slices.Contains(rec.Cache.Misses, m.Step) {
		t.Errorf("%s was restored from the replaced entry (misses %v)", m.Step, rec.Cache.Misses)
	}
	if _, err := os.Stat(filepath.Join(out, sample.Version, "kunpeng920", "evil")); err == nil {
		t.Error("the planted file was published")
	}
}
