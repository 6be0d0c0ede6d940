package multitree

import (
	"context"
	"testing"
)

// TestIntervalCountsFromNewestSnapshotAfterTarget: after an Open at an
// older TargetVersion without Rollback (base snapshot 5, current 10), the
// SnapshotInterval counts from the newest snapshot, current's, as the
// option documents ("at least SnapshotInterval after the last snapshot's"):
// committing versions 8..10 again starts no background rewrite of a
// version the current snapshot already holds.
func TestIntervalCountsFromNewestSnapshotAfterTarget(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 2})
	if err != nil {
		t.Fatal(err)
	}
	const seed = 7
	for _, n := range []int{5, 5} {
		commitN(t, db, seed, n)
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{TargetVersion: 7, SnapshotInterval: 5, SnapshotKeepRecent: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.SnapshotVersion() != 5 {
		t.Fatalf("opened at snapshot %d, want 5", db.SnapshotVersion())
	}
	for db.WorkingVersion() <= 10 {
		v := db.WorkingVersion()
		commitN(t, db, seed, 1) // the same changes again
		db.mu.Lock()
		job := db.mu.rewrite
		db.mu.Unlock()
		if job != nil {
			t.Fatalf("commit of version %d started a background rewrite of version %d; the newest snapshot is 10, interval 5", v, job.version)
		}
	}
}
