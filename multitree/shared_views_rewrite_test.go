package multitree

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestRebuildBesideRewriteMapsOnce: a version rebuilt from a background
// rewrite's snapshot after the rewrite installed it but before the Commit
// that switches to it shares the rewrite's mapping (recorded when the
// rewrite adopts it), so that after the switch the database maps that
// snapshot once while the cached view lives.
func TestRebuildBesideRewriteMapsOnce(t *testing.T) {
	dir := t.TempDir()
	stores := resStores(5)
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: 3,
		SnapshotKeepRecent: 10, ViewCacheSize: 1, OpenCheck: OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reached, resume := make(chan struct{}), make(chan struct{})
	db.afterWrite = func(ctx context.Context, v int64) {
		if v == 3 {
			close(reached)
			<-resume
		}
	}
	resumed := false
	defer func() {
		if !resumed {
			close(resume)
		}
	}()
	for v := 1; v <= 3; v++ {
		resFill(t, db, stores, v) // the commit of 3 starts the rewrite of 3
	}
	<-reached
	resFill(t, db, stores, 4)
	resFill(t, db, stores, 5)
	// the rewrite installs snapshot 3 beside its catch-up
	for deadline := time.Now().Add(10 * time.Second); ; {
		vs, err := SnapshotVersions(dir)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(vs, 3) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("snapshot 3 never installed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	vw, err := db.ViewAt(4) // rebuilt from snapshot 3 before the switch: cached
	if err != nil {
		t.Fatal(err)
	}
	vw.Release()
	close(resume)
	resumed = true
	waitRewrite(db)
	resFill(t, db, stores, 6) // switches to snapshot 3
	if got := db.SnapshotVersion(); got != 3 {
		t.Fatalf("snapshot version %d after the switch, want 3", got)
	}
	db.unmapper.wg.Wait()
	snap3 := filepath.Join(dir, snapshotDirName(3))
	withView := resMaps(t, snap3)
	// a view of 5 shares the database's mapping and evicts the one of 4
	vw, err = db.ViewAt(5)
	if err != nil {
		t.Fatal(err)
	}
	vw.Release()
	db.unmapper.wg.Wait()
	one := resMaps(t, snap3)
	if one == 0 {
		t.Fatal("snapshot 3 not mapped")
	}
	if withView != one {
		t.Errorf("snapshot 3 held %d mappings while the view of 4 (rebuilt before the switch) was cached, %d after: the snapshot was mapped %.0f times",
			withView, one, float64(withView)/float64(one))
	}
}
