package multitree

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestViewRebuiltDuringPruneNotCached: a view ViewAt rebuilds from a
// snapshot that a prune removes meanwhile is handed to the caller but not
// cached, so that no mapping of the removed snapshot's files stays once the
// caller releases it.
func TestViewRebuiltDuringPruneNotCached(t *testing.T) {
	dir := t.TempDir()
	db, commit := openSnapshot4(t, dir)
	var once sync.Once
	// the rebuild of version 5 from snapshot 4 is done; before ViewAt
	// caches it, the node goes on and a rewrite's prune removes snapshot 4
	db.afterRebuild = func(int64) {
		once.Do(func() {
			for i := 7; i <= 10; i++ {
				commit(i)
			}
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Error(err)
			}
			waitForPrune(t, db)
		})
	}
	v, err := db.ViewAt(5)
	if err != nil {
		t.Fatal(err)
	}
	v.Release()
	db.afterRebuild = nil
	if _, err := os.Stat(filepath.Join(dir, snapshotDirName(4))); err == nil {
		t.Fatalf("snapshot 4 not pruned")
	}
	db.unmapper.wg.Wait()
	s := leakRead(t, dir, false)
	if s.deleted > 0 {
		t.Errorf("%d mappings of deleted (pruned) snapshot files stay after the view is released, held by the view cache (a rebuild that raced the prune): %v", s.deleted, s)
	}
}
