package compat

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/types"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// besideCloseStore returns a loaded multistore with store "a" holding
// x=v<h> at versions 1 to 5.
func besideCloseStore(t *testing.T) *MultiStore {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Enable = true
	ms, err := NewMultiStore(t.TempDir(), log.NewNopLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	key := types.NewKVStoreKey("a")
	ms.MountStoreWithDB(key, types.StoreTypeIAVL, nil)
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		ms.GetKVStore(key).Set([]byte("x"), []byte(fmt.Sprintf("v%d", i)))
		ms.Commit()
	}
	return ms
}

// TestQueryBesideClose: a query that read the multistore's database just
// before a reload or Close (closeDB and Close first unbind the view cache,
// then swap s.db, then close the database) fails with ErrNotLoaded (or
// multitree.ErrClosed), as Query documents, and never answers that the key
// is absent (the answer is dropped if the cache no longer serves its
// database once it is built). Both interleavings are set up
// deterministically: the cache unbound with s.db still set (the first step
// of closeDB and Close), and a database the query loaded before Close
// closed it.
func TestQueryBesideClose(t *testing.T) {
	closed := func(err error) bool {
		return errors.Is(err, ErrNotLoaded) || errors.Is(err, multitree.ErrClosed)
	}
	t.Run("cache unbound", func(t *testing.T) {
		ms := besideCloseStore(t)
		defer ms.Close()
		ms.views.bind(nil) // closeDB's first step; s.db is swapped next
		for _, h := range []int64{0, 4} {
			res, err := ms.Query(&types.RequestQuery{Path: "/a/key", Data: []byte("x"), Height: h})
			if !closed(err) {
				t.Errorf("query of x at height %d beside a reload: value %q, height %d, log %q, err %v; want ErrNotLoaded",
					h, res.Value, res.Height, res.Log, err)
			}
		}
	})
	t.Run("database closed", func(t *testing.T) {
		ms := besideCloseStore(t)
		db := ms.db.Load()
		if err := ms.Close(); err != nil {
			t.Fatal(err)
		}
		ms.db.Store(db) // as read by a query before Close swapped it out
		defer ms.db.Store(nil)
		for _, h := range []int64{0, 4} {
			res, err := ms.Query(&types.RequestQuery{Path: "/a/key", Data: []byte("x"), Height: h})
			if !closed(err) {
				t.Errorf("query of x at height %d beside Close: value %q, height %d, log %q, err %v; want ErrNotLoaded",
					h, res.Value, res.Height, res.Log, err)
			}
		}
	})
}

// TestSnapshotBesideClose: a state-sync Snapshot that read the database
// just before Close (or a reload) closed it reports that the multistore is
// closed, not a logic error about a "future height" that was committed.
func TestSnapshotBesideClose(t *testing.T) {
	ms := besideCloseStore(t)
	db := ms.db.Load()
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	ms.db.Store(db) // as read by Snapshot before Close swapped it out
	defer ms.db.Store(nil)
	var buf bytes.Buffer
	err := ms.Snapshot(5, protoio.NewDelimitedWriter(&buf))
	if !errors.Is(err, ErrNotLoaded) && !errors.Is(err, multitree.ErrClosed) {
		t.Errorf("Snapshot(5) beside Close: %v; want ErrNotLoaded or multitree.ErrClosed", err)
	}
}
