package multitree

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestLatestVersionBesideFirstRewrite: LatestVersion reads current (0: the
// database has only its first snapshot), then a writer beside it switches
// to its first rewritten snapshot and prunes snapshot 0 with the log's
// first segment, then LatestVersion reads the log, which now begins after
// the version the "first" file records. A read that a writer's change
// straddles is read again (LatestVersion's doc): it answers the writer's
// latest version, not ErrCorrupt for a first segment missing.
func TestLatestVersionBesideFirstRewrite(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1,
		SnapshotKeepRecent: 0, WALSegmentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commitN(t, db, 3, 30)
	segs := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, walDirName, "*.wal"))
		return m
	}
	if n := len(segs()); n < 3 {
		t.Fatalf("layout: %d log segments, want several", n)
	}
	firstSeg := segs()[0]
	var once sync.Once
	latestVersionReadCurrent = func(string) {
		once.Do(func() {
			// the writer beside: its first rewrite, and the prune after
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Error(err)
				return
			}
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if _, err := os.Stat(firstSeg); os.IsNotExist(err) {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Error("the prune did not remove the log's first segment")
		})
	}
	defer func() { latestVersionReadCurrent = nil }()
	v, err := LatestVersion(dir)
	if err != nil {
		t.Fatalf("LatestVersion beside the writer's first rewrite and prune: %v; want 30 (read again)", err)
	}
	if v != 30 {
		t.Fatalf("LatestVersion %d, want 30", v)
	}
}
