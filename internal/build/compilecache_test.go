package build

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReadCompileStats counts what a ccache stats_log says of each
// compile: a hit in either mode, a miss, and nothing else.
func TestReadCompileStats(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ccache.log")
	// As ccache 4.7 writes it; e.cpp came from the shared (remote) storage.
	os.WriteFile(p, []byte("# a.cpp\ncache_miss\ndirect_cache_miss\nlocal_storage_write\n# b.cpp\ndirect_cache_hit\nlocal_storage_hit\n# c.cpp\npreprocessed_cache_hit\n# d.cpp\ncompile_failed\n"+
		"# e.cpp\ndirect_cache_hit\nlocal_storage_miss\nlocal_storage_read_miss\nlocal_storage_write\nremote_storage_hit\nremote_storage_read_hit\n"), 0o644)
	st, err := readCompileStats(p)
	if err != nil || st.Hits != 3 || st.Misses != 1 || st.SharedHits != 1 {
		t.Errorf("readCompileStats = %+v, %v; want 3 hits (1 shared), 1 miss", st, err)
	}
}

func TestCheckCompileCacheSize(t *testing.T) {
	for _, ok := range []string{"20G", "500M", "0", "1.5G", "64Ki"} {
		if err := CheckCompileCacheSize(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "lots", "-1G", "20 G", "20GB"} {
		if err := CheckCompileCacheSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestMarkUsedStaysInItsDirectory: a build step writes its compile cache
// directory; a link it planted at the used mark's name, pointing out,
// makes dorisarm neither create nor touch the file it names.
func TestMarkUsedStaysInItsDirectory(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "planted")
	if err := os.Symlink(target, filepath.Join(dir, usedMark)); err != nil {
		t.Fatal(err)
	}
	if err := markUsed(dir); err == nil {
		t.Error("markUsed went through a link out of the directory")
	}
	if _, err := os.Lstat(target); err == nil {
		t.Errorf("markUsed created %s outside the compile cache", target)
	}
	// An ordinary directory is marked, and marked again.
	ok := t.TempDir()
	for range 2 {
		if err := markUsed(ok); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := os.Stat(filepath.Join(ok, usedMark)); err != nil || time.Since(st.ModTime()) > time.Minute {
		t.Errorf("the mark: %v %v", st, err)
	}
}

// TestPruneTakesCompileCacheDirs: cache prune orders the compile cache's
// directories with the step entries by last use and removes the oldest
// until the cache fits.
func TestPruneTakesCompileCacheDirs(t *testing.T) {
	c := &Cache{Dir: t.TempDir()}
	if err := c.Init(); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for i, key := range []string{"old", "new"} {
		d := filepath.Join(c.Dir, compileSubdir, key)
		os.MkdirAll(filepath.Join(d, "a"), 0o755)
		os.WriteFile(filepath.Join(d, "a", "obj"), make([]byte, 1000), 0o644)
		os.WriteFile(filepath.Join(d, usedMark), nil, 0o644)
		at := old.Add(time.Duration(i) * 30 * time.Minute)
		os.Chtimes(filepath.Join(d, usedMark), at, at)
	}
	p, err := c.PruneTo(1500)
	if err != nil || p.RemovedEntries != 1 || p.RemovedBytes != 1000 || p.EntriesLeft != 1 {
		t.Fatalf("PruneTo(1500) = %+v, %v", p, err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, compileSubdir, "old")); err == nil {
		t.Error("the least recently used compile cache directory is still there")
	}
	if _, err := os.Stat(filepath.Join(c.Dir, compileSubdir, "new", "a", "obj")); err != nil {
		t.Error("the newer one was removed")
	}
}
