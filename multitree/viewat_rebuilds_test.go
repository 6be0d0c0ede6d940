package multitree

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestViewAtRebuildsShared: concurrent ViewAt calls of old versions (gRPC
// queries at old heights) rebuild one version once, the other callers
// waiting for it and sharing it, with or without a cache (compat keeps its
// own and opens the database without one), and rebuild at most
// maxRebuilds versions at once, whatever the number of callers. Every
// caller gets its version.
func TestViewAtRebuildsShared(t *testing.T) {
	for _, cacheSize := range []int{0, -1} {
		db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, ViewCacheSize: cacheSize})
		if err != nil {
			t.Fatal(err)
		}
		hashes := commitN(t, db, 3, 40)
		var rebuilds, active, most atomic.Int64
		db.afterRebuild = func(int64) {
			rebuilds.Add(1)
			n := active.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond) // for the callers to meet
			active.Add(-1)
		}
		query := func(versions ...int64) {
			t.Helper()
			var wg sync.WaitGroup
			for _, v := range versions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					view, err := db.ViewAt(v)
					if err != nil {
						t.Error(err)
						return
					}
					defer view.Release()
					if h := view.CommitInfo().Hash(); string(h) != string(hashes[v]) {
						t.Errorf("view of %d: app hash %X, want %X", v, h, hashes[v])
					}
				}()
			}
			wg.Wait()
		}
		same := make([]int64, 8)
		for i := range same {
			same[i] = 10
		}
		query(same...)
		if rebuilds.Load() != 1 {
			t.Errorf("cache %d: 8 callers of one version: %d rebuilds, want 1", cacheSize, rebuilds.Load())
		}
		query(11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22)
		if most.Load() > int64(maxRebuilds) {
			t.Errorf("cache %d: %d rebuilds at once, the bound is %d", cacheSize, most.Load(), maxRebuilds)
		}
		db.afterRebuild = nil
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
