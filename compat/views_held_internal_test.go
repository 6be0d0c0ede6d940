package compat

import (
	"fmt"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/types"
)

// TestHeldViewServesBranches: while a state-sync snapshot holds a version,
// a branch of that version reads the held view, even when a query opened
// another view of the version beside the hold and the cache took that one
// in after evicting the held one (the interleaving is set up step by step:
// the query's open, the hold, an eviction, the query's open finishing).
// The cache releases the other view when it evicts it again; a branch on it
// would panic ErrVersionReleased although the version is held.
func TestHeldViewServesBranches(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Enable = true
	cfg.QueryViews = 1
	ms, err := NewMultiStore(t.TempDir(), log.NewNopLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	key := types.NewKVStoreKey("a")
	ms.MountStoreWithDB(key, types.StoreTypeIAVL, nil)
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		ms.GetKVStore(key).Set([]byte("x"), []byte(fmt.Sprintf("v%d", i)))
		ms.Commit()
	}
	db := ms.db.Load()
	evict := func(h int64) {
		t.Helper()
		v, err := ms.views.get(db, h)
		if err != nil {
			t.Fatal(err)
		}
		v.Unpin()
	}

	// a query begins opening version 3 without the cache's lock
	other, err := db.ViewAt(3)
	if err != nil {
		t.Fatal(err)
	}
	// Snapshot holds version 3
	held, err := ms.views.hold(db, 3)
	if err != nil {
		t.Fatal(err)
	}
	held.Unpin()
	defer ms.PruneSnapshotHeight(3)
	evict(4) // the cache (one view) evicts the held view
	// the query's open finishes
	got, err := ms.views.adopt(db, other)
	if err != nil {
		t.Fatal(err)
	}
	if got != held {
		t.Errorf("a view opened beside the hold was served instead of the held one")
	}
	got.Unpin()

	b, err := ms.CacheMultiStoreWithVersion(3)
	if err != nil {
		t.Fatal(err)
	}
	evict(5) // evicts whatever the cache holds of version 3
	func() {
		defer func() {
			if x := recover(); x != nil {
				t.Fatalf("branch of held version 3 read after an eviction panicked: %v", x)
			}
		}()
		if v := b.GetKVStore(key).Get([]byte("x")); string(v) != "v3" {
			t.Fatalf("branch of held version 3 read x=%q, want v3", v)
		}
	}()
}
