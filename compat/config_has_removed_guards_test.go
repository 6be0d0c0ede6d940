package compat_test

// The first error of ConfigFromAppOptions, the inclusive bounds of
// Validate, Has over the write buffer, the lookups of a removed store
// after the Commit that completes its removal, and a store removed and
// added again before the first Commit.

import (
	"errors"
	"testing"

	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestConfigFirstErrorKept: a bad value is refused even when keys
// read after it are valid; the parse of a later key must not clear the
// error (the bad key would silently take its default).
func TestConfigFirstErrorKept(t *testing.T) {
	for _, opts := range []mapOptions{
		// a bad boolean, then valid integers
		{compat.FlagEnable: "maybe", compat.FlagSnapshotInterval: int64(100), compat.FlagQueryViews: 4},
		// a bad integer, then a valid boolean
		{compat.FlagSnapshotInterval: "often", compat.FlagZeroCopy: true},
		// a bad integer, then valid integers
		{compat.FlagSnapshotKeepRecent: "two", compat.FlagRewriteConcurrency: 2},
	} {
		if c, err := compat.ConfigFromAppOptions(opts); !errors.Is(err, compat.ErrInvalidConfig) {
			t.Errorf("%v accepted: %+v, %v", opts, c, err)
		}
	}
}

// TestConfigBoundsInclusive: the documented bounds are inclusive:
// rewrite-rate-limit "at least" MinRewriteRateLimit, async-commit-buffer
// "up to" MaxAsyncCommitBuffer.
func TestConfigBoundsInclusive(t *testing.T) {
	c := compat.DefaultConfig()
	c.RewriteRateLimit = multitree.MinRewriteRateLimit
	if err := c.Validate(); err != nil {
		t.Errorf("rewrite-rate-limit = the minimum: %v", err)
	}
	c = compat.DefaultConfig()
	c.AsyncCommitBuffer = multitree.MaxAsyncCommitBuffer
	if err := c.Validate(); err != nil {
		t.Errorf("async-commit-buffer = the maximum: %v", err)
	}
	c.AsyncCommitBuffer++
	if err := c.Validate(); !errors.Is(err, compat.ErrInvalidConfig) {
		t.Errorf("async-commit-buffer above the maximum: %v", err)
	}
}

// TestHasSeesBufferedWrites: Has, as Get, sees the writes buffered
// in the store in the same block (set, deleted, set again, empty value),
// before anything applies them.
func TestHasSeesBufferedWrites(t *testing.T) {
	keys := keyring{}
	ms := newOurs(t, t.TempDir(), testConfig(), keys, mount{iavl: []string{"s"}}, nil)
	defer ms.Close()
	st := ms.GetKVStore(keys["s"])
	k := []byte("k")
	has := func(what string, want bool) {
		t.Helper()
		if got := st.Has(k); got != want {
			t.Errorf("%s: Has = %v, want %v", what, got, want)
		}
	}
	has("empty store", false)
	st.Set(k, []byte("v"))
	has("after a buffered Set", true)
	st.Delete(k)
	has("after a buffered Delete", false)
	st.Delete(nil) // a no-op, as in iavl: nothing to apply or log
	has("after a Delete of a nil key", false)
	st.Set(k, []byte{})
	has("after a buffered Set of an empty value", true)
	ms.Commit()
	has("after the commit", true)
	st.Delete(k)
	has("after a buffered Delete of a committed key", false)
	ms.Commit()
	has("after the delete's commit", false)
}

// sideDeletingStore3 commits version 1 with pairs in store1 and store3
// side by side, then reopens both with an upgrade deleting store3, not yet
// committed.
func sideDeletingStore3(t *testing.T) *side {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store1", "k", "v")
	z.set("store3", "k", "v3")
	z.commit()
	z.fresh(sideStores, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("delete store3", func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Deleted: []string{"store3"}})
	})
	return z
}

// TestRemovedStoreGoneAfterCommit: once the Commit that follows a
// load deleting a mounted store has completed its removal, the store is
// gone from GetCommitKVStore and GetCommitStore (nil), as in rootmulti,
// not the emptied stand-in of the removal.
func TestRemovedStoreGoneAfterCommit(t *testing.T) {
	z := sideDeletingStore3(t)
	k3 := z.keys["store3"]
	z.want("GetCommitKVStore(store3) before the commit", "false", func(s types.CommitMultiStore) any { return s.GetCommitKVStore(k3) == nil })
	z.commit()
	z.want("GetCommitKVStore(store3) after the commit", "true", func(s types.CommitMultiStore) any { return s.GetCommitKVStore(k3) == nil })
	z.want("GetCommitStore(store3) after the commit", "true", func(s types.CommitMultiStore) any { return s.GetCommitStore(k3) == nil })
	// nor is it in the branches of the working state
	z.samePanicness("CacheMultiStore().GetKVStore(store3) after the commit", func(s types.CommitMultiStore) any {
		return s.CacheMultiStore().GetKVStore(k3)
	})
}

// TestReaddAtGenesisBeforeCommit: on a database with no committed
// version, a load that deletes a mounted store followed, before any
// Commit, by a load that adds it again. rootmulti keeps the first load's
// removal (its removalMap lasts until the Commit), so the Commit drops the
// store, with the writes made to it, from the commit info and the app
// hash; ours must give the same app hash and the same reads.
func TestReaddAtGenesisBeforeCommit(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("delete store3 at genesis", func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Deleted: []string{"store3"}})
	})
	z.loadBoth("add store3 again", func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Added: []string{"store3"}})
	})
	z.set("store1", "k", "v1")
	z.set("store3", "k", "v3")
	z.commit()
	z.same("store3 after the commit", func(s types.CommitMultiStore) any { return getByName(s, "store3", "k") })
	z.same("commit info", func(s types.CommitMultiStore) any { return commitInfoNames(s, 1) })
}
