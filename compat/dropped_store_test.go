package compat_test

import (
	"bytes"
	"fmt"
	"testing"

	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/types"
)

// The store standing for a mounted store that the load's upgrades remove
// (until the next Commit) answers LastCommitID and WorkingHash as
// rootmulti's emptied iavl.Store does.

func fmtCommitID(id types.CommitID) string {
	return fmt.Sprintf("{Version:%d Hash:%X (nil=%v)}", id.Version, id.Hash, id.Hash == nil)
}

// TestDroppedStoreLastCommitIDNeverCommitted: a removed store that was
// never committed (added, or renamed to, and deleted by the same upgrades)
// has version 0 and the empty tree's hash, not a nil hash.
func TestDroppedStoreLastCommitIDNeverCommitted(t *testing.T) {
	for _, c := range []struct {
		name  string
		up    *types.StoreUpgrades
		mount []string
	}{
		{"added-and-deleted", &types.StoreUpgrades{Added: []string{"store4"}, Deleted: []string{"store4"}}, []string{"store1", "store2", "store3", "store4"}},
		{"renamed-onto-deleted", &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store1", NewKey: "store4"}}, Deleted: []string{"store4"}}, []string{"store2", "store3", "store4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
			z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			z.set("store1", "k", "v")
			z.commit()
			z.fresh(c.mount, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
			if ec, eo := z.loadBoth("upgrade", func(s types.CommitMultiStore) error { return s.LoadLatestVersionAndUpgrade(c.up) }); ec != nil || eo != nil {
				t.Fatalf("load: ours %v | rootmulti %v", ec, eo)
			}
			ours := z.c.GetCommitKVStore(z.keys["store4"]).LastCommitID()
			root := z.o.GetCommitKVStore(z.keys["store4"]).LastCommitID()
			if ours.Version != root.Version || !bytes.Equal(ours.Hash, root.Hash) {
				t.Errorf("GetCommitKVStore(store4).LastCommitID(): ours %s | rootmulti %s", fmtCommitID(ours), fmtCommitID(root))
			}
			z.commit()
		})
	}
}

// TestDroppedStoreWorkingHash: a removed store takes writes until the next
// Commit and reads them back; its WorkingHash is the hash of those pairs
// at the multistore's working version, the same as rootmulti's: after a
// few committed versions, for a store added and deleted by the same
// upgrades, and on a new chain whose initial version is set after the
// load.
func TestDroppedStoreWorkingHash(t *testing.T) {
	for _, c := range []struct {
		name     string
		versions int
		up       *types.StoreUpgrades
		mount    []string
		store    string
		initial  int64
	}{
		{"deleted", 3, &types.StoreUpgrades{Deleted: []string{"store3"}}, sideStores, "store3", 0},
		{"added-and-deleted", 2, &types.StoreUpgrades{Added: []string{"store4"}, Deleted: []string{"store4"}}, []string{"store1", "store2", "store3", "store4"}, "store4", 0},
		{"new chain, initial version", 0, &types.StoreUpgrades{Deleted: []string{"store3"}}, sideStores, "store3", 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
			if c.versions > 0 {
				z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
				for i := 0; i < c.versions; i++ {
					for _, n := range sideStores {
						z.set(n, "k", fmt.Sprintf("v-%s-%d", n, i))
					}
					z.commit()
				}
			}
			z.fresh(c.mount, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
			if ec, eo := z.loadBoth("upgrade", func(s types.CommitMultiStore) error { return s.LoadLatestVersionAndUpgrade(c.up) }); ec != nil || eo != nil {
				t.Fatalf("load: ours %v | rootmulti %v", ec, eo)
			}
			if c.initial > 0 {
				z.loadBoth("SetInitialVersion", func(s types.CommitMultiStore) error { return s.SetInitialVersion(c.initial) })
			}
			z.set(c.store, "x", "y")
			z.same("get x", func(s types.CommitMultiStore) any { return getByName(s, c.store, "x") })
			ours := z.c.GetCommitKVStore(z.keys[c.store]).WorkingHash()
			root := z.o.GetCommitKVStore(z.keys[c.store]).WorkingHash()
			if !bytes.Equal(ours, root) {
				t.Errorf("GetCommitKVStore(%s).WorkingHash() after a write: ours %X | rootmulti %X", c.store, ours, root)
			}
			z.commit()
		})
	}
}
